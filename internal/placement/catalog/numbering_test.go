package catalog

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/epochfs/epochfs/internal/source"
)

// runsOf counts t's runs of a block and of pointers.
func runsOf(t *Numbering) (blocks, pointers int) {
	for _, r := range t.runs {
		if r.count > 0 {
			blocks++
		} else {
			pointers++
		}
	}
	return blocks, pointers
}

// checkNumbering: At and All give every file of c once, by its number,
// in the order Files visits them, and nothing past the end.
func checkNumbering(t *testing.T, how string, c *Catalog) {
	t.Helper()
	nt := c.Numbered()
	var files []*Entry
	c.Root().Files(func(e *Entry) bool { files = append(files, e); return true })
	if nt.Len() != len(files) || c.Indexed() != len(files) {
		t.Fatalf("%s: the table has %d numbers (Indexed %d), the tree %d files", how, nt.Len(), c.Indexed(), len(files))
	}
	for i, e := range files {
		if int(e.Index) != i || nt.At(i) != e || c.ByIndex(i) != e {
			t.Fatalf("%s: number %d is %v (ByIndex %v), want %s (Index %d)", how, i, nt.At(i), c.ByIndex(i), e.Path(), e.Index)
		}
	}
	n := 0
	for i, e := range nt.All() {
		if i != n || e != files[n] {
			t.Fatalf("%s: All's %dth is number %d, %v; want %d, %s", how, n, i, e, n, files[n].Path())
		}
		n++
	}
	if n != len(files) {
		t.Fatalf("%s: All gave %d files, want %d", how, n, len(files))
	}
	for _, i := range []int{-1, len(files), len(files) + 1, 1 << 30} {
		if e := nt.At(i); e != nil {
			t.Fatalf("%s: At(%d) = %s past the table", how, i, e.Path())
		}
	}
}

// The table of files by number is runs of the directories' blocks, one
// for the files a block has next to each other, not a pointer a file: a
// walk (in the foreground and in the background) and a background load
// make a directory of 1,500 files one run, and the files between two
// directories runs of pointers; a full load, whose directories are
// pointers, makes a run of pointers for each chunk of them. Every number
// is found by At and All either way.
func TestTheTableOfFilesIsRunsOfTheBlocks(t *testing.T) {
	src := t.TempDir()
	write := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 1500 {
		write(fmt.Sprintf("a/f%04d", i))
	}
	for i := range 50 {
		// A file, then a directory of three: b's files are not next to
		// each other in number.
		write(fmt.Sprintf("b/x%03d.bin", i))
		for j := range 3 {
			write(fmt.Sprintf("b/x%03dd/g%d", i, j))
		}
	}
	write("c/only.bin")
	write("top.bin")
	const files = 1500 + 50 + 150 + 2
	s := openSource(t, source.Options{Root: src})
	for _, bg := range []bool{false, true} {
		state := fastDir(t)
		c := openWalked(t, Options{StateDir: state, Source: src, Walker: s, Background: bg})
		how := fmt.Sprintf("walk (background %v)", bg)
		checkNumbering(t, how, c)
		nt := c.Numbered()
		// a; each of b's 50 directories. b's 50 files; c's and top.bin
		// in one.
		if blocks, pointers := runsOf(&nt); blocks != 1+50 || pointers != 50+1 {
			t.Errorf("%s: %d runs of a block and %d of pointers, want 51 and 51", how, blocks, pointers)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		c = openWalked(t, Options{StateDir: state, Source: src, Walker: s, Background: bg})
		how = fmt.Sprintf("load (background %v)", bg)
		checkNumbering(t, how, c)
		nt = c.Numbered()
		blocks, pointers := runsOf(&nt)
		if bg && (blocks != 1+50 || pointers != 50+1) {
			t.Errorf("%s: %d runs of a block and %d of pointers, want 51 and 51", how, blocks, pointers)
		}
		if !bg && (blocks != 0 || pointers != (files+ptrChunk-1)/ptrChunk) {
			t.Errorf("%s: %d runs of a block and %d of pointers, want 0 and one a chunk", how, blocks, pointers)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// NumberingOf numbers a list from 0 in its order, over several chunks of
// pointers.
func TestNumberingOfAList(t *testing.T) {
	es := make([]*Entry, 2*ptrChunk+5)
	for i := range es {
		es[i] = NewFile(fmt.Sprintf("f%d", i), Attr{})
	}
	nt := NumberingOf(es)
	if nt.Len() != len(es) || len(nt.runs) != 3 {
		t.Fatalf("%d numbers in %d runs, want %d in 3", nt.Len(), len(nt.runs), len(es))
	}
	for i, e := range es {
		if nt.At(i) != e {
			t.Fatalf("At(%d) = %v, want %s", i, nt.At(i), e.Path())
		}
	}
	n := 0
	for i, e := range nt.All() {
		if i != n || e != es[i] {
			t.Fatalf("All's %dth: %d, %v", n, i, e)
		}
		n++
	}
	if n != len(es) || nt.At(len(es)) != nil || nt.At(-1) != nil {
		t.Fatalf("All gave %d of %d; At past the end %v", n, len(es), nt.At(len(es)))
	}
	var empty Numbering
	if empty.Len() != 0 || empty.At(0) != nil {
		t.Fatal("an empty table has a file")
	}
	for range empty.All() {
		t.Fatal("an empty table has a file")
	}
}

// BenchmarkByIndex: what the jobs, the sampler and the read path do for
// a sample, the file of a number, among a million files in 1,000
// directories of 1,000 (one run of a block each, as a walk or a load makes
// them), in random order; "pointers" is the table of a pointer a file it
// replaced, as the reference. In "chained" each number depends on the file
// the last lookup found (one lookup at a time, as a draw or an open makes
// them: the latency); in "free" the CPU overlaps lookups (the throughput).
// Reports lookups per second.
func BenchmarkByIndex(b *testing.B) {
	const dirs, per = 1000, 1000
	top := make([]*Entry, dirs)
	for d := range dirs {
		slab := sizedSlab(per)
		for f := range per {
			e := slab.alloc()
			e.setKind(KindFile)
			e.setPath(fmt.Sprintf("d%04d/f%04d", d, f))
			e.initAttr(Attr{Size: 1, Mode: 0o100644, Nlink: 1})
		}
		top[d] = NewDir(fmt.Sprintf("d%04d", d), nil)
		top[d].setChildren(blockKids(slab.block()))
	}
	c := NewTree(NewDir("", top), nil)
	nt := c.Numbered()
	if blocks, pointers := runsOf(&nt); blocks != dirs || pointers != 0 {
		b.Fatalf("%d runs of a block, %d of pointers", blocks, pointers)
	}
	flat := make([]*Entry, nt.Len())
	for i, e := range nt.All() {
		flat[i] = e
	}
	for _, chained := range []bool{true, false} {
		for _, how := range []string{"runs", "pointers"} {
			name := map[bool]string{true: "chained/", false: "free/"}[chained] + how
			b.Run(name, func(b *testing.B) {
				n, sum, last := 0, 0, 0
				for b.Loop() {
					i := (n*7919 + last) % len(flat)
					var e *Entry
					if how == "runs" {
						e = c.ByIndex(i)
					} else {
						e = flat[i]
					}
					if chained {
						last = int(e.Index) & 1
					}
					sum += int(e.Index)
					n++
				}
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "lookups/s")
				if sum == -1 {
					b.Log(sum)
				}
			})
		}
	}
}
