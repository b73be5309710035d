package catalog

import (
	"sync"
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"
)

// The attributes most files share.
//
// A dataset's files have a handful of modes, owners and link counts
// between them (ImageNet's 1.28 M files: one), so an entry holds its
// mode, uid, gid and nlink as the number of a class in one table of the
// process: 2 bytes instead of 16. The table only grows, and to at most
// maxClasses classes (1 MiB, made 4 KiB at a time): an entry whose
// attributes would need a class more keeps them whole (entryMore.attr), as
// one whose blocks do not fit 32 bits does. A source cannot grow the
// daemon past that bound by varying its modes and owners.

// attrClass is the mode, uid, gid and nlink of an entry.
type attrClass struct{ mode, uid, gid, nlink uint32 }

// maxClasses bounds the table (class numbers are 16 bits).
const maxClasses = 1 << 16

// classTable numbers classes; a class's number never changes. Its
// classes are kept in chunks of classChunk, made as they fill: a table of
// a few classes is one small chunk.
type classTable struct {
	mu     sync.Mutex // serialises additions
	ids    *xsync.MapOf[attrClass, uint16]
	chunks []atomic.Pointer[[classChunk]attrClass]
	n      int // classes in the table; each written once, under mu, before its number is handed out
}

const classChunk = 256

func newClassTable(max int) *classTable {
	return &classTable{ids: xsync.NewMapOf[attrClass, uint16](), chunks: make([]atomic.Pointer[[classChunk]attrClass], (max+classChunk-1)/classChunk)}
}

// classes is the process's table: Entry.Attr reads it.
var classes = newClassTable(maxClasses)

// of returns the number of class k, added if new, or false when the
// table is full.
func (t *classTable) of(k attrClass) (uint16, bool) {
	if id, ok := t.ids.Load(k); ok {
		return id, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.ids.Load(k); ok {
		return id, true
	}
	if t.n == len(t.chunks)*classChunk {
		return 0, false
	}
	c := t.chunks[t.n/classChunk].Load()
	if c == nil {
		c = new([classChunk]attrClass)
		t.chunks[t.n/classChunk].Store(c)
	}
	id := uint16(t.n)
	c[t.n%classChunk] = k
	t.n++
	t.ids.Store(k, id)
	return id, true
}

// at returns class id; its number came from of, whose addition happened
// before (the entry holding it was shared after).
func (t *classTable) at(id uint16) attrClass { return t.chunks[id/classChunk].Load()[id%classChunk] }
