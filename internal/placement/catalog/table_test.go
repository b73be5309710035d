package catalog

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// TestAddGrowsTheTableOfFilesInPlace: files a refresh adds one at a time
// take the numbers after the others, each found by ByIndex at once; a
// table handed out before (Numbered) keeps what it held; and the table is
// copied a few times for 2,000 files, not once a file (grownTable).
func TestAddGrowsTheTableOfFilesInPlace(t *testing.T) {
	src := catalogTree(t)
	c := openCat(t, Options{StateDir: fastDir(t), Source: src})
	defer c.Close()
	before := c.Numbered()
	held := append([]*Entry(nil), before...)
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
	arrays := map[**Entry]bool{unsafe.SliceData(*c.byIndex.Load()): true}
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
			for i, e := range all {
				if e == nil || int(e.Index) != i {
					readerDone <- fmt.Errorf("a reader of the growing table: [%d] = %v", i, e)
					return
				}
			}
			if e := c.ByIndex(len(all) - 1); e != all[len(all)-1] {
				readerDone <- fmt.Errorf("ByIndex(%d) is not the table's last file", len(all)-1)
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
		arrays[unsafe.SliceData(*c.byIndex.Load())] = true
	}
	close(stop)
	if err := <-readerDone; err != nil {
		t.Fatal(err)
	}
	if len(arrays) > 3 {
		t.Errorf("the table was copied %d times for %d files added one at a time", len(arrays)-1, n)
	}
	for i, e := range held {
		if before[i] != e || c.ByIndex(i) != e {
			t.Fatalf("number %d changed under a holder of the table", i)
		}
	}
	if len(before) != len(held) || cap(before) != len(held) {
		t.Fatalf("a table handed out grew: len %d cap %d, was %d", len(before), cap(before), len(held))
	}
	all := c.Numbered()
	if len(all) != len(held)+n {
		t.Fatalf("Numbered: %d files, want %d", len(all), len(held)+n)
	}
	for i, e := range all {
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
