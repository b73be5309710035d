package catalog

// An entry of the tree, and its layout in memory.

import (
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/epochfs/epochfs/internal/placement/residency"
)

// Entry is one file, directory or symlink of the dataset. The tree is
// built at mount; while serving, an entry's attributes and residency
// change, and a refresh (or a file found gone from the source) adds and
// removes entries: a directory's children are replaced whole (copy on
// write), so readers never lock.
//
// An entry is held per dataset file for the life of the mount (1.28 M of
// them for ImageNet), so its layout is kept small (56 bytes; the entries
// a walk or a load makes together share a block: slab.go): the first
// attributes are stored in the entry itself in a compact form (the mode,
// owner and link count as the number of a class most files share:
// attrclass.go), what few entries have (a directory's children, a
// symlink's target, a hard link's key, attributes that changed or do not
// fit the compact form, the content version once it changed, an ID past
// 32 bits) is behind the one pointer that is the path of the others (pm;
// a directory's entries store their names after its path: storedpath.go),
// and the tier, the kind and whether the entry is gone share the word of
// the placer's residency.
type Entry struct {
	// pm is the entry's path (Path) or, for the few entries that have
	// more (an *entryMore, which then holds the path), that: one pointer
	// for both. A path's record (storedpath.go) never begins with a 0
	// byte and an entryMore always does (its tag): pm's first byte tells
	// which it points to. nil is the root with nothing more. An entryMore
	// is replaced whole (copy on write), never changed in place. It also
	// holds the attributes and content version once the content changed,
	// so that Snapshot reads both as one.
	pm                     unsafe.Pointer
	cMtime, cAtime, cCtime int64
	// cSize, cClass and cBlocks are the rest of the compact attributes:
	// the size when it fits 32 bits, the class of the mode, owner and
	// link count (attrclass.go), and the 512-byte blocks as their
	// difference from the size's (sizeBlocks). Set before the entry is
	// shared, never changed.
	cSize   uint32
	cClass  uint16
	cBlocks int16
	// checked is when the source was last found to agree with the
	// attributes (unix seconds; 0: unknown), persisted in the record.
	checked atomic.Uint32
	// id is the entry's ID (ID) when it fits 32 bits; 0 when it is held
	// in its entryMore (a mount that gave out 2^32 IDs).
	id uint32
	// Index numbers the regular files 0..Files()-1 in path order (the
	// order of Files); -1 for directories and symlinks. The sampler's
	// sample indices are these.
	Index int32
	// res is the placer's knowledge of the file this mount, which the
	// catalog never reads (Residency). The low residency.HolderBits bits
	// of its word are the entry's state: the tier of the copy plus one
	// (0: none) in the low byte, stateGone once the entry is removed from
	// the dataset, and the entry's Kind, set before the entry is shared
	// and never changed.
	res residency.State
}

const (
	stateTier = 0xff
	stateGone = 1 << 8
	kindShift = 9
	kindMask  = 0x3 << kindShift
)

// state is the word that holds the entry's state (res's word: only the
// bits below residency.HolderBits are the catalog's, and every change
// leaves the others as they are).
func (e *Entry) state() *atomic.Uint32 { return e.res.Word() }

// Kind is what the entry is: a regular file, a directory or a symlink.
func (e *Entry) Kind() Kind { return Kind(e.state().Load() & kindMask >> kindShift) }

// setKind sets a new entry's kind (before it is shared).
func (e *Entry) setKind(k Kind) {
	e.state().And(^uint32(kindMask))
	e.state().Or(uint32(k) << kindShift & kindMask)
}

// newOfKind is a new entry of kind k, allocated alone.
func newOfKind(k Kind) *Entry {
	e := new(Entry)
	e.setKind(k)
	return e
}

// entryMore is what few entries have. An entry's is replaced whole
// (updateMore), so that a reader holding one sees all of it or none.
type entryMore struct {
	// tag is always 0: the byte that tells an entryMore from a stored
	// path (Entry.pm). It must stay the first field.
	tag byte
	// path is the entry's path, stored (storedpath.go); nil for the root.
	path *byte
	// kids are a directory's children, sorted by name, once listed.
	kids   Kids
	listed bool
	// target is a symlink's target.
	target string
	// link is the source identity of a file with more than one link
	// (files with the same key share an ID, an inode of the mount, as the
	// source's hard links share their inode).
	link *linkKey
	// attr is the attributes once they changed (SetAttr, SetContent), or
	// first ones the compact fields cannot hold; nil while those are
	// current.
	attr *Attr
	// ver is the content version (Version).
	ver uint32
	// id is the entry's ID when it does not fit the entry's 32 bits.
	id uint64
}

// moreOf is e's entryMore, or nil.
func (e *Entry) moreOf() *entryMore { return moreAt(atomic.LoadPointer(&e.pm)) }

// moreAt is the entryMore pm points to, or nil when it is a path.
func moreAt(pm unsafe.Pointer) *entryMore {
	if pm == nil || *(*byte)(pm) != 0 {
		return nil
	}
	return (*entryMore)(pm)
}

// updateMore replaces e's entryMore by a copy that change changed. Callers
// that change the same field are serialised by the caller; ones changing
// others may race (a refresh's children and a validation's attributes):
// each retries on the other's copy.
func (e *Entry) updateMore(change func(m *entryMore)) {
	for {
		old := atomic.LoadPointer(&e.pm)
		m := new(entryMore)
		if o := moreAt(old); o != nil {
			*m = *o
		} else {
			m.path = (*byte)(old)
		}
		change(m)
		if atomic.CompareAndSwapPointer(&e.pm, old, unsafe.Pointer(m)) {
			return
		}
	}
}

// Target is a symlink's target ("" for other entries).
func (e *Entry) Target() string {
	if m := e.moreOf(); m != nil {
		return m.target
	}
	return ""
}

// setTarget sets a new entry's symlink target (before it is shared). A
// directory has none: a target a record gives one is dropped.
func (e *Entry) setTarget(t string) {
	if e.Kind() == KindDir || t == "" && e.Target() == "" {
		return
	}
	e.updateMore(func(m *entryMore) { m.target = t })
}

// link is the entry's hard-link key, or nil.
func (e *Entry) link() *linkKey {
	if m := e.moreOf(); m != nil {
		return m.link
	}
	return nil
}

// setLink sets a new entry's hard-link key (before it is shared); a
// directory has none.
func (e *Entry) setLink(k *linkKey) {
	if e.Kind() == KindDir || k == nil && e.link() == nil {
		return
	}
	e.updateMore(func(m *entryMore) { m.link = k })
}

// initAttr sets a new entry's first attributes (before it is shared): in
// the entry itself when they fit its compact form.
func (e *Entry) initAttr(a Attr) { e.initAttrIn(classes, a) }

// initAttrIn is initAttr with the class table t.
func (e *Entry) initAttrIn(t *classTable, a Attr) {
	class, ok := t.of(attrClass{mode: a.Mode, uid: a.UID, gid: a.GID, nlink: a.Nlink})
	d := a.Blocks - sizeBlocks(a.Size)
	if !ok || a.Size < 0 || a.Size > math.MaxUint32 || d < math.MinInt16 || d > math.MaxInt16 {
		e.setWhole(a)
		return
	}
	e.cMtime, e.cAtime, e.cCtime = a.Mtime, a.Atime, a.Ctime
	e.cSize, e.cClass, e.cBlocks = uint32(a.Size), class, int16(d)
}

// sizeBlocks is the 512-byte blocks a file of size bytes fills; an
// entry holds its blocks as their difference from these (most sources
// allocate a few more, to their block size, or fewer, compressed or
// sparse).
func sizeBlocks(size int64) int64 { return (size + 511) / 512 }

// Name is the entry's last path element ("" for the root).
func (e *Entry) Name() string { return storedName(e.stored()) }

// compareName compares e's name with s, as strings.Compare would
// (e.Name(), s), without making the name.
func (e *Entry) compareName(s string) int {
	a, b := storedNameParts(e.stored())
	return compareName(a, b, s)
}

// compareNames compares e's name with o's, as strings.Compare would,
// without making them.
func (e *Entry) compareNames(o *Entry) int {
	a1, a2 := storedNameParts(e.stored())
	b1, b2 := storedNameParts(o.stored())
	return compareParts(a1, a2, b1, b2)
}

// stored is the record of e's path (storedpath.go).
func (e *Entry) stored() *byte {
	pm := atomic.LoadPointer(&e.pm)
	if m := moreAt(pm); m != nil {
		return m.path
	}
	return (*byte)(pm)
}

// Attr returns the entry's attributes.
func (e *Entry) Attr() Attr {
	if m := e.moreOf(); m != nil && m.attr != nil {
		return *m.attr
	}
	return e.compactAttr()
}

// compactAttr is the attributes the entry's compact fields hold.
func (e *Entry) compactAttr() Attr {
	k := classes.at(e.cClass)
	size := int64(e.cSize)
	return Attr{Size: size, Mtime: e.cMtime, Mode: k.mode, UID: k.uid, GID: k.gid, Nlink: k.nlink,
		Blocks: sizeBlocks(size) + int64(e.cBlocks), Atime: e.cAtime, Ctime: e.cCtime}
}

// Version is the entry's content version: 0 at mount, one more at every
// change of the file's size or mtime this mount (SetContent). A mount
// shows each version as an inode of its own (internal/fs/ino.go).
func (e *Entry) Version() uint32 {
	if m := e.moreOf(); m != nil {
		return m.ver
	}
	return 0
}

// Snapshot returns the entry's attributes and the content version they
// belong to, read as one: a new content's attributes and version are
// published together in one entryMore, and the compact fields never
// change once the entry is shared.
func (e *Entry) Snapshot() (Attr, uint32) {
	m := e.moreOf()
	if m == nil {
		return e.compactAttr(), 0
	}
	if m.attr != nil {
		return *m.attr, m.ver
	}
	return e.compactAttr(), m.ver
}

// Path is the entry's path relative to the source root; "" for the root
// (its bytes may share a block: arena.go).
func (e *Entry) Path() string { return storedString(e.stored()) }

// setPath sets a new entry's path (before it is shared) to a copy of p
// of its own; a walk and a load set paths stored in a shared block
// (setStored).
func (e *Entry) setPath(p string) { e.setStored(storePath(make([]byte, storedLen(p)), p)) }

// setStored sets a new entry's path (before it is shared) to one stored
// already (storedpath.go).
func (e *Entry) setStored(p *byte) {
	if e.moreOf() != nil {
		e.updateMore(func(m *entryMore) { m.path = p })
		return
	}
	atomic.StorePointer(&e.pm, unsafe.Pointer(p))
}

// ID is the entry's ID, stable for the life of the mount (the inode
// number of its first version); the root's is 1.
func (e *Entry) ID() uint64 {
	if e.id != 0 {
		return uint64(e.id)
	}
	if m := e.moreOf(); m != nil {
		return m.id
	}
	return 0
}

// setID sets a new entry's ID (before it is shared): in the entry when
// it fits 32 bits.
func (e *Entry) setID(id uint64) {
	if id != 0 && id <= 1<<32-1 {
		e.id = uint32(id)
		return
	}
	e.id = 0
	e.updateMore(func(m *entryMore) { m.id = id })
}

// Tier is the index of the tier that holds the entry's copy, or -1.
func (e *Entry) Tier() int { return int(e.state().Load()&stateTier) - 1 }

// Children returns a directory's entries sorted by name (none for other
// entries).
func (e *Entry) Children() Kids {
	if e.Kind() != KindDir {
		return Kids{}
	}
	if m := e.moreOf(); m != nil {
		return m.kids
	}
	return Kids{}
}

// Listed reports whether e's entries are known (or e is no directory):
// a background walk lists the others on demand (Catalog.List).
func (e *Entry) Listed() bool {
	if e.Kind() != KindDir {
		return true
	}
	m := e.moreOf()
	return m != nil && m.listed
}

// setChildren replaces a directory's children.
func (e *Entry) setChildren(c Kids) {
	e.updateMore(func(m *entryMore) { m.kids, m.listed = c, true })
}

// Gone reports that the entry was removed from the dataset.
func (e *Entry) Gone() bool { return e.state().Load()&stateGone != 0 }

// setGone marks the entry removed from the dataset.
func (e *Entry) setGone() { e.state().Or(stateGone) }

// Lookup finds a child by name.
func (e *Entry) Lookup(name string) *Entry { return e.Children().Lookup(name) }
