package catalog

import (
	"encoding/binary"
	"strings"
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

// pathArena stores paths (storedpath.go) in its blocks: a directory's
// entries as its path, once a block, and their names. Not safe for
// concurrent use; the paths are.
type pathArena struct {
	buf  []byte // the current block: its bytes up to len are handed out, never written again
	next int    // the next block's size
	// dir is the path of the full record at dirAt in buf, the directory
	// whose children join stores as names; "" when buf has none. suffix
	// is the block's suffix, in the full record after dir's.
	dir, suffix string
	dirAt       int
}

// sizedArena is an arena of one block of n bytes (more if more is asked).
func sizedArena(n int) pathArena { return pathArena{buf: make([]byte, 0, n), next: arenaMax / 2} }

// dirPaths sums the bytes join stores for the entries of one directory,
// in a sized arena that holds only those (walk.go, names.go).
type dirPaths struct {
	dir, suffix string
	n           int
	dirAt       int // where dir's full record is, -1 before it
}

func newDirPaths(dir string) dirPaths { return dirPaths{dir: dir, dirAt: -1} }

// add counts the entry name, stored after those added before.
func (d *dirPaths) add(name string) {
	if !asChild(d.dir, name) {
		d.n += joinedLen(d.dir, name)
		return
	}
	if d.dirAt < 0 {
		d.dirAt, d.suffix = d.n, suffixOf(name)
		d.n += storedLen(d.dir) + suffixLen(d.suffix)
	}
	d.n += childLen(len(stemOf(name, d.suffix)), d.n-d.dirAt)
}

// asChild reports whether join stores name in dir as a child's record: a
// name in a directory other than the root, both short enough to share a
// block.
func asChild(dir, name string) bool { return dir != "" && len(dir)+len(name) <= arenaMax/8 }

// suffixOf is the suffix a block whose first child's name is name stores
// once for all its children: the name's extension (".JPEG"), of at most
// maxSuffix bytes, or "".
func suffixOf(name string) string {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 || len(name)-i > maxSuffix {
		return ""
	}
	return name[i:]
}

const maxSuffix = 16

// stemOf is name without suffix if it ends with it, else name whole.
func stemOf(name, suffix string) string {
	if suffix != "" && strings.HasSuffix(name, suffix) {
		return name[:len(name)-len(suffix)]
	}
	return name
}

// compactPaths moves the paths of kids, entries of one directory not yet
// shared, into one block of their size, leaving the blocks they were in
// to the collector.
func compactPaths(kids Kids) {
	if kids.Len() == 0 {
		return
	}
	dir := parentOf(kids.At(0).Path())
	size := newDirPaths(dir)
	for k := range kids.All() {
		size.add(k.Name())
	}
	a := sizedArena(size.n)
	for k := range kids.All() {
		k.setStored(a.join(dir, k.Name()))
	}
}

// parentOf is the path of p's directory ("" at the root).
func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// alloc returns n bytes of a block, not handed out before.
func (a *pathArena) alloc(n int) []byte {
	if cap(a.buf)-len(a.buf) < n {
		if n > arenaMax/4 {
			return make([]byte, n)
		}
		a.newBlock()
	}
	b := a.buf[len(a.buf) : len(a.buf)+n : len(a.buf)+n]
	a.buf = a.buf[:len(a.buf)+n]
	return b
}

// newBlock makes the current block a new one, without a directory's
// record.
func (a *pathArena) newBlock() {
	a.next = min(max(2*a.next, arenaMin), arenaMax)
	a.buf = make([]byte, 0, a.next)
	a.dir = ""
}

// bytes stores the path b in a's blocks.
func (a *pathArena) bytes(b []byte) *byte {
	p := unsafe.String(unsafe.SliceData(b), len(b))
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return a.str(p)
	}
	return a.join(p[:i], p[i+1:])
}

// joinedLen is the bytes join(dir, name) stores as a full record.
func joinedLen(dir, name string) int {
	if dir == "" {
		return storedLen(name)
	}
	return storedLenOf(len(dir) + 1 + len(name))
}

// join stores dir + "/" + name (name alone when dir is the root, "") in
// a's blocks: as a child's record after dir's full record in the current
// block, stored first if the block has none.
func (a *pathArena) join(dir, name string) *byte {
	if !asChild(dir, name) {
		if dir == "" {
			return a.str(name)
		}
		n := len(dir) + 1 + len(name)
		s := a.alloc(storedLenOf(n))
		k := binary.PutUvarint(s, uint64(2*n))
		copy(s[k:], dir)
		s[k+len(dir)] = '/'
		copy(s[k+len(dir)+1:], name)
		return &s[0]
	}
	for {
		if a.dir != dir {
			// dir's records and one child's fit a new block (asChild,
			// maxSuffix).
			suffix := suffixOf(name)
			head := storedLen(dir) + suffixLen(suffix)
			if cap(a.buf)-len(a.buf) < head+childLen(len(name), head) {
				a.newBlock()
			}
			a.dirAt = len(a.buf)
			b := a.alloc(head)
			n := storeFull(b, dir)
			storeFull(b[n:], suffix)
			a.dir, _ = fullAt(&b[0])
			a.suffix, _ = fullAt(&b[n])
		}
		stem := stemOf(name, a.suffix)
		back := len(a.buf) - a.dirAt
		if n := childLen(len(stem), back); cap(a.buf)-len(a.buf) >= n {
			return storeChild(a.alloc(n), stem, len(stem) < len(name), back)
		}
		a.newBlock() // no room after dir's records: dir's records again, in a new block
	}
}

// str stores s in a's blocks, as a full record.
func (a *pathArena) str(s string) *byte {
	if s == "" {
		return nil
	}
	return storePath(a.alloc(storedLen(s)), s)
}
