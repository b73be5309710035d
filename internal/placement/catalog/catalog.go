// Package catalog is the dataset as the mount knows it: the tree of the
// source's files, directories and symlinks with their attributes, walked
// once (in parallel, in the background: bgwalk.go, walk.go, or loaded
// from another node's walk: shared.go) and kept in a badger database under
// the state directory (records: record.go; written by one guarded writer
// that survives a full disk: writer.go, persist.go; loaded at remount:
// load.go, db.go). Each entry carries its residency (residency.go: which
// tier holds its copy, when it was last checked), which the placer
// (placement) keeps up to date. The checks a control file makes for a user
// are the kernel's, made on the catalog's attributes (cred.go).
//
// Lock order: the placer's validator.refreshMu, then Catalog.treeMu (a change
// of the tree), then Catalog.mu and Catalog.pendMu (its records written);
// Catalog.linksMu is taken last (newID).
package catalog

import (
	"context"
	"errors"
	"fmt"
	"path"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/epochfs/epochfs/internal/placement/residency"
	"github.com/epochfs/epochfs/internal/source"
	"go.uber.org/zap"
)

// Attr is what the source said about an entry when it was last looked at.
type Attr struct {
	Size  int64
	Mtime int64 // nanoseconds since the epoch
	Mode  uint32
	UID   uint32
	GID   uint32
	// Nlink is the source's link count; 0 when the record predates it
	// (then Blocks, Atime and Ctime are unknown too).
	Nlink  uint32
	Blocks int64 // 512-byte blocks allocated on the source
	Atime  int64 // nanoseconds since the epoch
	Ctime  int64
}

// same reports whether a and b describe the same source state: the access
// time, which reads change, is left out, so that an open's check does not
// count a read of the file as a change.
func (a Attr) Same(b Attr) bool {
	a.Atime = b.Atime
	return a == b
}

// linkKey names a source file with more than one link (a hard link): its
// device and inode, and its size and mtime, so that an inode number the
// source reused for another file is not taken for the same one.
type linkKey struct {
	dev, ino    uint64
	size, mtime int64
}

// Entry is one file, directory or symlink of the dataset. The tree is
// built at mount; while serving, an entry's attributes and residency
// change, and a refresh (or a file found gone from the source) adds and
// removes entries: a directory's children are replaced whole (copy on
// write), so readers never lock.
//
// An entry is held per dataset file for the life of the mount (1.28 M of
// them for ImageNet), so its layout is kept small (96 bytes, a size class
// of Go's allocator): the first attributes are stored in the entry itself
// in a compact form (the mode, owner and link count as the number of a
// class most files share: attrclass.go), what few entries have (a
// directory's children, a symlink's target, a hard link's key, attributes
// that changed or do not fit the compact form) is behind one pointer
// (more), and the small fields are packed last.
type Entry struct {
	// What an open reads (Snapshot) is in the first 64 bytes, one cache
	// line.
	//
	// ver counts the entry's content changes this mount, twice each: odd
	// while the attributes are being replaced by a new content's
	// (SetContent), so that Snapshot reads attributes and version as one
	// (a seqlock).
	ver     atomic.Uint32
	cBlocks uint32
	// more is what few entries have (*entryMore), nil for most files;
	// replaced whole (copy on write), never changed in place.
	more                          unsafe.Pointer
	cSize, cMtime, cAtime, cCtime int64
	cClass                        uint16 // the mode, uid, gid and nlink (attrclass.go)
	Kind                          Kind
	// checked is when the source was last found to agree with the
	// attributes (unix seconds; 0: unknown), persisted in the record.
	checked atomic.Uint32

	ID   uint64 // stable for the life of the mount; the root is 1
	Path string // relative to the source root; "" for the root (its bytes may share a block: arena.go)
	// Index numbers the regular files 0..Files()-1 in path order (the
	// order of Files); -1 for directories and symlinks. The sampler's
	// sample indices are these.
	Index int32
	// state holds the tier of the copy plus one (0: none) in its low
	// byte and stateGone once the entry is removed from the dataset.
	state atomic.Uint32
	// res is the placer's knowledge of the file this mount, which the
	// catalog holds and never reads (Residency).
	res residency.State
}

const (
	stateTier = 0xff
	stateGone = 1 << 8
)

// entryMore is what few entries have. An entry's is replaced whole
// (updateMore), so that a reader holding one sees all of it or none.
type entryMore struct {
	// kids are a directory's children, sorted by name, once listed.
	kids   []*Entry
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
}

// moreOf is e's entryMore, or nil.
func (e *Entry) moreOf() *entryMore { return (*entryMore)(atomic.LoadPointer(&e.more)) }

// updateMore replaces e's entryMore by a copy that change changed. Callers
// that change the same field are serialised by the caller; ones changing
// others may race (a refresh's children and a validation's attributes):
// each retries on the other's copy.
func (e *Entry) updateMore(change func(m *entryMore)) {
	for {
		old := atomic.LoadPointer(&e.more)
		m := new(entryMore)
		if old != nil {
			*m = *(*entryMore)(old)
		}
		change(m)
		if atomic.CompareAndSwapPointer(&e.more, old, unsafe.Pointer(m)) {
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
	if e.Kind == KindDir || t == "" && e.Target() == "" {
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
	if e.Kind == KindDir || k == nil && e.link() == nil {
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
	if !ok || a.Blocks < 0 || a.Blocks > 1<<32-1 {
		e.setWhole(a)
		return
	}
	e.cSize, e.cMtime, e.cAtime, e.cCtime = a.Size, a.Mtime, a.Atime, a.Ctime
	e.cClass = class
	e.cBlocks = uint32(a.Blocks)
}

// Name is the entry's last path element ("" for the root).
func (e *Entry) Name() string { return e.Path[strings.LastIndexByte(e.Path, '/')+1:] }

// Attr returns the entry's attributes.
func (e *Entry) Attr() Attr {
	if m := e.moreOf(); m != nil && m.attr != nil {
		return *m.attr
	}
	k := classes.at(e.cClass)
	return Attr{Size: e.cSize, Mtime: e.cMtime, Mode: k.mode, UID: k.uid, GID: k.gid, Nlink: k.nlink,
		Blocks: int64(e.cBlocks), Atime: e.cAtime, Ctime: e.cCtime}
}

// Version is the entry's content version: 0 at mount, one more at every
// change of the file's size or mtime this mount (SetContent). A mount
// shows each version as an inode of its own (internal/fs/ino.go).
func (e *Entry) Version() uint32 { return e.ver.Load() / 2 }

// Snapshot returns the entry's attributes and the content version they
// belong to, read as one.
func (e *Entry) Snapshot() (Attr, uint32) {
	for {
		v := e.ver.Load()
		if v&1 != 0 {
			runtime.Gosched() // a SetContent is between its two stores
			continue
		}
		a := e.Attr()
		if e.ver.Load() == v {
			return a, v / 2
		}
	}
}

// Tier is the index of the tier that holds the entry's copy, or -1.
func (e *Entry) Tier() int { return int(e.state.Load()&stateTier) - 1 }

// Children returns a directory's entries sorted by name. Do not modify.
func (e *Entry) Children() []*Entry {
	if e.Kind != KindDir {
		return nil
	}
	if m := e.moreOf(); m != nil {
		return m.kids
	}
	return nil
}

// Listed reports whether e's entries are known (or e is no directory):
// a background walk lists the others on demand (Catalog.List).
func (e *Entry) Listed() bool {
	if e.Kind != KindDir {
		return true
	}
	m := e.moreOf()
	return m != nil && m.listed
}

// setChildren replaces a directory's children.
func (e *Entry) setChildren(c []*Entry) {
	e.updateMore(func(m *entryMore) { m.kids, m.listed = c, true })
}

// Gone reports that the entry was removed from the dataset.
func (e *Entry) Gone() bool { return e.state.Load()&stateGone != 0 }

// setGone marks the entry removed from the dataset.
func (e *Entry) setGone() { e.state.Or(stateGone) }

// Lookup finds a child by name.
func (e *Entry) Lookup(name string) *Entry { return lookupIn(e.Children(), name) }

// Options configure Open.
type Options struct {
	StateDir string // badger lives in StateDir/catalog; one process at a time (the daemon's lock: internal/daemon/lock.go)
	Source   string // absolute source root
	// Walker, if set, is the source the walk reads through (the mount's);
	// nil opens one over Source for the walk.
	Walker  *source.Source
	Tiers   []string // tier names, fastest first; copies in other tiers are forgotten
	Rescan  bool     // walk the source even when a complete catalog exists
	Workers int      // parallel directory reads during a walk
	Logger  *zap.Logger
	// Progress, if set, is called during a walk with the entries seen;
	// calls do not overlap.
	Progress func(entries int64)
	// MinFree is the state directory's free-space floor in bytes: the
	// catalog is written only while the file system has more free space
	// than MinFree plus the catalog's own tables (writer.go).
	// 0 means DefaultCatalogMinFree.
	MinFree int64
	// Statfs reports the free and total bytes of the file system holding
	// dir; nil means statfs(2). Tests set it to simulate a full disk.
	Statfs func(dir string) (free, total uint64, err error)
	// Shared, if set, is asked for the tree instead of walking the source
	// when a walk is due (shared.go): other nodes may have walked
	// it. The tree is stored here as a walked one is.
	Shared SharedWalk
	// RetryInterval is how often a degraded catalog checks for room to
	// write what it holds (default DefaultCatalogRetry).
	RetryInterval time.Duration
	// Background walks the source in the background when a first walk is
	// due (bgwalk.go): Open returns once the root is read.
	// A rescan and a Shared walk still walk before it returns. Needs
	// Walker.
	Background bool
	// LoadHold, if set, holds a background load of a stored catalog
	// before it reads anything below the root until it is closed (or the
	// catalog is): directories are read only on demand meanwhile. Tests
	// use it to act while a load runs.
	LoadHold <-chan struct{}
	// Offline: the source does not answer now; only a complete catalog
	// from an earlier mount is loaded (a rescan waits for a later
	// mount), and without one Open fails with ErrNoCatalog.
	Offline bool
}

// StaleCopy is a tier copy a rescan found out of date, or one a record
// dropped at load named; the caller removes it.
type StaleCopy struct {
	Tier string
	Path string
	Size int64
}

// Catalog is the persistent record of the source tree and of where each
// file lives.
type Catalog struct {
	db     *badger.DB
	mapDir string // the catalog directory as /proc/self/maps names it (pageout.go)
	log    *zap.Logger
	root   *Entry
	tiers  []string
	files  atomic.Int64
	bytes  atomic.Int64
	walked bool
	stale  []StaleCopy
	mu     sync.Mutex // guards w and every catalog write (writer.go)
	pendMu sync.Mutex // guards w.pending (writer.go)
	w      catalogWriter

	treeMu    sync.Mutex               // serialises changes of the tree (tree.go)
	nextID    atomic.Uint64            // the last entry ID given out
	linksMu   sync.Mutex               // guards links
	links     map[linkKey]uint64       // the ID of each hard-linked source file seen (newID)
	nextIndex atomic.Int64             // the next file Index to give out
	byIndex   atomic.Pointer[[]*Entry] // files by Index (tree.go: ByIndex)

	// The background walk (bgwalk.go): bg is set while it runs;
	// walkDone is closed when the tree is whole (at once without one);
	// walkErr is set before it closes when the walk was stopped;
	// startWalk, set by init, is started by Open.
	bg        atomic.Pointer[bgWalk]
	walkDone  chan struct{}
	walkErr   error
	loadErr   atomic.Pointer[error] // a background load's failure (LoadFailed)
	startWalk func()
}

// ErrNoCatalog means the source cannot be walked now and the state
// directory holds no complete catalog of it.
var ErrNoCatalog = errors.New("catalog: the source does not answer and no earlier mount left a complete catalog of it")

// ErrOtherSource means the state directory belongs to another source.
var ErrOtherSource = errors.New("catalog: state directory holds the catalog of another source")

var (
	keyFilePrefix = []byte("f")
	keySource     = []byte("m/source")
	keyComplete   = []byte("m/complete")
	// keyRescan is set while a rescan rewrites the records of a complete
	// catalog: the records are then a mix of old and new ones, and the
	// next open walks again, keeping the residency either kind records.
	keyRescan = []byte("m/rescan")
)

// Open opens (or creates) the catalog in the state directory. A
// complete catalog of the same source is loaded without touching the
// source; otherwise, or with Rescan, the source is walked.
func Open(ctx context.Context, o Options) (*Catalog, error) {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	c := &Catalog{log: o.Logger, tiers: o.Tiers, walkDone: make(chan struct{})}
	if err := c.openDB(o); err != nil {
		return nil, err
	}
	if err := c.init(ctx, o); err != nil {
		if c.db != nil {
			c.db.Close()
		}
		return nil, err
	}
	if c.startWalk != nil {
		go c.startWalk() // it starts the writer once the tree is stored
		return c, nil
	}
	close(c.walkDone)
	c.startWriter()
	return c, nil
}

func (c *Catalog) init(ctx context.Context, o Options) error {
	// Without a database (the state directory was full at mount and held
	// no readable catalog) there is nothing to load: walk.
	var src, complete, rescanning []byte
	if c.db != nil {
		err := c.db.View(func(txn *badger.Txn) error {
			src = getValue(txn, keySource)
			complete = getValue(txn, keyComplete)
			rescanning = getValue(txn, keyRescan)
			return nil
		})
		if err != nil {
			return fmt.Errorf("catalog: read: %w", err)
		}
	}
	if src != nil && string(src) != o.Source {
		return fmt.Errorf("%w: %s (use another state directory)", ErrOtherSource, src)
	}
	if o.Offline && (complete == nil || rescanning != nil) {
		return ErrNoCatalog
	}
	if complete != nil && (!o.Rescan || o.Offline) && rescanning == nil {
		if o.Rescan {
			c.log.Warn("the source does not answer: the rescan waits for a mount that finds it; loading the last catalog")
		}
		if o.Background {
			return c.startLoad(ctx, o)
		}
		start := time.Now()
		root, err := c.load()
		if err != nil {
			return err
		}
		c.setRoot(root)
		c.log.Info("catalog loaded", zap.Int64("files", c.Files()), zap.Int64("bytes", c.Bytes()), zap.Duration("took", time.Since(start)))
		return nil
	}
	// Copies are recorded only in a catalog that was once complete: a
	// first walk cut short has none to keep.
	keep := complete != nil || rescanning != nil
	var old []copyRecord
	var err error
	if keep {
		if rescanning != nil {
			c.log.Warn("an earlier rescan was interrupted; walking the source again")
		}
		if old, err = c.loadCopies(); err != nil {
			return err
		}
	}
	if o.Background && o.Shared == nil && !keep {
		return c.startBackground(ctx, o)
	}
	start := time.Now()
	var root *Entry
	c.walked = true
	if o.Shared != nil {
		root, c.walked, err = c.walkShared(ctx, o)
	} else {
		root, err = walkSource(ctx, o, c.log)
	}
	if err != nil {
		return err
	}
	c.stale = carryOver(old, root, c.tiers)
	c.store(root, o.Source, keep)
	c.setRoot(root)
	c.log.Info("source walked", zap.Bool("here", c.walked), zap.Int64("files", c.Files()), zap.Int64("bytes", c.Bytes()), zap.Duration("took", time.Since(start)))
	return nil
}

// setRoot installs the tree, numbers it and counts its files. Entries
// that have IDs (a background walk gives them as it reads) keep them.
func (c *Catalog) setRoot(root *Entry) {
	if c.root != root {
		c.root = root
	}
	var files, bytes int64
	var number func(e *Entry)
	number = func(e *Entry) {
		if e.ID == 0 {
			e.ID = c.newID(e)
		}
		e.Index = -1
		if e.Kind == KindFile {
			e.Index = int32(files)
			files++
			bytes += e.Attr().Size
		}
		for _, ch := range e.Children() {
			number(ch)
		}
	}
	number(root)
	c.indexFiles(root, int(files))
	c.files.Store(files)
	c.bytes.Store(bytes)
	c.nextIndex.Store(files)
}

// newID gives e its ID: a new one, or for a hard link of a file that has
// one already, that file's, so that the mount shows one inode for both.
func (c *Catalog) newID(e *Entry) uint64 {
	k := e.link()
	if k == nil {
		return c.nextID.Add(1)
	}
	c.linksMu.Lock()
	defer c.linksMu.Unlock()
	if id, ok := c.links[*k]; ok {
		return id
	}
	if c.links == nil {
		c.links = map[linkKey]uint64{}
	}
	id := c.nextID.Add(1)
	c.links[*k] = id
	return id
}

// Root is the dataset's root directory.
func (c *Catalog) Root() *Entry { return c.root }

// Find returns the entry at the dataset-relative path p, or nil.
func (c *Catalog) Find(p string) *Entry {
	p = strings.Trim(path.Clean("/"+p), "/")
	return find(c.root, p)
}

// Files and Bytes count the dataset's regular files.
func (c *Catalog) Files() int64 { return c.files.Load() }
func (c *Catalog) Bytes() int64 { return c.bytes.Load() }

// Walked reports whether this open walked the source.
func (c *Catalog) Walked() bool { return c.walked }

// Stale returns the out-of-date copies a rescan found.
func (c *Catalog) Stale() []StaleCopy { return c.stale }

// TierNames are the tiers the catalog records copies in, by index.
func (c *Catalog) TierNames() []string { return c.tiers }

// TierName is the name of tier index i.
func (c *Catalog) TierName(i int) string {
	if i < 0 || i >= len(c.tiers) {
		return "source"
	}
	return c.tiers[i]
}

// Files calls fn for every regular file under e, in path order.
func (e *Entry) Files(fn func(*Entry) bool) bool {
	if e.Kind == KindFile {
		return fn(e)
	}
	for _, ch := range e.Children() {
		if !ch.Files(fn) {
			return false
		}
	}
	return true
}
