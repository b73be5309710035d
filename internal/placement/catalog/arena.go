package catalog

import (
	"encoding/binary"
	"unsafe"
)

// Paths in shared blocks.
//
// Every entry holds its path (1 M of them for a dataset of 1 M files). A
// string of its own is an allocation rounded up to a size class of Go's
// allocator (a 20-byte path takes 24 bytes, a 36-byte one 48) and one
// more object for the collector; the paths of one directory's entries,
// made together by a walk or a load, are copied into blocks instead, one
// after the other. A block lives while any of its paths does: a
// directory's entries live and go together (a refresh replaces a
// directory's children whole), so little is held for nothing.

// Block sizes: an arena whose size is not known takes blocks of arenaMin
// bytes at first, then of twice the size each, up to arenaMax; a path
// longer than arenaMax/4 that does not fit the current block gets its
// own. One whose size is known
// (sizedArena) takes one block of that size; compactPaths moves the paths
// of a directory read with an arena of unknown size into one such block.
const (
	arenaMin = 256
	arenaMax = 16 << 10
)

// pathArena stores paths (storedpath.go) in its blocks. Not safe for
// concurrent use; the paths are.
type pathArena struct {
	buf  []byte // the current block: its bytes up to len are handed out, never written again
	next int    // the next block's size
}

// sizedArena is an arena of one block of n bytes (more if more is asked).
func sizedArena(n int) pathArena { return pathArena{buf: make([]byte, 0, n), next: arenaMax / 2} }

// compactPaths moves the paths of kids, entries not yet shared, into one
// block of their size, leaving the blocks they were in to the collector.
func compactPaths(kids Kids) {
	n := 0
	for k := range kids.All() {
		n += storedLen(k.Path())
	}
	a := sizedArena(n)
	for k := range kids.All() {
		k.setStored(a.str(k.Path()))
	}
}

// alloc returns n bytes of a block, not handed out before.
func (a *pathArena) alloc(n int) []byte {
	if cap(a.buf)-len(a.buf) < n {
		if n > arenaMax/4 {
			return make([]byte, n)
		}
		a.next = min(max(2*a.next, arenaMin), arenaMax)
		a.buf = make([]byte, 0, a.next)
	}
	b := a.buf[len(a.buf) : len(a.buf)+n : len(a.buf)+n]
	a.buf = a.buf[:len(a.buf)+n]
	return b
}

// bytes stores b in a's blocks (storedpath.go).
func (a *pathArena) bytes(b []byte) *byte { return a.str(unsafe.String(unsafe.SliceData(b), len(b))) }

// joinedLen is the bytes join(dir, name) stores.
func joinedLen(dir, name string) int {
	if dir == "" {
		return storedLen(name)
	}
	return storedLenOf(len(dir) + 1 + len(name))
}

// join stores dir + "/" + name (name alone when dir is the root, "") in
// a's blocks.
func (a *pathArena) join(dir, name string) *byte {
	if dir == "" {
		return a.str(name)
	}
	n := len(dir) + 1 + len(name)
	var l [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(l[:], uint64(n))
	s := a.alloc(k + n)
	copy(s, l[:k])
	copy(s[k:], dir)
	s[k+len(dir)] = '/'
	copy(s[k+len(dir)+1:], name)
	return &s[0]
}

// str stores s in a's blocks.
func (a *pathArena) str(s string) *byte {
	if s == "" {
		return nil
	}
	return storePath(a.alloc(storedLen(s)), s)
}
