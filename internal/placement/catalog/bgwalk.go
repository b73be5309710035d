package catalog

// Serving while walking. A first mount of a large tree on a PFS walks it
// for minutes; the mount does not wait for that. Open with
// Options.Background reads the root directory (a source that cannot
// be read still fails the mount), returns, and walks the rest in the
// background. Until the walk ends:
//
//   - a directory the walk has not reached is read from the source when
//     someone asks for it (List: a lookup or a listing through the mount),
//     once, whoever asks first, the walk or a reader; the walk then skips
//     it and goes on below it;
//   - every entry gets its ID (the inode number) when its directory is
//     read; file indices (Entry.Index, the sampler's numbering in path
//     order) come with the finished tree, so the callers that number files
//     (jobs, warmup "all", scrubs) wait for WalkDone;
//   - nothing is written to the catalog: the tree is stored whole when the
//     walk ends, with its "complete" marker last, as a blocking walk's is,
//     and the writer starts then. A mount stopped before that walks again
//     next time.
//
// A later mount loads the stored catalog the same way (a background
// load): the root's records are read before Open returns, the rest by
// the same walk over the stored records instead of the source (one range
// of keys a directory: readStored), each directory on demand or in turn.
// Nothing is stored at its end (the records are the catalog); records
// whose directory the catalog does not have are dropped then. A record
// that does not decode stops the load (LoadFailed): the directories not
// read by then fail with its error.
//
// Rescans (the records may name tier copies) and cluster walks (another
// node's tree) stay blocking.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/epochfs/epochfs/internal/source"
	"github.com/epochfs/epochfs/internal/status"
	"github.com/puzpuzpuz/xsync/v3"
	"go.uber.org/zap"
)

// ErrWalkStopped means the catalog was closed before its background walk
// ended.
var ErrWalkStopped = errors.New("catalog: the walk of the source was stopped")

// bgWalk is a walk (or a load) in progress in the background.
type bgWalk struct {
	// read reads directory d: from the source (readKids) or, with load,
	// from the stored records (readStored).
	read     func(ctx context.Context, d *Entry) (Kids, error)
	load     bool
	src      *source.Source
	log      *zap.Logger
	workers  int
	progress func(int64)
	ctx      context.Context
	cancel   context.CancelFunc
	start    time.Time
	entries  atomic.Int64 // entries read so far, the root's own excluded
	pending  atomic.Int64 // directories known and not yet read
	demanded atomic.Int64 // directories read because someone asked first
	listing  *xsync.MapOf[*Entry, chan struct{}]
	progMu   sync.Mutex

	// A walk that reads names first (names.go): the directories named
	// and not yet filled, with their names; the entries among them.
	namesFirst   bool
	namesHold    <-chan struct{}
	named        *xsync.MapOf[*Entry, Kids]
	attrsPending atomic.Int64

	// A load's findings (guarded by dropMu): records without a directory,
	// the copies they name, the error that stopped it.
	dropMu  sync.Mutex
	orphans []string
	stale   []StaleCopy
	failed  error
}

// startBackground prepares the background walk of o's source: the root
// is read now, the rest by run (Open starts it).
func (c *Catalog) startBackground(ctx context.Context, o Options) error {
	src := o.Walker
	if src == nil {
		return errors.New("catalog: a background walk needs the mount's source")
	}
	st, err := os.Stat(src.Root())
	if err != nil {
		return fmt.Errorf("catalog: walk: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("catalog: walk: %s is not a directory", src.Root())
	}
	root := rootFromInfo(st)
	root.setID(c.newID(root))
	root.Index = -1
	wctx, cancel := context.WithCancel(context.Background())
	bg := &bgWalk{src: src, log: c.log, workers: o.Workers, progress: o.Progress, ctx: wctx, cancel: cancel,
		start: time.Now(), listing: xsync.NewMapOf[*Entry, chan struct{}]()}
	bg.read = func(ctx context.Context, d *Entry) (Kids, error) { return readKids(ctx, src, d, c.log) }
	if o.NamesFirst {
		bg.namesFirst, bg.namesHold, bg.named = true, o.namesHold, xsync.NewMapOf[*Entry, Kids]()
		c.named = make(chan struct{})
	}
	bg.pending.Store(1)
	c.root, c.walked = root, true
	c.bg.Store(bg)
	if err := bg.list(ctx, c, root, false); err != nil {
		cancel()
		c.bg.Store(nil)
		return err
	}
	c.startWalk = func() { bg.run(c, o.Source, root) }
	return nil
}

// startLoad prepares the background load of the stored catalog: the
// root's entries are read now, the rest by run (Open starts it).
func (c *Catalog) startLoad(ctx context.Context, o Options) error {
	var rec record
	err := c.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(keyFilePrefix)
		if err != nil {
			return err
		}
		rec, err = c.decodeItem(it)
		return err
	})
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return fmt.Errorf("%w: no root", ErrBadRecord)
	case err != nil:
		return fmt.Errorf("catalog: read the root's record: %w", err)
	case rec.Kind != KindDir:
		return fmt.Errorf("%w: root is not a directory", ErrBadRecord)
	}
	root := c.newEntry("", rec)
	root.setID(c.newID(root))
	root.Index = -1
	wctx, cancel := context.WithCancel(context.Background())
	bg := &bgWalk{load: true, log: c.log, workers: o.Workers, ctx: wctx, cancel: cancel,
		start: time.Now(), listing: xsync.NewMapOf[*Entry, chan struct{}]()}
	bg.read = func(ctx context.Context, d *Entry) (Kids, error) {
		kids, orphans, stale, err := c.readStored(ctx, d)
		if len(orphans) > 0 {
			bg.dropMu.Lock()
			bg.orphans = append(bg.orphans, orphans...)
			bg.stale = append(bg.stale, stale...)
			bg.dropMu.Unlock()
		}
		return kids, err
	}
	bg.pending.Store(1)
	c.root = root
	c.bg.Store(bg)
	if err := bg.list(ctx, c, root, false); err != nil {
		cancel()
		c.bg.Store(nil)
		return err
	}
	c.startWalk = func() {
		if o.LoadHold != nil {
			select {
			case <-o.LoadHold:
			case <-bg.ctx.Done():
			}
		}
		bg.run(c, o.Source, root)
	}
	return nil
}

// Walking reports that the tree is not whole yet: a background walk or
// load has not ended.
func (c *Catalog) Walking() bool { return c.bg.Load() != nil }

// Loading reports that a background load of the stored catalog runs.
func (c *Catalog) Loading() bool {
	bg := c.bg.Load()
	return bg != nil && bg.load
}

// LoadFailed is the error that stopped a background load (a record that
// does not decode, a failed read of the records), or nil.
func (c *Catalog) LoadFailed() error {
	if p := c.loadErr.Load(); p != nil {
		return *p
	}
	return nil
}

// WalkDone is closed once the tree is whole: at once unless a background
// walk runs, otherwise when it ends (finished or stopped).
func (c *Catalog) WalkDone() <-chan struct{} { return c.walkDone }

// WaitWalk waits until the tree is whole. It fails with ctx's error, or
// ErrWalkStopped when the catalog was closed first.
func (c *Catalog) WaitWalk(ctx context.Context) error {
	select {
	case <-c.walkDone:
		return c.walkErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WalkProgress reports the entries a background walk has read and the
// directories it knows and has not read yet (0, 0 when none runs).
func (c *Catalog) WalkProgress() (entries, dirsPending int64) {
	if bg := c.bg.Load(); bg != nil {
		return bg.entries.Load() + 1, bg.pending.Load()
	}
	return 0, 0
}

// List makes sure the directory d's entries are read: during a background
// walk a directory it has not reached is read now (once, whoever asks
// first). A directory that cannot be read looks empty (logged), as in a
// walk. It waits at most until ctx ends. During a load, or after one that
// failed, a directory the load could not read fails with its error.
func (c *Catalog) List(ctx context.Context, d *Entry) error {
	if d.Listed() {
		return nil
	}
	bg := c.bg.Load()
	if bg == nil {
		if err := c.LoadFailed(); err != nil && d.Kind() == KindDir {
			return err
		}
		return nil
	}
	return bg.list(ctx, c, d, true)
}

// list reads d's entries unless someone did; a reader waiting for another
// one's read of d waits at most until ctx ends. Only the root's read
// error is returned.
func (bg *bgWalk) list(ctx context.Context, c *Catalog, d *Entry, demand bool) error {
	if d.Listed() {
		return nil
	}
	release, err := bg.lock(ctx, d)
	if err != nil {
		return err
	}
	defer release()
	if d.Listed() {
		return nil // read between the two looks
	}
	if bg.namesFirst {
		if named, ok := bg.named.Load(d); ok {
			return bg.fill(c, d, named, demand)
		}
	}
	kids, err := bg.read(bg.ctx, d)
	if err != nil && bg.load {
		if bg.ctx.Err() != nil {
			err = ErrWalkStopped
		}
		err = fmt.Errorf("catalog: load the stored catalog: %w", err)
		bg.fail(err)
		return err
	}
	if err != nil {
		if d.Path() == "" {
			return fmt.Errorf("catalog: walk %s: %w", bg.src.Root(), err)
		}
		if bg.ctx.Err() != nil {
			return nil // stopped: the tree is not stored
		}
		bg.log.Warn("walk: cannot read directory; it will look empty", zap.String("path", d.Path()), zap.Error(err))
	}
	var files, bytes, dirs int64
	for k := range kids.All() {
		k.setID(c.newID(k))
		k.Index = -1
		switch k.Kind() {
		case KindFile:
			files++
			bytes += k.Attr().Size
		case KindDir:
			dirs++
		}
	}
	c.treeMu.Lock()
	d.setChildren(kids)
	c.treeMu.Unlock()
	c.files.Add(files)
	c.bytes.Add(bytes)
	bg.pending.Add(dirs - 1)
	if demand {
		bg.demanded.Add(1)
	}
	bg.progMu.Lock()
	if n := bg.entries.Add(int64(kids.Len())); bg.progress != nil {
		bg.progress(n)
	}
	bg.progMu.Unlock()
	return nil
}

// lock waits for d's turn to be read (or named): one reader of a
// directory at a time. It fails when ctx ends first.
func (bg *bgWalk) lock(ctx context.Context, d *Entry) (release func(), err error) {
	for {
		ch := make(chan struct{})
		prev, loaded := bg.listing.LoadOrStore(d, ch)
		if !loaded {
			return func() {
				bg.listing.Delete(d)
				close(ch)
			}, nil
		}
		select {
		case <-prev:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// fill reads the attributes of d's names (names.go) and puts its entries
// in the tree; a directory whose attributes cannot be read looks empty.
func (bg *bgWalk) fill(c *Catalog, d *Entry, named Kids, demand bool) error {
	kids, gone, err := fillNamed(bg.ctx, bg.src, d, named, bg.log)
	if err != nil && bg.ctx.Err() != nil {
		return nil // stopped: the tree is not stored, and nothing is gone
	}
	bg.attrsPending.Add(-int64(named.Len()))
	for _, g := range gone {
		bg.drop(g)
	}
	if err != nil {
		bg.log.Warn("walk: cannot read the attributes of a directory's entries; it will look empty",
			zap.String("path", d.Path()), zap.Error(err))
	}
	var files, bytes int64
	for k := range kids.All() {
		k.setID(c.newID(k))
		if k.Kind() == KindFile {
			files++
			bytes += k.Attr().Size
		}
	}
	c.treeMu.Lock()
	d.setChildren(kids)
	c.treeMu.Unlock()
	// Out of named only now: the numbering finds d's names in one place
	// or the other at any time.
	bg.named.Delete(d)
	c.files.Add(files)
	c.bytes.Add(bytes)
	if demand {
		bg.demanded.Add(1)
	}
	return nil
}

// fail stops a load at its first error.
func (bg *bgWalk) fail(err error) {
	bg.dropMu.Lock()
	if bg.failed == nil {
		bg.failed = err
	}
	bg.dropMu.Unlock()
	bg.cancel()
}

// run walks the tree below root, skipping what was read on demand, then
// stores it whole and starts the catalog's writer.
func (bg *bgWalk) run(c *Catalog, source string, root *Entry) {
	if bg.namesFirst && !bg.runNames(c, root) {
		bg.stopped(c)
		return
	}
	Descend(bg.ctx, root, bg.workers, func(d *Entry) []*Entry {
		bg.list(bg.ctx, c, d, false)
		return dirsOf(d.Children())
	})
	if bg.load {
		bg.endLoad(c, root)
		return
	}
	if bg.ctx.Err() != nil {
		bg.stopped(c)
		return
	}
	c.store(root, source, false)
	if !bg.namesFirst {
		c.setRoot(root) // numbered before the attributes otherwise (Named)
	}
	c.bg.Store(nil)
	bg.cancel()
	c.startWriter()
	c.log.Info("source walked", zap.Bool("here", true), zap.Bool("background", true),
		zap.Int64("files", c.Files()), zap.Int64("bytes", c.Bytes()),
		zap.Int64("read_on_demand", bg.demanded.Load()), zap.Duration("took", time.Since(bg.start)))
	close(c.walkDone)
}

// stopped ends a walk stopped before its end.
func (bg *bgWalk) stopped(c *Catalog) {
	c.walkErr = ErrWalkStopped
	c.log.Info("walk of the source stopped before its end; the next mount walks again",
		zap.Int64("entries", bg.entries.Load()+1))
	close(c.walkDone)
}

// endLoad ends a background load: the tree is numbered, the orphans'
// records are dropped and the writer starts. A load that failed or was
// stopped leaves the tree as it is (the directories read so far) and the
// records untouched.
func (bg *bgWalk) endLoad(c *Catalog, root *Entry) {
	bg.dropMu.Lock()
	failed := bg.failed
	bg.dropMu.Unlock()
	if failed == nil && bg.ctx.Err() != nil {
		failed = ErrWalkStopped
	}
	if failed != nil {
		c.walkErr = failed
		if !errors.Is(failed, ErrWalkStopped) {
			c.loadErr.Store(&failed)
			c.log.Error("the stored catalog cannot be read; the directories not read so far fail with EIO "+
				"(remove the state directory to walk the source again)", zap.Error(failed))
		}
		c.bg.Store(nil)
		close(c.walkDone)
		return
	}
	if len(bg.orphans) > 0 {
		slices.Sort(bg.orphans)
		c.dropOrphans(bg.orphans)
	}
	c.stale = bg.stale
	c.setRoot(root)
	c.bg.Store(nil)
	bg.cancel()
	c.startWriter()
	c.log.Info("catalog loaded", zap.Bool("background", true), zap.Int64("files", c.Files()), zap.Int64("bytes", c.Bytes()),
		zap.Int64("read_on_demand", bg.demanded.Load()), zap.Duration("took", time.Since(bg.start)))
	close(c.walkDone)
}

// stopWalk stops a background walk and waits for it to end.
func (c *Catalog) stopWalk() {
	if bg := c.bg.Load(); bg != nil {
		bg.cancel()
		<-c.walkDone
	}
}

// Status fills the catalog's section of the mount's status: walking,
// loading, ok, degraded or failed, the background walk's progress, the
// records not yet written. settled is false while the mount's user of
// the tree (the placer) has not taken it whole yet: a catalog walked or
// loaded is still "walking" or "loading" until then.
func (c *Catalog) Status(d *status.Doc, settled bool) {
	state, pending := c.Health()
	entries, dirs := c.WalkProgress()
	switch {
	case c.LoadFailed() != nil:
		state = "failed"
	case c.Loading(), !settled && !c.walked:
		state = "loading"
	case c.Walking(), !settled:
		state = "walking"
	}
	d.Text("catalog", state)
	d.Int("walk_entries", entries)
	d.Int("walk_dirs_pending", dirs)
	d.Int("walk_attrs_pending", c.AttrsPending())
	d.Int("catalog_pending", int64(pending))
}
