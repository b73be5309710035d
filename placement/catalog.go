package placement

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
)

// Attr is what the source said about an entry when it was last looked at.
type Attr struct {
	Size  int64
	Mtime int64 // nanoseconds since the epoch
	Mode  uint32
	UID   uint32
	GID   uint32
}

// Entry is one file, directory or symlink of the dataset. The tree is
// built at mount; while serving, an entry's attributes and residency
// change, and a refresh (or a file found gone from the source) adds and
// removes entries: a directory's children are replaced whole (copy on
// write), so readers never lock.
type Entry struct {
	ID     uint64 // stable for the life of the mount; the root is 1
	Path   string // relative to the source root; "" for the root
	Kind   Kind
	Target string // symlink target
	// Index numbers the regular files 0..Files()-1 in path order (the
	// order of Files); -1 for directories and symlinks. The sampler's
	// sample indices are these.
	Index int32

	kids      atomic.Pointer[[]*Entry] // sorted by name; nil for files
	attr      atomic.Pointer[Attr]
	tier      atomic.Int32 // index of the tier holding a copy, or -1
	nospace   atomic.Bool  // did not fit any tier this mount
	validated atomic.Bool  // source attributes checked this mount
	gone      atomic.Bool  // removed from the dataset (source file gone)

	res     atomic.Pointer[Resident] // the copy's kept descriptor (resident.go)
	copyGen atomic.Uint64            // bumped at every drop of a copy (resident.go)
}

// Name is the entry's last path element ("" for the root).
func (e *Entry) Name() string { return e.Path[strings.LastIndexByte(e.Path, '/')+1:] }

// Attr returns the entry's attributes.
func (e *Entry) Attr() Attr { return *e.attr.Load() }

// Tier is the index of the tier that holds the entry's copy, or -1.
func (e *Entry) Tier() int { return int(e.tier.Load()) }

// Children returns a directory's entries sorted by name. Do not modify.
func (e *Entry) Children() []*Entry {
	if p := e.kids.Load(); p != nil {
		return *p
	}
	return nil
}

func (e *Entry) setChildren(c []*Entry) { e.kids.Store(&c) }

// Gone reports that the entry was removed from the dataset.
func (e *Entry) Gone() bool { return e.gone.Load() }

// Lookup finds a child by name.
func (e *Entry) Lookup(name string) *Entry {
	c := e.Children()
	i := sort.Search(len(c), func(i int) bool { return c[i].Name() >= name })
	if i < len(c) && c[i].Name() == name {
		return c[i]
	}
	return nil
}

// CatalogOptions configure OpenCatalog.
type CatalogOptions struct {
	StateDir string   // badger lives in StateDir/catalog
	Source   string   // absolute source root
	Tiers    []string // tier names, fastest first; copies in other tiers are forgotten
	Rescan   bool     // walk the source even when a complete catalog exists
	Workers  int      // parallel directory reads during a walk
	Logger   *zap.Logger
	// Progress, if set, is called during a walk with the entries seen;
	// calls do not overlap.
	Progress func(entries int64)
	// MinFree is the state directory's free-space floor in bytes: the
	// catalog is written only while the file system has more free space
	// than MinFree plus the catalog's own tables (catalog_writer.go).
	// 0 means DefaultCatalogMinFree.
	MinFree int64
	// Statfs reports the free and total bytes of the file system holding
	// dir; nil means statfs(2). Tests set it to simulate a full disk.
	Statfs func(dir string) (free, total uint64, err error)
	// RetryInterval is how often a degraded catalog checks for room to
	// write what it holds (default DefaultCatalogRetry).
	RetryInterval time.Duration
}

// StaleCopy is a tier copy a rescan found out of date; the caller removes it.
type StaleCopy struct {
	Tier string
	Path string
	Size int64
}

// Catalog is the persistent record of the source tree and of where each
// file lives.
type Catalog struct {
	db     *badger.DB
	log    *zap.Logger
	root   *Entry
	tiers  []string
	files  atomic.Int64
	bytes  atomic.Int64
	walked bool
	stale  []StaleCopy
	mu     sync.Mutex // guards w and every catalog write (catalog_writer.go)
	w      catalogWriter

	treeMu    sync.Mutex    // serialises changes of the tree (tree.go)
	nextID    atomic.Uint64 // the last entry ID given out
	nextIndex atomic.Int64  // the next file Index to give out
}

// ErrOtherSource means the state directory belongs to another source.
var ErrOtherSource = errors.New("placement: state directory holds the catalog of another source")

var (
	keyFilePrefix = []byte("f")
	keySource     = []byte("m/source")
	keyComplete   = []byte("m/complete")
	// keyRescan is set while a rescan rewrites the records of a complete
	// catalog: the records are then a mix of old and new ones, and the
	// next open walks again, keeping the residency either kind records.
	keyRescan = []byte("m/rescan")
)

// OpenCatalog opens (or creates) the catalog in the state directory. A
// complete catalog of the same source is loaded without touching the
// source; otherwise, or with Rescan, the source is walked.
func OpenCatalog(ctx context.Context, o CatalogOptions) (*Catalog, error) {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	c := &Catalog{log: o.Logger, tiers: o.Tiers}
	if err := c.openDB(o); err != nil {
		return nil, err
	}
	if err := c.init(ctx, o); err != nil {
		if c.db != nil {
			c.db.Close()
		}
		return nil, err
	}
	c.startWriter()
	return c, nil
}

func (c *Catalog) init(ctx context.Context, o CatalogOptions) error {
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
			return fmt.Errorf("placement: read catalog: %w", err)
		}
	}
	if src != nil && string(src) != o.Source {
		return fmt.Errorf("%w: %s (use another state directory)", ErrOtherSource, src)
	}
	if complete != nil && !o.Rescan && rescanning == nil {
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
	start := time.Now()
	root, err := walk(ctx, o.Source, o.Workers, c.log, o.Progress)
	if err != nil {
		return err
	}
	c.walked = true
	c.stale = carryOver(old, root, c.tiers)
	c.store(root, o.Source, keep)
	c.setRoot(root)
	c.log.Info("source walked", zap.Int64("files", c.Files()), zap.Int64("bytes", c.Bytes()), zap.Duration("took", time.Since(start)))
	return nil
}

func getValue(txn *badger.Txn, key []byte) []byte {
	it, err := txn.Get(key)
	if err != nil {
		return nil
	}
	v, err := it.ValueCopy(nil)
	if err != nil {
		return nil
	}
	return v
}

// setRoot installs the tree, numbers it and counts its files.
func (c *Catalog) setRoot(root *Entry) {
	c.root = root
	var id uint64
	var files, bytes int64
	var number func(e *Entry)
	number = func(e *Entry) {
		id++
		e.ID = id
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
	c.files.Store(files)
	c.bytes.Store(bytes)
	c.nextID.Store(id)
	c.nextIndex.Store(files)
}

// load reads every record into a tree.
func (c *Catalog) load() (*Entry, error) {
	dirs := map[string]*Entry{}
	kids := map[*Entry][]*Entry{}
	var root *Entry
	err := c.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = keyFilePrefix
		opts.PrefetchSize = 1000
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			p := string(item.Key()[len(keyFilePrefix):])
			var rec record
			err := item.Value(func(v []byte) error {
				var derr error
				rec, derr = decodeRecord(v)
				return derr
			})
			if err != nil {
				return fmt.Errorf("placement: catalog entry %q: %w", p, err)
			}
			e := c.newEntry(p, rec)
			if p == "" {
				if e.Kind != KindDir {
					return fmt.Errorf("%w: root is not a directory", ErrBadRecord)
				}
				root = e
				dirs[""] = e
				continue
			}
			parentPath := path.Dir(p)
			if parentPath == "." {
				parentPath = ""
			}
			parent := dirs[parentPath]
			if parent == nil {
				return fmt.Errorf("%w: %q has no parent", ErrBadRecord, p)
			}
			kids[parent] = append(kids[parent], e)
			if e.Kind == KindDir {
				dirs[p] = e
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if root == nil {
		return nil, fmt.Errorf("%w: no root", ErrBadRecord)
	}
	for _, d := range dirs {
		d.setChildren(kids[d])
	}
	return root, nil
}

func (c *Catalog) newEntry(p string, rec record) *Entry {
	e := &Entry{Path: p, Kind: rec.Kind, Target: rec.Target}
	e.attr.Store(&Attr{Size: rec.Size, Mtime: rec.Mtime, Mode: rec.Mode, UID: rec.UID, GID: rec.GID})
	e.tier.Store(-1)
	if rec.Tier != "" {
		for i, t := range c.tiers {
			if t == rec.Tier {
				e.tier.Store(int32(i))
			}
		}
	}
	return e
}

// copyRecord is a tier copy a stored record says exists.
type copyRecord struct {
	path        string
	size, mtime int64
	tier        int
}

// loadCopies reads the tier copies the stored records name, without
// building the tree: after an interrupted rescan the records are a mix of
// two trees and need not form one.
func (c *Catalog) loadCopies() ([]copyRecord, error) {
	var out []copyRecord
	err := c.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = keyFilePrefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			p := string(item.Key()[len(keyFilePrefix):])
			err := item.Value(func(v []byte) error {
				rec, err := decodeRecord(v)
				if err != nil {
					return fmt.Errorf("placement: catalog entry %q: %w", p, err)
				}
				if rec.Kind != KindFile || rec.Tier == "" {
					return nil
				}
				for i, t := range c.tiers {
					if t == rec.Tier {
						out = append(out, copyRecord{path: p, size: rec.Size, mtime: rec.Mtime, tier: i})
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// carryOver keeps the residency of files whose size and mtime did not
// change and returns the copies that are out of date.
func carryOver(old []copyRecord, cur *Entry, tiers []string) []StaleCopy {
	var stale []StaleCopy
	for _, o := range old {
		n := find(cur, o.path)
		if n != nil && n.Kind == KindFile && n.Attr().Size == o.size && n.Attr().Mtime == o.mtime {
			n.tier.Store(int32(o.tier))
		} else {
			stale = append(stale, StaleCopy{Path: o.path, Size: o.size, Tier: tiers[o.tier]})
		}
	}
	return stale
}

func find(root *Entry, p string) *Entry {
	e := root
	if p == "" {
		return e
	}
	for _, name := range strings.Split(p, "/") {
		if e = e.Lookup(name); e == nil {
			return nil
		}
	}
	return e
}

// store replaces the persisted tree with root. With keep (the records may
// name tier copies) the old records are overwritten and then the ones root
// no longer has are deleted, under the rescan marker, so that a crash at
// any point leaves every copy recorded by an old or a new record; without,
// the records are dropped first. The records go through the catalog's
// guarded writes (catalog_writer.go): when the state directory has no room
// the store is left, whole, to the catch-up, and until it is done the
// catalog on disk is incomplete (the next mount walks again).
func (c *Catalog) store(root *Entry, source string, keep bool) {
	tw := c.beginTree(root, source, keep)
	var put func(e *Entry)
	put = func(e *Entry) {
		if tw.failed() || !tw.set(fileKey(e.Path), c.recordOf(e).encode(nil)) {
			return
		}
		for _, ch := range e.Children() {
			put(ch)
		}
	}
	put(root)
	if tw.set(keySource, []byte(source)) && tw.flush() && (!keep || c.deleteMissing(root, tw)) {
		// Written last: a walk cut short is redone at the next mount.
		tw.complete()
	}
}

// deleteMissing deletes the records of paths root does not have.
func (c *Catalog) deleteMissing(root *Entry, tw *treeWriter) bool {
	var gone [][]byte
	err := c.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = keyFilePrefix
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if find(root, string(k[len(keyFilePrefix):])) == nil {
				gone = append(gone, it.Item().KeyCopy(nil))
			}
		}
		return nil
	})
	if err != nil {
		return tw.fail(err)
	}
	for _, k := range gone {
		if !tw.del(k) {
			return false
		}
	}
	return tw.flush()
}

func fileKey(p string) []byte {
	return append(append(make([]byte, 0, len(keyFilePrefix)+len(p)), keyFilePrefix...), p...)
}

func (c *Catalog) recordOf(e *Entry) *record {
	a := e.Attr()
	r := &record{Kind: e.Kind, Mode: a.Mode, UID: a.UID, GID: a.GID, Size: a.Size, Mtime: a.Mtime, Target: e.Target}
	if t := e.Tier(); t >= 0 && t < len(c.tiers) {
		r.Tier = c.tiers[t]
	}
	return r
}

// persist writes e's current record, or keeps it for the catch-up when
// the catalog cannot be written now (catalog_writer.go); it does not fail.
func (c *Catalog) persist(e *Entry) error {
	c.write(e.Path, e)
	return nil
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

// walk reads the source tree in parallel.
func walk(ctx context.Context, src string, workers int, log *zap.Logger, progress func(int64)) (*Entry, error) {
	st, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("placement: walk: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("placement: walk: %s is not a directory", src)
	}
	root := entryFromInfo("", st)
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	var seen atomic.Int64
	var progMu sync.Mutex
	var firstErr error
	var errMu sync.Mutex
	var visit func(d *Entry)
	visit = func(d *Entry) {
		defer wg.Done()
		if ctx.Err() != nil {
			return
		}
		sem <- struct{}{}
		des, err := os.ReadDir(filepath.Join(src, d.Path))
		var kids []*Entry
		for _, de := range des {
			p := de.Name()
			if d.Path != "" {
				p = d.Path + "/" + de.Name()
			}
			info, ierr := de.Info()
			if ierr != nil {
				log.Warn("walk: skipping entry", zap.String("path", p), zap.Error(ierr))
				continue
			}
			e := entryFromInfo(p, info)
			if e == nil {
				log.Debug("walk: skipping special file", zap.String("path", p))
				continue
			}
			if e.Kind == KindSymlink {
				t, lerr := os.Readlink(filepath.Join(src, p))
				if lerr != nil {
					log.Warn("walk: skipping symlink", zap.String("path", p), zap.Error(lerr))
					continue
				}
				e.Target = t
			}
			kids = append(kids, e)
		}
		<-sem
		if err != nil {
			if d.Path == "" {
				errMu.Lock()
				firstErr = fmt.Errorf("placement: walk %s: %w", src, err)
				errMu.Unlock()
				return
			}
			log.Warn("walk: cannot read directory; it will look empty", zap.String("path", d.Path), zap.Error(err))
		}
		d.setChildren(kids)
		// One call at a time, with a count that only grows: the callback
		// need not be safe for concurrent use.
		progMu.Lock()
		if n := seen.Add(int64(len(kids))); progress != nil {
			progress(n)
		}
		progMu.Unlock()
		for _, k := range kids {
			if k.Kind == KindDir {
				wg.Add(1)
				go visit(k)
			}
		}
	}
	wg.Add(1)
	visit(root)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("placement: walk: %w", err)
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return root, nil
}

func entryFromInfo(p string, info fs.FileInfo) *Entry {
	e := &Entry{Path: p}
	switch {
	case info.Mode().IsRegular():
		e.Kind = KindFile
	case info.IsDir():
		e.Kind = KindDir
	case info.Mode()&fs.ModeSymlink != 0:
		e.Kind = KindSymlink
	default:
		return nil
	}
	a := &Attr{Size: info.Size(), Mtime: info.ModTime().UnixNano()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		a.Mode = st.Mode
		a.UID = st.Uid
		a.GID = st.Gid
	}
	if e.Kind != KindFile {
		a.Size = info.Size()
	}
	e.attr.Store(a)
	e.tier.Store(-1)
	return e
}

// attrFromInfo converts a fresh stat of a source file.
func attrFromInfo(info fs.FileInfo) Attr {
	a := Attr{Size: info.Size(), Mtime: info.ModTime().UnixNano()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		a.Mode, a.UID, a.GID = st.Mode, st.Uid, st.Gid
	}
	return a
}
