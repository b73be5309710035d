package chaos

import (
	"testing"
	"time"
)

// A copy seen through a directory swapped for a symlink is forgotten when
// the file it reads as changes, and a copy seen after a change the mount
// has not learned of yet (no refresh since) is not counted as kept: the
// mount drops it when it learns. The soak's seed 1795789933877227902 took
// both for a lost copy.
func TestTheModelKeepsOnlyCopiesNothingMayDrop(t *testing.T) {
	r := &runner{m: newModel("once", time.Minute), step: 1}
	r.m.write("d0/f.bin", []byte("one"), 0)
	r.m.links["d0"] = "d0.old"
	r.m.remove("d0/f.bin")
	r.m.write("d0.old/f.bin", []byte("one"), 1)
	r.m.files["d0.old/f.bin"].behind = false // a refresh since

	mem, source := answer{data: []byte("mem")}, answer{data: []byte("source")}
	if err := r.checkTier("d0/f.bin", mem); err != nil || !r.m.files["d0/f.bin"].resident {
		t.Fatalf("a copy seen through the symlink: %v, resident %v", err, r.m.files["d0/f.bin"].resident)
	}
	if err := r.checkTier("d0/f.bin", source); err == nil {
		t.Fatal("a copy seen and lost with nothing in between was not reported")
	}
	r.m.write("d0.old/f.bin", []byte("two"), 2) // rewritten under its real name
	if r.m.files["d0/f.bin"].resident {
		t.Fatal("a change of the file a path reads as kept the path's copy")
	}
	if err := r.checkTier("d0/f.bin", mem); err != nil || r.m.files["d0/f.bin"].resident {
		t.Fatalf("a copy seen before the mount learned of the change: %v, counted resident %v", err, r.m.files["d0/f.bin"].resident)
	}
	if err := r.checkTier("d0/f.bin", source); err != nil {
		t.Fatalf("the mount dropping a copy of a replaced content: %v", err)
	}
}

// A listing shows what the source had: its files, directories and
// symlinks, under the directory or one it reads as, and the temporary
// name an add wrote a file under before renaming it (a refresh running
// meanwhile lists it: seed 1795817817344831585), never another name.
func TestTheModelListsWhatTheSourceHadAndNothingElse(t *testing.T) {
	m := newModel("never", time.Minute)
	m.write("d1/n1.bin", []byte("x"), 3)
	m.links["d2"] = "d2.old"
	m.write("d2.old/f.bin", []byte("y"), 4)
	for _, c := range []struct {
		dir, name string
		want      bool
	}{
		{"", ".epochfs", true},
		{"d1", ".epochfs", false},
		{"d1", "n1.bin", true},
		{"d1", "n1.bin.tmp", true},
		{"d1", "n2.bin.tmp", false},
		{"d1", "n1.bin.old", false},
		{"", "d1", true},
		{"", "d2", true},
		{"d2", "f.bin", true},
		{"d2", "g.bin", false},
	} {
		if got := m.mayList(c.dir, c.name); got != c.want {
			t.Errorf("listing %q shows %q: allowed %v, want %v", c.dir, c.name, got, c.want)
		}
	}
}

// With validate = "open" a stat is not an open: after a rewrite on the
// source it may show the size the mount last saw until an open (or a
// refresh) sees the change, and only the current size after that. Seed
// 1796008295816858578 took a stat's walked size for an error.
func TestTheModelLetsAStatShowTheOldSizeUntilAnOpen(t *testing.T) {
	m := newModel("open", 0)
	m.write("d2/f19.bin", []byte("walked content"), 0)
	m.write("d2/f19.bin", []byte("new"), 12)
	old, cur := answer{size: int64(len("walked content"))}, answer{size: 3}
	if err := m.check("d2/f19.bin", -1, 0, old, true); err != nil {
		t.Fatalf("a stat before any open showed the walked size: %v", err)
	}
	if err := m.check("d2/f19.bin", -1, 0, answer{size: 7}, true); err == nil {
		t.Fatal("a stat showed a size no version had")
	}
	m.files["d2/f19.bin"].opened = true // an open saw the change
	if err := m.check("d2/f19.bin", -1, 0, old, true); err == nil {
		t.Fatal("a stat after an open showed the old size")
	}
	if err := m.check("d2/f19.bin", -1, 0, cur, true); err != nil {
		t.Fatalf("a stat after an open showed the current size: %v", err)
	}
	m.write("d2/f19.bin", []byte("newer one"), 13)
	if m.files["d2/f19.bin"].opened {
		t.Fatal("a rewrite kept the open that saw the version before it")
	}
	m.files["d2/f19.bin"].behind, m.files["d2/f19.bin"].opened = false, false // a refresh since
	if err := m.check("d2/f19.bin", -1, 0, cur, true); err == nil {
		t.Fatal("a stat after a refresh showed an old size")
	}
}
