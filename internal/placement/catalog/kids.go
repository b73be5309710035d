package catalog

import (
	"iter"
	"sort"
)

// Kids is a directory's entries, sorted by name: the block of entries a
// walk or a load made of it (slab.go), with no pointer to each, or, once
// a refresh changed the directory, pointers to entries of any blocks. A
// value, never changed once made: a change of a directory's entries
// makes new Kids (copy on write).
type Kids struct {
	block []Entry  // the entries, when they are one block of them
	ptrs  []*Entry // otherwise
}

// blockKids is the entries of block, sorted by name and not yet shared.
func blockKids(block []Entry) Kids { return Kids{block: block} }

// ptrKids is the entries es, sorted by name.
func ptrKids(es []*Entry) Kids { return Kids{ptrs: es} }

// Len is the number of entries.
func (k Kids) Len() int { return len(k.block) + len(k.ptrs) }

// At is entry i, 0 ≤ i < Len().
func (k Kids) At(i int) *Entry {
	if k.block != nil {
		return &k.block[i]
	}
	return k.ptrs[i]
}

// All yields the entries in order.
func (k Kids) All() iter.Seq[*Entry] {
	return func(yield func(*Entry) bool) {
		for i := range k.block {
			if !yield(&k.block[i]) {
				return
			}
		}
		for _, e := range k.ptrs {
			if !yield(e) {
				return
			}
		}
	}
}

// Slice is the entries as a new slice of pointers.
func (k Kids) Slice() []*Entry {
	out := make([]*Entry, 0, k.Len())
	for e := range k.All() {
		out = append(out, e)
	}
	return out
}

// Lookup finds the entry named name, or nil.
func (k Kids) Lookup(name string) *Entry {
	if k.block == nil {
		return lookupIn(k.ptrs, name)
	}
	b := k.block
	i := sort.Search(len(b), func(i int) bool { return b[i].compareName(name) >= 0 })
	if i < len(b) && b[i].compareName(name) == 0 {
		return &b[i]
	}
	return nil
}

// lookupIn finds name among kids, sorted by name.
func lookupIn(kids []*Entry, name string) *Entry {
	i := sort.Search(len(kids), func(i int) bool { return kids[i].compareName(name) >= 0 })
	if i < len(kids) && kids[i].compareName(name) == 0 {
		return kids[i]
	}
	return nil
}
