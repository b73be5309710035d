package catalog

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/epochfs/epochfs/internal/source"
)

// Kids read the same whether they are a block of entries or pointers:
// length, order, the entry at an index, and a lookup by name (found and
// not found, before the first and past the last).
func TestKidsAsABlockAndAsPointers(t *testing.T) {
	names := []string{"a", "b.jpg", "b0", "c", "ü"}
	s := sizedSlab(len(names))
	var ptrs []*Entry
	for _, n := range names {
		e := s.alloc()
		e.setPath("d/" + n)
		e.setKind(KindFile)
		ptrs = append(ptrs, e)
	}
	for _, k := range []Kids{blockKids(s.block()), ptrKids(ptrs)} {
		if k.Len() != len(names) || !slices.Equal(k.Slice(), ptrs) {
			t.Fatalf("block %v: %d entries, not those made", k.block != nil, k.Len())
		}
		i := 0
		for e := range k.All() {
			if e != ptrs[i] || k.At(i) != e {
				t.Fatalf("block %v: entry %d out of order", k.block != nil, i)
			}
			i++
		}
		for j, n := range names {
			if got := k.Lookup(n); got != ptrs[j] {
				t.Errorf("block %v: Lookup(%q) = %v", k.block != nil, n, got)
			}
		}
		for _, n := range []string{"", "0", "b", "b1", "z", "üü"} {
			if got := k.Lookup(n); got != nil {
				t.Errorf("block %v: Lookup(%q) found %q", k.block != nil, n, got.Path())
			}
		}
	}
	var none Kids
	if none.Len() != 0 || none.Lookup("a") != nil || len(none.Slice()) != 0 {
		t.Error("no kids are not empty")
	}
	// An entry taken back leaves the block as if it was never handed out.
	u := sizedSlab(3)
	a := u.alloc()
	b := u.alloc()
	b.setKind(KindSymlink)
	u.unalloc()
	c := u.alloc()
	if c != b || c.Kind() != 0 || len(u.block()) != 2 || &u.block()[0] != a {
		t.Fatal("unalloc did not take back the last entry")
	}
}

// A walk that skips a special file keeps the directory's entries one
// block, with no gap; a refresh's change of the directory makes its
// entries pointers, which keep every entry of the block.
func TestAWalkSkipsASpecialFileWithoutAGapInTheBlock(t *testing.T) {
	src := t.TempDir()
	for i := range 5 {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(src, "f2-fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := openCat(t, Options{StateDir: fastDir(t), Source: src, Walker: openSource(t, source.Options{Root: src})})
	defer c.Close()
	k := c.Root().Children()
	if k.block == nil || k.Len() != 5 || len(k.block) != 5 {
		t.Fatalf("the root's entries: a block %v of %d, %d entries", k.block != nil, len(k.block), k.Len())
	}
	for i := range 5 {
		if k.At(i).Path() != fmt.Sprintf("f%d", i) || k.At(i).Kind() != KindFile {
			t.Fatalf("entry %d is %q", i, k.At(i).Path())
		}
	}
	if err := os.WriteFile(filepath.Join(src, "f25"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(src, "f25"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Add(NewEntry("f25", fi, "")); err != nil {
		t.Fatal(err)
	}
	after := c.Root().Children()
	if after.block != nil || after.Len() != 6 || after.At(2) != k.At(2) || after.At(3).Path() != "f25" || after.At(5) != k.At(4) {
		t.Fatalf("after the add: a block %v, %d entries", after.block != nil, after.Len())
	}
}
