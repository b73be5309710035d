package catalog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// TestAddGrowsTheTableOfFilesInPlace: files a refresh adds one at a time
// take the numbers after the others, each found by ByIndex at once; a
// table handed out before (Numbered) keeps what it held; and the table's
// arrays are copied as an append copies them (a dozen times for 2,000
// files), not once a file (Numbering).
func TestAddGrowsTheTableOfFilesInPlace(t *testing.T) {
	src := catalogTree(t)
	c := openCat(t, Options{StateDir: fastDir(t), Source: src})
	defer c.Close()
	before := c.Numbered()
	var held []*Entry
	for _, e := range before.All() {
		held = append(held, e)
	}
	if err := os.Mkdir(filepath.Join(src, "added"), 0o755); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(src, "added"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Add(NewEntry("added", fi, "")); err != nil {
		t.Fatal(err)
	}
	arrays := map[*run]bool{unsafe.SliceData(c.byIndex.Load().runs): true}
	// A reader of the table while it grows (the jobs take in added files
	// this way): under -race, no read meets a write.
	stop, readerDone := make(chan struct{}), make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				readerDone <- nil
				return
			default:
			}
			all := c.Numbered()
			for i, e := range all.All() {
				if e == nil || int(e.Index) != i || all.At(i) != e {
					readerDone <- fmt.Errorf("a reader of the growing table: [%d] = %v", i, e)
					return
				}
			}
			if e := c.ByIndex(all.Len() - 1); e != all.At(all.Len()-1) {
				readerDone <- fmt.Errorf("ByIndex(%d) is not the table's last file", all.Len()-1)
				return
			}
		}
	}()
	const n = 2000
	for i := range n {
		p := fmt.Sprintf("added/f%04d", i)
		if err := os.WriteFile(filepath.Join(src, p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(filepath.Join(src, p))
		if err != nil {
			t.Fatal(err)
		}
		e := NewEntry(p, fi, "")
		if err := c.Add(e); err != nil {
			t.Fatal(err)
		}
		if want := len(held) + i; int(e.Index) != want || c.ByIndex(want) != e || c.Indexed() != want+1 {
			t.Fatalf("%s: Index %d, ByIndex(%d) = %v, Indexed %d; want it numbered %d and found", p, e.Index, want, c.ByIndex(want), c.Indexed(), want)
		}
		arrays[unsafe.SliceData(c.byIndex.Load().runs)] = true
	}
	close(stop)
	if err := <-readerDone; err != nil {
		t.Fatal(err)
	}
	if len(arrays) > 12 {
		t.Errorf("the table was copied %d times for %d files added one at a time", len(arrays)-1, n)
	}
	for i, e := range held {
		if before.At(i) != e || c.ByIndex(i) != e {
			t.Fatalf("number %d changed under a holder of the table", i)
		}
	}
	if before.Len() != len(held) || before.At(len(held)) != nil {
		t.Fatalf("a table handed out grew: len %d, was %d", before.Len(), len(held))
	}
	all := c.Numbered()
	if all.Len() != len(held)+n {
		t.Fatalf("Numbered: %d files, want %d", all.Len(), len(held)+n)
	}
	for i, e := range all.All() {
		if e == nil || int(e.Index) != i {
			t.Fatalf("Numbered()[%d] = %v", i, e)
		}
	}
}

// BenchmarkAddToAMillionFiles: a refresh adding a file to a catalog of a
// million (the table of files by Index used to be copied whole each time).
func BenchmarkAddToAMillionFiles(b *testing.B) {
	const dirs, per = 1000, 1000
	top := make([]*Entry, dirs)
	for d := range dirs {
		kids := make([]*Entry, per)
		for f := range per {
			kids[f] = NewFile(fmt.Sprintf("d%04d/f%04d", d, f), Attr{Size: 1, Mode: 0o100644, Nlink: 1})
		}
		top[d] = NewDir(fmt.Sprintf("d%04d", d), kids)
	}
	c := NewTree(NewDir("", top), nil)
	c.w.pending, c.w.kick = map[string]*Entry{}, make(chan struct{}, 1)
	b.ResetTimer()
	for i := range b.N {
		if err := c.Add(NewFile(fmt.Sprintf("d0000/new%09d", i), Attr{Size: 1, Mode: 0o100644, Nlink: 1})); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			clear(c.w.pending) // no writer here
		}
	}
}

// TestAddAllMergesNewEntriesIntoADirectory: entries a refresh found new in
// one directory, in any order, join it in one merge: sorted among the old
// ones, numbered, counted and stored (a reopen loads them); a name the
// directory holds already, a name given twice, an entry of another
// directory and a directory no longer in the tree are refused by name,
// and the rest is added.
func TestAddAllMergesNewEntriesIntoADirectory(t *testing.T) {
	src := catalogTree(t)
	state := fastDir(t)
	c := openCat(t, Options{StateDir: state, Source: src})
	files, bytes := c.Files(), c.Bytes()
	dir := c.Find("a/b")
	var es []*Entry
	for _, name := range []string{"zeta", "b0", "c/new", "m", "sibling", "m", "aa", "new-dir"} {
		p := filepath.Join(src, "a/b", name)
		switch name {
		case "sibling", "c/new":
		case "new-dir":
			if err := os.MkdirAll(filepath.Join(p, "inner"), 0o755); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if name == "c/new" || name == "sibling" {
			p = filepath.Join(src, "a/b/sibling") // a file that exists
		}
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, NewEntry("a/b/"+name, fi, ""))
	}
	added, err := c.AddAll(dir, es)
	var names []string
	for _, e := range added {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "aa b0 m new-dir zeta" {
		t.Fatalf("added %q, want aa b0 m new-dir zeta", got)
	}
	for _, want := range []string{"a/b/c/new: not an entry of", "a/b/sibling: already in the dataset", "a/b/m: already in the dataset"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("AddAll's error %v does not name %q", err, want)
		}
	}
	checkTreeSorted(t, c)
	var kids []string
	for k := range dir.Children().All() {
		kids = append(kids, k.Name())
	}
	if got := strings.Join(kids, " "); got != "aa b0 c m new-dir sibling zeta" {
		t.Fatalf("a/b holds %q", got)
	}
	if c.Files() != files+4 || c.Bytes() != bytes+int64(len("zeta")+len("b0")+len("m")+len("aa")) {
		t.Errorf("counts %d files %d bytes after adding 4 files, were %d and %d", c.Files(), c.Bytes(), files, bytes)
	}
	for _, e := range added {
		if e.Kind() == KindFile && (e.Index < 0 || c.ByIndex(int(e.Index)) != e) || e.ID() == 0 {
			t.Errorf("%s: Index %d ID %d not given", e.Path(), e.Index, e.ID())
		}
	}
	if nd := c.Find("a/b/new-dir"); nd == nil || !nd.Listed() {
		t.Error("the added directory is not listed")
	}
	if _, err := c.AddAll(dir, nil); err != nil {
		t.Errorf("AddAll of nothing: %v", err)
	}
	gone := c.Find("a/b/c")
	if _, ok := c.Remove(gone); !ok {
		t.Fatal("Remove(a/b/c)")
	}
	fi, _ := os.Lstat(filepath.Join(src, "top.txt"))
	if _, err := c.AddAll(gone, []*Entry{NewEntry("a/b/c/late", fi, "")}); err == nil || !strings.Contains(err.Error(), "not a directory of the dataset") {
		t.Errorf("AddAll to a removed directory: %v", err)
	}
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c = openCat(t, Options{StateDir: state, Source: src})
	defer c.Close()
	for _, p := range []string{"a/b/aa", "a/b/b0", "a/b/m", "a/b/zeta", "a/b/new-dir"} {
		if c.Find(p) == nil {
			t.Errorf("%s was not stored", p)
		}
	}
}

// flatCatalog is a catalog of one directory, "flat", of n files, with a
// writer that only collects (the benchmarks clear it); it returns the
// directory and its files.
func flatCatalog(n int) (*Catalog, *Entry, []*Entry) {
	kids := make([]*Entry, n)
	for f := range kids {
		kids[f] = NewFile(fmt.Sprintf("flat/f%09d", f), Attr{Size: 1, Mode: 0o100644, Nlink: 1})
	}
	dir := NewDir("flat", kids)
	c := NewTree(NewDir("", []*Entry{dir}), nil)
	c.w.pending, c.w.kick = map[string]*Entry{}, make(chan struct{}, 1)
	return c, dir, kids
}

// BenchmarkAddToAFlatDirectory: a refresh adding files to one directory of
// a million, one at a time (Add: a copy of the directory's children each)
// and 4,096 at a time (AddAll, as a refresh does). The time is per file.
func BenchmarkAddToAFlatDirectory(b *testing.B) {
	const files, batch = 1_000_000, 4096
	for _, bc := range []struct {
		name string
		n    int
	}{{"one-at-a-time", 1}, {"batches-of-4096", batch}} {
		b.Run(bc.name, func(b *testing.B) {
			c, dir, _ := flatCatalog(files)
			es := make([]*Entry, 0, bc.n)
			b.ResetTimer()
			for i := 0; i < b.N; i += bc.n {
				es = es[:0]
				for j := i; j < min(i+bc.n, b.N); j++ {
					es = append(es, NewFile(fmt.Sprintf("flat/g%09d", j), Attr{Size: 1, Mode: 0o100644, Nlink: 1}))
				}
				if _, err := c.AddAll(dir, es); err != nil {
					b.Fatal(err)
				}
				clear(c.w.pending) // no writer here
			}
		})
	}
}

// TestRemoveAllTakesADirectorysEntriesInOneCopy: entries of one directory
// leave it together, with everything under them (files returned for
// their copies, marked gone, uncounted, their records deleted); one that
// is not the directory's, or is gone already, is left alone.
func TestRemoveAllTakesADirectorysEntriesInOneCopy(t *testing.T) {
	src := catalogTree(t)
	state := fastDir(t)
	c := openCat(t, Options{StateDir: state, Source: src})
	files, bytes := c.Files(), c.Bytes()
	dir, sub, sibling, other := c.Find("a/b"), c.Find("a/b/c"), c.Find("a/b/sibling"), c.Find("top.txt")
	deep := c.Find("a/b/c/deep.bin")
	gone := c.Find("z/zz/zzz")
	if _, ok := c.Remove(gone); !ok {
		t.Fatal("Remove(z/zz/zzz)")
	}
	removedFiles, removed := c.RemoveAll(dir, []*Entry{sibling, other, gone, sub})
	if len(removed) != 2 || removed[0] != sub || removed[1] != sibling {
		t.Fatalf("removed %v, want a/b/c and a/b/sibling", removed)
	}
	if len(removedFiles) != 2 || !slices.Contains(removedFiles, deep) || !slices.Contains(removedFiles, sibling) {
		t.Fatalf("files removed %v, want a/b/c/deep.bin and a/b/sibling", removedFiles)
	}
	if dir.Children().Len() != 0 || c.Find("a/b/sibling") != nil || !deep.Gone() || other.Gone() || c.Find("top.txt") != other {
		t.Fatal("the tree after RemoveAll is not a/b emptied and the rest kept")
	}
	if want := files - 3; c.Files() != want || c.Bytes() != bytes-4096-1000-12 {
		t.Errorf("counts %d files %d bytes, want %d and %d", c.Files(), c.Bytes(), want, bytes-4096-1000-12)
	}
	if f, r := c.RemoveAll(dir, []*Entry{sibling}); f != nil || r != nil {
		t.Errorf("a second RemoveAll removed %v %v", f, r)
	}
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c = openCat(t, Options{StateDir: state, Source: src})
	defer c.Close()
	for _, p := range []string{"a/b/c", "a/b/c/deep.bin", "a/b/sibling", "z/zz/zzz"} {
		if c.Find(p) != nil {
			t.Errorf("%s is stored still", p)
		}
	}
	if c.Find("a/b") == nil || c.Find("top.txt") == nil {
		t.Error("a/b or top.txt was not kept")
	}
}

// BenchmarkRemoveFromAFlatDirectory: a refresh removing files from one
// directory of a million, one at a time (Remove) and all of a run's at
// once (RemoveAll, as a refresh does). The time is per file.
func BenchmarkRemoveFromAFlatDirectory(b *testing.B) {
	const files = 1_000_000
	for _, one := range []bool{true, false} {
		b.Run(map[bool]string{true: "one-at-a-time", false: "together"}[one], func(b *testing.B) {
			c, dir, kids := flatCatalog(files + b.N)
			gone := kids[files/2 : files/2+b.N]
			b.ResetTimer()
			if one {
				for _, e := range gone {
					if _, ok := c.Remove(e); !ok {
						b.Fatal("not removed")
					}
				}
			} else if _, r := c.RemoveAll(dir, gone); len(r) != b.N {
				b.Fatalf("%d removed of %d", len(r), b.N)
			}
		})
	}
}
