package catalog

// The files by number (Entry.Index), as runs of the directories' blocks.

import (
	"iter"
	"unsafe"
)

// Numbering is the catalog's files by number (Entry.Index): what ByIndex
// reads, and what Numbered hands the jobs to share. A walk and a load put
// a directory's entries in one block (slab.go) and number its files one
// after the other, so the table is a list of runs: a run of a block is the
// first number and the first file of files adjacent in one block, not a
// pointer a file (a leaf directory of a thousand files is one run of 16
// bytes instead of 8,000). Such a run never spans two blocks (it ends
// where its block's files do), so its pointer keeps every file of it
// alive. The files that are not in a block with the next (entries a
// refresh added, a full load's, a file between two directories) are runs
// of pointers: the pointers to files numbered one after the other, in a
// chunk of ptrChunk pointers.
//
// A Numbering is a value its readers share and never change: the catalog
// makes a longer one when a refresh numbers more files (Add), appending to
// the arrays in place when they have room, past the end of every shorter
// value (which never reads past its own), and never changing a run that a
// shorter value holds.
type Numbering struct {
	runs []run
	// at[k] is the run that holds number k<<atShift: At searches only
	// the runs that start among the numbers from there to the next.
	at []int32
	n  int
	// ptrs is the chunk the last runs of pointers are in; its free room
	// (past its length) is for the next ones.
	ptrs []*Entry
}

// run is count files numbered from first, adjacent in one block from p
// (an *Entry); or, when count is negative, -count files whose pointers
// are adjacent in a chunk from p (a **Entry).
type run struct {
	first, count int32
	p            unsafe.Pointer
}

// atShift: At's index has one run for every 1,024 numbers (at most 4
// bytes a 1,024 files), and searches among the runs that start between
// two of them (one, for a directory of more than 1,024 files).
const atShift = 10

// ptrChunk is the size of a chunk of pointers (8 KiB).
const ptrChunk = 1024

const (
	entrySize = unsafe.Sizeof(Entry{})
	ptrSize   = unsafe.Sizeof((*Entry)(nil))
)

// Len is the count of numbers given: At takes 0 to Len()-1.
func (t *Numbering) Len() int { return t.n }

// At is the file numbered i, or nil when i is not one of t's numbers. A
// removed file keeps its number (and is Gone).
func (t *Numbering) At(i int) *Entry {
	if i < 0 || i >= t.n {
		return nil
	}
	k := i >> atShift
	lo, hi := int(t.at[k]), len(t.runs)
	if k+1 < len(t.at) {
		hi = int(t.at[k+1]) + 1
	}
	// The last run in [lo, hi) that starts at or before i.
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if int(t.runs[mid].first) <= i {
			lo = mid
		} else {
			hi = mid
		}
	}
	return t.runs[lo].at(i - int(t.runs[lo].first))
}

// at is the run's file d (0 its first), or nil past its end.
func (r *run) at(d int) *Entry {
	switch {
	case d < 0:
		return nil
	case r.count > 0:
		if d >= int(r.count) {
			return nil
		}
		return (*Entry)(unsafe.Add(r.p, uintptr(d)*entrySize))
	default:
		if d >= int(-r.count) {
			return nil
		}
		return *(**Entry)(unsafe.Add(r.p, uintptr(d)*ptrSize))
	}
}

// All is every file with its number, in number order.
func (t *Numbering) All() iter.Seq2[int, *Entry] {
	return func(yield func(int, *Entry) bool) {
		for k := range t.runs {
			r := &t.runs[k]
			for d := 0; int(r.first)+d < t.n; d++ {
				e := r.at(d)
				if e == nil {
					break
				}
				if !yield(int(r.first)+d, e) {
					return
				}
			}
		}
	}
}

// numberFiles is t with the files of the trees under es after its own,
// which are numbered from t.Len() on in the order Files visits them. t
// is not changed; the result may share its arrays.
func numberFiles(t Numbering, es ...*Entry) Numbering {
	return numberFilesOf(t, (*Entry).Children, es...)
}

// numberFilesOf is numberFiles with a directory's entries as kidsOf
// gives them (a walk that reads names first numbers names not yet in the
// tree: names.go).
func numberFilesOf(t Numbering, kidsOf func(*Entry) Kids, es ...*Entry) Numbering {
	base := len(t.runs) // the runs from here on are not shared yet
	for _, e := range es {
		if e.Kind() == KindFile {
			t.inOrder(e)
			t.pointer(e, base)
		} else {
			t.add(e, base, kidsOf)
		}
	}
	return t
}

// add appends the files under directory e.
func (t *Numbering) add(e *Entry, base int, kidsOf func(*Entry) Kids) {
	kids := kidsOf(e)
	for j := range kids.Len() {
		x := kids.At(j)
		if x.Kind() != KindFile {
			t.add(x, base, kidsOf)
			continue
		}
		t.inOrder(x)
		block := kids.block != nil
		last := len(t.runs) - 1
		switch {
		case block && j > 0 && kids.At(j-1).Kind() == KindFile && last >= base && t.runs[last].count > 0 && int(t.runs[last].first+t.runs[last].count) == t.n:
			// File j-1 is the last run's last: x is next to it.
			t.runs[last].count++
			t.next()
		case block && j+1 < kids.Len() && kids.At(j+1).Kind() == KindFile:
			t.runs = append(t.runs, run{first: int32(t.n), count: 1, p: unsafe.Pointer(x)})
			t.next()
		default:
			t.pointer(x, base)
		}
	}
}

// pointer appends file x to a run of pointers: the last run when it is
// one not shared yet and its chunk has room after it, a new run
// otherwise.
func (t *Numbering) pointer(x *Entry, base int) {
	if len(t.ptrs) == cap(t.ptrs) {
		t.ptrs = make([]*Entry, 0, ptrChunk)
	}
	t.ptrs = append(t.ptrs, x)
	slot := unsafe.Pointer(&t.ptrs[len(t.ptrs)-1])
	if last := len(t.runs) - 1; last >= base && t.runs[last].count < 0 && int(t.runs[last].first-t.runs[last].count) == t.n &&
		unsafe.Add(t.runs[last].p, uintptr(-t.runs[last].count)*ptrSize) == slot {
		t.runs[last].count--
	} else {
		t.runs = append(t.runs, run{first: int32(t.n), count: -1, p: slot})
	}
	t.next()
}

// inOrder checks that file x, about to be put in, is the catalog's
// number t.n.
func (t *Numbering) inOrder(x *Entry) {
	if int(x.Index) != t.n {
		panic("catalog: files numbered out of order")
	}
}

// next takes the file just put in the last run as number t.n.
func (t *Numbering) next() {
	if t.n&(1<<atShift-1) == 0 {
		t.at = append(t.at, int32(len(t.runs)-1))
	}
	t.n++
}

// NumberingOf numbers es from 0 in their order: the table for a list of
// files that are not a catalog's (tests, benchmarks). Their Index is
// not read.
func NumberingOf(es []*Entry) Numbering {
	var t Numbering
	for _, e := range es {
		t.pointer(e, 0)
	}
	return t
}
