// Package catalog is the dataset as the mount knows it: the tree of the
// source's files, directories and symlinks with their attributes, walked
// once (in parallel, in the background: bgwalk.go, walk.go, or loaded
// from another node's walk: shared.go) and kept in a badger database under
// the state directory (records: record.go; written by one guarded writer
// that survives a full disk: writer.go, persist.go; loaded at remount:
// load.go, db.go). Each entry (entry.go) carries its residency (residency.go: which
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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
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
	// NamesFirst makes a background walk read every directory's names
	// before any file's attributes (names.go): the files are numbered,
	// and Named closed, after the listings alone.
	NamesFirst bool
	// LoadHold, if set, holds a background load of a stored catalog
	// before it reads anything below the root until it is closed (or the
	// catalog is): directories are read only on demand meanwhile. Tests
	// use it to act while a load runs.
	LoadHold <-chan struct{}
	// Offline: the source does not answer now; only a complete catalog
	// from an earlier mount is loaded (a rescan waits for a later
	// mount), and without one Open fails with ErrNoCatalog.
	Offline bool
	// FirstID, if set, is the ID the entry IDs are given out after (the
	// root's is FirstID+1): tests start past 2^32 to see IDs that the
	// entry cannot hold in its 32 bits (Entry.ID). 0: the root's ID is 1.
	FirstID uint64
	// streamChunk, for tests, is the bytes of records a walk's store
	// as a stream hands badger at a time (0: streamChunkSize); -1 stores in
	// batches (stream.go).
	streamChunk int
	// namesHold, for tests, holds a walk that reads names first after
	// the files are numbered (Named) until it is closed (or the catalog
	// is): attributes are read only on demand meanwhile.
	namesHold <-chan struct{}
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

	treeMu    sync.Mutex                // serialises changes of the tree (tree.go)
	nextID    atomic.Uint64             // the last entry ID given out
	linksMu   sync.Mutex                // guards links
	links     map[linkKey]uint64        // the ID of each hard-linked source file seen (newID)
	nextIndex atomic.Int64              // the next file Index to give out
	byIndex   atomic.Pointer[Numbering] // files by Index (numbering.go)

	// The background walk (bgwalk.go): bg is set while it runs;
	// walkDone is closed when the tree is whole (at once without one);
	// walkErr is set before it closes when the walk was stopped;
	// startWalk, set by init, is started by Open.
	bg        atomic.Pointer[bgWalk]
	walkDone  chan struct{}
	named     chan struct{} // closed when a walk that reads names first has numbered the files (names.go)
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
	c.nextID.Store(o.FirstID)
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
		if e.ID() == 0 {
			e.setID(c.newID(e))
		}
		e.Index = -1
		if e.Kind() == KindFile {
			e.Index = int32(files)
			files++
			bytes += e.Attr().Size
		}
		for ch := range e.Children().All() {
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
	if e.Kind() == KindFile {
		return fn(e)
	}
	for ch := range e.Children().All() {
		if !ch.Files(fn) {
			return false
		}
	}
	return true
}
