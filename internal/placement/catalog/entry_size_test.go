package catalog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/epochfs/epochfs/internal/source"
)

// An entry stays 56 bytes with the placer's residency in it: every file
// of a dataset has one entry (in a block of them: slab.go). An
// entryMore's tag is its first byte (Entry.pm).
func TestEntrySizeWithResidency(t *testing.T) {
	if n := unsafe.Sizeof(Entry{}); n > 56 {
		t.Errorf("catalog.Entry is %d bytes, want at most 56", n)
	}
	if o := unsafe.Offsetof(entryMore{}.tag); o != 0 {
		t.Errorf("entryMore's tag is at offset %d, want 0", o)
	}
}

// An ID past 32 bits is kept beside the entry, whole; a path reads back
// as it was set.
func TestEntryIDAndPathRoundTrip(t *testing.T) {
	for _, id := range []uint64{1, 2, 1<<32 - 1, 1 << 32, 1<<32 + 5, 1<<64 - 1} {
		e := NewFile("d/ü f", Attr{Size: 3})
		e.setTarget("")
		e.setID(id)
		if got := e.ID(); got != id {
			t.Errorf("ID %d read back as %d", id, got)
		}
		if e.Path() != "d/ü f" || e.Name() != "ü f" || e.Attr().Size != 3 {
			t.Errorf("ID %d: path %q, name %q, size %d", id, e.Path(), e.Name(), e.Attr().Size)
		}
	}
	if r := NewDir("", nil); r.Path() != "" || r.Name() != "" {
		t.Errorf("the root's path %q, name %q", r.Path(), r.Name())
	}
}

// The compact attributes give back what was stored, and attributes that
// do not fit them are kept whole.
func TestEntryAttributesAreExact(t *testing.T) {
	a := Attr{Size: 1 << 40, Mtime: -12345, Mode: 0o100644, UID: 1<<32 - 1, GID: 7, Nlink: 3,
		Blocks: 1<<32 - 1, Atime: 1_700_000_000_123_456_789, Ctime: 1_800_000_000_987_654_321}
	for _, c := range []struct {
		size, blocks int64
		compact      bool
	}{
		{0, 0, true}, {1, 8, true}, {4096, 8, true}, {1 << 20, 1<<20/512 - 100, true}, // a compressed file
		{100, 1 << 15, true}, {100, 1<<15 + 1, false}, {1 << 30, 1<<21 - 1<<15, true}, {1 << 30, 1<<21 - 1<<15 - 1, false},
		{1<<32 - 1, 1 << 23, true}, {1 << 32, 1 << 23, false}, {1 << 40, 1<<32 - 1, false}, {1 << 40, 1 << 50, false},
		{5, -1, true}, {-1, 0, false},
	} {
		a.Size, a.Blocks = c.size, c.blocks
		blocks := c.blocks
		e := newOfKind(KindFile)
		e.initAttr(a)
		if got := e.Attr(); got != a {
			t.Errorf("size %d blocks %d: attributes %+v, want %+v", c.size, blocks, got, a)
		}
		if compact := e.moreOf() == nil; compact != c.compact {
			t.Errorf("size %d blocks %d: held in the entry's compact fields %v, want %v", c.size, blocks, compact, c.compact)
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

// The tier, the gone mark and the kind share the word of the placer's
// residency without touching each other or it, and the check time is
// apart.
func TestEntryStateWords(t *testing.T) {
	e := newOfKind(KindFile)
	if e.Tier() != -1 || e.Gone() {
		t.Fatalf("new entry: tier %d gone %v", e.Tier(), e.Gone())
	}
	e.Residency().SetRecheck(true)
	e.Residency().BumpCopyGen()
	defer func() {
		if e.Kind() != KindFile || !e.Residency().Recheck() || e.Residency().Validated() || e.Residency().CopyGen() != 1 {
			t.Errorf("after the tier and gone changes: kind %d, recheck %v, generation %d", e.Kind(), e.Residency().Recheck(), e.Residency().CopyGen())
		}
	}()
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
	d := newOfKind(KindDir)
	// A record may name a target or a link for a directory (a damaged
	// state directory): they are dropped, the children pointer kept.
	d.setTarget("x")
	d.setLink(&linkKey{ino: 1})
	if d.Listed() || d.Children().Len() != 0 || d.Target() != "" || d.link() != nil {
		t.Fatalf("new directory: listed %v target %q", d.Listed(), d.Target())
	}
	d.setChildren(ptrKids([]*Entry{e}))
	if !d.Listed() || d.Children().Len() != 1 || d.Target() != "" || d.link() != nil {
		t.Fatalf("directory with a child: listed %v children %d", d.Listed(), d.Children().Len())
	}
	s := newOfKind(KindSymlink)
	s.setTarget("../x")
	if s.Target() != "../x" || s.Children().Len() != 0 || s.Listed() != true {
		t.Fatalf("symlink: target %q", s.Target())
	}
	for _, k := range []Kind{KindFile, KindDir, KindSymlink} {
		x := newOfKind(k)
		x.Residency().SetNoSpace(true)
		x.SetTier(254)
		x.setGone()
		x.Residency().BumpCopyGen()
		if x.Kind() != k || x.Tier() != 254 || !x.Gone() || !x.Residency().NoSpace() || x.Residency().CopyGen() != 1 {
			t.Errorf("kind %d: read back kind %d tier %d gone %v nospace %v", k, x.Kind(), x.Tier(), x.Gone(), x.Residency().NoSpace())
		}
	}
}

// A slab hands out distinct zeroed entries: a sized one from one block of
// its size, one of unknown size from blocks that grow to slabMax.
func TestEntrySlabBlocks(t *testing.T) {
	s := sizedSlab(3)
	a, b, c := s.alloc(), s.alloc(), s.alloc()
	if unsafe.Pointer(b) != unsafe.Add(unsafe.Pointer(a), unsafe.Sizeof(Entry{})) || unsafe.Pointer(c) != unsafe.Add(unsafe.Pointer(b), unsafe.Sizeof(Entry{})) {
		t.Fatal("a sized slab's entries are not in one block")
	}
	a.SetTier(1)
	if b.Tier() != -1 || s.alloc() == c {
		t.Fatal("entries of a slab share state")
	}
	var u entrySlab
	seen := map[*Entry]bool{}
	for range 5000 {
		e := u.alloc()
		if seen[e] || e.Kind() != 0 || e.Path() != "" {
			t.Fatalf("entry %p handed out twice or not zeroed", e)
		}
		seen[e] = true
		e.setKind(KindFile)
	}
	if u.next != slabMax || cap(u.buf) != slabMax {
		t.Errorf("blocks grew to %d entries, want %d", u.next, slabMax)
	}
}

// The class table numbers each class once, gives every caller the same
// number, and refuses a class more than it holds; an entry whose class
// does not fit keeps its attributes whole.
func TestAttrClassTableIsBounded(t *testing.T) {
	tab := newClassTable(3 * classChunk)
	var wg sync.WaitGroup
	got := make([][]uint16, 4)
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3 * classChunk {
				id, ok := tab.of(attrClass{mode: 0o100000 | uint32(i), uid: 1000, gid: 1000, nlink: 1})
				if !ok {
					t.Errorf("class %d refused with %d in the table", i, tab.n)
					return
				}
				got[g] = append(got[g], id)
			}
		}()
	}
	wg.Wait()
	seen := map[uint16]bool{}
	for i, id := range got[0] {
		for g := range got {
			if got[g][i] != id {
				t.Fatalf("class %d numbered %d and %d", i, id, got[g][i])
			}
		}
		if seen[id] {
			t.Fatalf("number %d given to two classes", id)
		}
		seen[id] = true
		if k := tab.at(id); k.mode != 0o100000|uint32(i) {
			t.Fatalf("class %d reads back as %+v", id, k)
		}
	}
	if _, ok := tab.of(attrClass{mode: 0o100777, uid: 1}); ok {
		t.Fatal("a class was added to a full table")
	}
	if id, ok := tab.of(attrClass{mode: 0o100005, uid: 1000, gid: 1000, nlink: 1}); !ok || id != got[0][5] {
		t.Fatalf("a known class in a full table: %d %v", id, ok)
	}
	a := Attr{Size: 5, Mtime: 6, Mode: 0o100600, UID: 77, GID: 78, Nlink: 9, Blocks: 8, Atime: 10, Ctime: 11}
	e := newOfKind(KindFile)
	e.initAttrIn(tab, a)
	if m := e.moreOf(); m == nil || m.attr == nil {
		t.Fatal("an entry whose class did not fit was stored compact")
	}
	if got := e.Attr(); got != a {
		t.Fatalf("attributes %+v, want %+v", got, a)
	}
}

// Entries of the same mode, owner and link count share a class; others
// get their own, and each reads back its own.
func TestEntriesShareAttrClasses(t *testing.T) {
	for i := range 1000 {
		a := Attr{Size: int64(i), Mode: 0o100644 | uint32(i%3)<<6, UID: 4000 + uint32(i%5), GID: 4000, Nlink: 1 + uint32(i%2)}
		e := newOfKind(KindFile)
		e.initAttr(a)
		if m := e.moreOf(); m != nil && m.attr != nil {
			t.Fatalf("entry %d kept its attributes whole", i)
		}
		if got := e.Attr(); got != a {
			t.Fatalf("entry %d: %+v, want %+v", i, got, a)
		}
	}
}

// A directory's children and its attributes share the entry's one
// pointer: a refresh replacing the children while a validation replaces
// the attributes loses neither.
func TestEntryMoreKeepsConcurrentChanges(t *testing.T) {
	for range 200 {
		d := newOfKind(KindDir)
		d.initAttr(Attr{Mode: 0o40755, Nlink: 2})
		kids := make([][]*Entry, 100)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range kids {
				kids[i] = []*Entry{NewFile("k", Attr{})}
				d.setChildren(ptrKids(kids[i]))
			}
		}()
		go func() {
			defer wg.Done()
			for i := range 100 {
				d.SetAttr(Attr{Mode: 0o40755, Nlink: 2, Mtime: int64(i)})
			}
		}()
		wg.Wait()
		if got := d.Children().Slice(); len(got) != 1 || got[0] != kids[99][0] || !d.Listed() {
			t.Fatalf("children after the race: %v (listed %v), want the last set", got, d.Listed())
		}
		if a := d.Attr(); a.Mtime != 99 {
			t.Fatalf("attributes after the race: %+v, want the last set (mtime 99)", a)
		}
	}
}

// A file's path and its entryMore share one pointer: readers of the path
// and the attributes while a file gets its first entryMore (a new content)
// see the path whole and the attributes old or new, never a mix, for
// paths whose length takes one byte and two, and for the root's.
func TestAPathReadsTheSameWhileTheEntryGetsMore(t *testing.T) {
	for _, p := range []string{"", "f", "d/" + strings.Repeat("x", 125), "d/" + strings.Repeat("y", 126), strings.Repeat("z/", 300) + "f"} {
		for range 50 {
			a := Attr{Size: 1, Mtime: 10, Mode: 0o100644, Nlink: 1}
			e := NewFile(p, a)
			b := a
			b.Size, b.Mtime = 2, 20
			var wg sync.WaitGroup
			errs := make(chan string, 4)
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 200 {
						if got := e.Path(); got != p {
							errs <- fmt.Sprintf("path %q, want %q", got, p)
							return
						}
						if got, v := e.Snapshot(); !(got == a && v == 0 || got == b && v == 1) {
							errs <- fmt.Sprintf("snapshot %+v version %d", got, v)
							return
						}
					}
				}()
			}
			e.SetContent(b)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("path %q: %s", p, err)
			}
			if e.moreOf() == nil || e.Path() != p || e.Attr() != b {
				t.Fatalf("path %q after the change: more %v, path %q, attributes %+v", p, e.moreOf() != nil, e.Path(), e.Attr())
			}
		}
	}
}

// A walk and a load make the entries of a directory in one block of
// entries (slab.go), and their paths in one block of paths (arena.go),
// as their names after the directory's path:
// the first walk, in the foreground and in the background, and the load
// at a remount in the background (the daemon's). An eager load reads the
// whole tree's records in key order into growing blocks: there only the
// entries are checked.
func TestAWalkAndALoadMakeADirectorysEntriesInOneBlock(t *testing.T) {
	src := t.TempDir()
	if err := os.Mkdir(filepath.Join(src, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 40
	for i := range n {
		if err := os.WriteFile(filepath.Join(src, "d", fmt.Sprintf("f%03d.jpg", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	oneBlock := func(how string, c *Catalog, contiguous bool) {
		t.Helper()
		d := c.Find("d")
		if d == nil {
			t.Fatalf("%s: no directory d", how)
		}
		if err := c.List(context.Background(), d); err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		if contiguous && d.Children().block == nil {
			t.Fatalf("%s: d's entries are pointers, not a block", how)
		}
		kids := d.Children().Slice()
		if len(kids) != n {
			t.Fatalf("%s: %d entries in d, want %d", how, len(kids), n)
		}
		for i := 1; i < n; i++ {
			if contiguous && unsafe.Pointer(kids[i]) != unsafe.Add(unsafe.Pointer(kids[i-1]), unsafe.Sizeof(Entry{})) {
				t.Fatalf("%s: entries %d and %d of d are not next to each other", how, i-1, i)
			}
			prev, rec := storedOf(kids[i-1]), storedOf(kids[i])
			h, k := uvarintAt(rec)
			if h&1 == 0 {
				t.Fatalf("%s: entry %d's path is stored whole, not as a name after its directory's", how, i)
			}
			if dir, stem, suffix := childOf(rec, h, k); dir != "d" || stem != fmt.Sprintf("f%03d", i) || suffix != ".jpg" {
				t.Fatalf("%s: entry %d's record: directory %q, stem %q, suffix %q", how, i, dir, stem, suffix)
			}
			if contiguous && unsafe.Pointer(rec) != unsafe.Add(unsafe.Pointer(prev), recordLen(prev)) {
				t.Fatalf("%s: the paths of entries %d and %d are not next to each other", how, i-1, i)
			}
			if want := fmt.Sprintf("d/f%03d.jpg", i); kids[i].Path() != want || kids[i].Kind() != KindFile || kids[i].Attr().Size != 1 {
				t.Fatalf("%s: entry %d is %q (kind %d, size %d), want %q", how, i, kids[i].Path(), kids[i].Kind(), kids[i].Attr().Size, want)
			}
		}
	}
	s := openSource(t, source.Options{Root: src})
	for _, bg := range []bool{false, true} {
		state := fastDir(t)
		c := openWalked(t, Options{StateDir: state, Source: src, Walker: s, Background: bg})
		oneBlock(fmt.Sprintf("walk (background %v)", bg), c, true)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		c = openWalked(t, Options{StateDir: state, Source: src, Walker: s, Background: bg})
		oneBlock(fmt.Sprintf("load (background %v)", bg), c, bg)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// storedOf is the record of e's path.
func storedOf(e *Entry) *byte { return e.stored() }

// recordLen is the bytes the child's record at p takes.
func recordLen(p *byte) int {
	h, k := uvarintAt(p)
	_, j := uvarintAt((*byte)(unsafe.Add(unsafe.Pointer(p), k)))
	return k + j + int(h>>2)
}
