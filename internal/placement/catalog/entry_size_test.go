package catalog

import (
	"testing"
	"unsafe"
)

// An entry stays 128 bytes (a size class of Go's allocator) with the
// placer's residency in it: every file of a dataset has one entry.
func TestEntrySizeWithResidency(t *testing.T) {
	if n := unsafe.Sizeof(Entry{}); n > 128 {
		t.Errorf("catalog.Entry is %d bytes, want at most 128", n)
	}
}

// The compact attributes give back what was stored, and attributes that
// do not fit them are kept whole.
func TestEntryAttributesAreExact(t *testing.T) {
	a := Attr{Size: 1 << 40, Mtime: -12345, Mode: 0o100644, UID: 1<<32 - 1, GID: 7, Nlink: 3,
		Blocks: 1<<32 - 1, Atime: 1_700_000_000_123_456_789, Ctime: 1_800_000_000_987_654_321}
	for _, blocks := range []int64{0, 8, 1<<32 - 1, 1 << 32, 1 << 50, -1} {
		a.Blocks = blocks
		e := &Entry{Kind: KindFile}
		e.initAttr(a)
		if got := e.Attr(); got != a {
			t.Errorf("blocks %d: attributes %+v, want %+v", blocks, got, a)
		}
		if got, v := e.Snapshot(); got != a || v != 0 {
			t.Errorf("blocks %d: snapshot %+v version %d", blocks, got, v)
		}
		b := a
		b.Size++
		e.SetContent(b)
		if got, v := e.Snapshot(); got != b || v != 1 {
			t.Errorf("blocks %d: after a change %+v version %d, want %+v version 1", blocks, got, v, b)
		}
	}
}

// The tier, the gone mark and the check time share words of the entry
// without touching each other.
func TestEntryStateWords(t *testing.T) {
	e := &Entry{Kind: KindFile}
	if e.Tier() != -1 || e.Gone() {
		t.Fatalf("new entry: tier %d gone %v", e.Tier(), e.Gone())
	}
	e.SetTier(3)
	if e.DropTier(2) || e.Tier() != 3 {
		t.Fatalf("DropTier(2) of tier 3 dropped it: tier %d", e.Tier())
	}
	e.setGone()
	if !e.Gone() || e.Tier() != 3 {
		t.Fatalf("after setGone: tier %d gone %v", e.Tier(), e.Gone())
	}
	if !e.DropTier(3) || e.Tier() != -1 || !e.Gone() {
		t.Fatalf("DropTier(3): tier %d gone %v", e.Tier(), e.Gone())
	}
	e.SetTier(0)
	e.SetTier(-1)
	if e.Tier() != -1 {
		t.Fatalf("SetTier(-1): tier %d", e.Tier())
	}
	for _, c := range []struct{ set, want int64 }{{1_800_000_000, 1_800_000_000}, {-5, 0}, {1 << 40, 1<<32 - 1}} {
		e.SetChecked(c.set)
		if got := e.Checked(); got != c.want {
			t.Errorf("SetChecked(%d): Checked %d, want %d", c.set, got, c.want)
		}
	}
	d := &Entry{Kind: KindDir}
	// A record may name a target or a link for a directory (a damaged
	// state directory): they are dropped, the children pointer kept.
	d.setTarget("x")
	d.setLink(&linkKey{ino: 1})
	if d.Listed() || d.Children() != nil || d.Target() != "" || d.link() != nil {
		t.Fatalf("new directory: listed %v target %q", d.Listed(), d.Target())
	}
	d.setChildren([]*Entry{e})
	if !d.Listed() || len(d.Children()) != 1 || d.Target() != "" || d.link() != nil {
		t.Fatalf("directory with a child: listed %v children %d", d.Listed(), len(d.Children()))
	}
	s := &Entry{Kind: KindSymlink}
	s.setTarget("../x")
	if s.Target() != "../x" || s.Children() != nil || s.Listed() != true {
		t.Fatalf("symlink: target %q", s.Target())
	}
}
