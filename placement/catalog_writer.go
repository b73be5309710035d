package placement

// Catalog writes and the state directory's free-space floor.
//
// badger v4 writes most of its files through shared memory maps of sparse
// files. A store into a page of a hole that the file system cannot back
// (ENOSPC on ext4 or xfs, the size limit of a tmpfs) is not an error a
// write call returns: the kernel raises SIGBUS, and the Go runtime dies
// with "unexpected fault address" (a fault in badger's goroutines cannot
// be recovered). Every such write, with our options (catalogOptions):
//
//   - memtable WAL (NNNNN.mem): created by ftruncate to 2 × MemTableSize
//     (32 MiB, sparse), and every committed entry is copied into the map
//     (memtable.go writeEntry). Pages are allocated as entries are written;
//     a memtable is rotated once it holds MemTableSize (16 MiB), so at most
//     16 MiB + one batch is ever touched per file. A new one is made at
//     every open and rotation (its 20-byte header touches one page).
//   - SST tables (NNNNNN.sst): table.CreateTable truncates the file to the
//     built size and copies the whole table into a map. A memtable flush
//     (in the background once a memtable is full, and in DB.Close for the
//     current one) writes one table no bigger than the memtable's data
//     (Snappy-compressed entries plus index and bloom filter);
//     compactions write tables whose total is at most the total of their
//     input tables, and concurrent compactions have disjoint inputs, so
//     all compactions in flight write at most the catalog's table bytes
//     before their inputs are deleted. DropPrefix (a first walk's store)
//     is a memtable flush plus such compactions.
//   - value log (NNNNNN.vlog): created sparse at 2 × ValueLogFileSize at
//     every open; only its 20-byte header is written, because every value
//     (a record: tens of bytes, at most ~4.2 KiB) is below ValueThreshold
//     (1 MiB) and stays in the LSM tree.
//   - DISCARD: a 1 MiB sparse map of value-log discard counters; one slot
//     is zeroed at creation, the rest only for value-log files with
//     garbage, of which we have none.
//
// MANIFEST, KEYREGISTRY and the LOCK pid file use write(2): on a full disk
// they fail with ENOSPC, which badger returns or retries, never a fault.
// Reads never write. CompactL0OnClose stays off: it would rewrite L0 and
// its base level inside Close, after our last check.
//
// The floor. Before each write of ours (one record, or one batch of at
// most catalogBatchRecords records and catalogBatchBytes bytes) the free
// space of the state directory must be at least
//
//	MinFree (default DefaultCatalogMinFree = 160 MiB) + the catalog's table bytes.
//
// After a check passes, what badger can still allocate because of it, even
// if we never write again, is: the batch's WAL pages (≤ 1 MiB plus a
// page); the flush of every memtable not yet in a table, each becoming an
// L0 table no bigger than its WAL — the mutable one, the one being flushed
// and up to NumMemtables queued (db.flushChan), 4 × 16 MiB = 64 MiB; the
// compactions those tables and earlier ones trigger, at most the table
// bytes (the second term, which therefore grows with the catalog: ~35 MiB
// for the 1.28 M records of ImageNet, measured) plus the new L0 tables
// again (64 MiB); DISCARD (1 MiB) and one page each for the headers of a
// new WAL and value log. 1 + 64 + 64 + 1 + ε ≈ 130 MiB fits under
// 160 MiB. The bound is loose: tables are well under the WAL bytes they
// hold (Snappy, prefix-compressed keys: 35 MiB of tables for ~85 MiB of
// WAL entries, measured), a flush frees its WAL's pages and a compaction
// its inputs. MemTableSize,
// NumMemtables and ValueLogFileSize are those the remount target was
// measured with.
//
// Below the floor the catalog is "degraded": no write is attempted, the
// updates are kept in memory (the latest per path: an entry whose current
// record to write, or a record to delete; at most one per dataset path),
// the in-memory tree stays authoritative and callers never see an error.
// Write errors (ENOSPC, EIO, badger's) are treated the same way. A
// goroutine checks again every RetryInterval and, once there is room,
// writes what is pending in batches, each checked, and returns to "ok". A
// walk's store that could not be written is redone whole by the catch-up;
// until then the catalog on disk has no "complete" marker and a mount
// walks again.
//
// Opening badger read-write writes too (a new WAL and value log, and the
// flush of a WAL replayed after a crash), so below the floor the catalog
// opens read-only when there is one to read and otherwise not at all (the
// source is walked into memory), and the catch-up reopens it read-write.
// DB.Close flushes the current memtable into a table: below the floor
// Close leaves badger open instead (the process is about to exit); what
// was written is in the WAL, which the next open replays, and updates
// still pending are lost (the files they placed are copied again). This
// protects against our own writes; another process filling the disk while
// badger flushes or compacts can still fault, which only a floor large
// enough for that process's writes prevents.
//
// Lock order: Catalog.mu only. It guards the writer's state and is held
// across every write, so a direct write (state "ok") and the catch-up
// never interleave; while degraded, only the catch-up (the writer
// goroutine, or Close after it stopped) uses the database, taking c.mu
// for each batch, so updates arriving meanwhile wait at most one batch.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
)

const (
	// DefaultCatalogMinFree is the default state-directory floor, on top of
	// the catalog's own table bytes (see the note above).
	DefaultCatalogMinFree = 160 << 20
	// DefaultCatalogRetry is how often a degraded catalog checks for room.
	DefaultCatalogRetry = 5 * time.Second

	catalogMemTableSize = 16 << 20
	catalogNumMemtables = 2
	catalogBatchRecords = 4096
	catalogBatchBytes   = 1 << 20
)

// Catalog health, as Health reports it.
const (
	CatalogOK       = "ok"
	CatalogDegraded = "degraded"
)

// errBelowFloor is why a write was not attempted.
var errBelowFloor = errors.New("placement: state directory below its free-space floor")

// catalogOptions are the badger options of the catalog; the note above
// depends on them.
func catalogOptions(dir string, readOnly bool) badger.Options {
	return badger.DefaultOptions(dir).
		WithLogger(nil).
		WithMemTableSize(catalogMemTableSize).
		WithNumMemtables(catalogNumMemtables).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(8 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(2).
		WithCompactL0OnClose(false).
		WithSyncWrites(false).
		WithReadOnly(readOnly)
}

// catalogWriter is the state of the catalog's writes.
type catalogWriter struct {
	stateDir string
	dir      string // badger's directory
	source   string
	minFree  uint64
	statfs   func(dir string) (free, total uint64, err error)
	interval time.Duration
	stop     chan struct{}
	done     chan struct{}

	// Guarded by Catalog.mu.
	writable bool // db is open read-write; when false the catalog is degraded
	degraded bool
	pending  map[string]*Entry // path → entry whose record to write; nil: delete it
	tree     *pendingTree      // a walk's store not written yet
	blocked  error             // never write (the directory holds another source's catalog)
	tables   uint64            // bytes of the catalog's tables, for the floor
	tablesAt time.Time
}

// pendingTree is a walk's store left to the catch-up.
type pendingTree struct {
	keep      bool
	keepKnown bool // false: the catalog could not be read; decide once it opens
	entries   int
}

func statfs(dir string) (free, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

// openDB opens badger read-write when the state directory is above the
// floor; below it, read-only if there is a catalog to read, or not at all.
func (c *Catalog) openDB(o CatalogOptions) error {
	c.w = catalogWriter{
		stateDir: o.StateDir, dir: filepath.Join(o.StateDir, "catalog"), source: o.Source,
		minFree: DefaultCatalogMinFree, statfs: o.Statfs, interval: o.RetryInterval,
		pending: map[string]*Entry{},
	}
	if o.MinFree > 0 {
		c.w.minFree = uint64(o.MinFree)
	}
	if c.w.statfs == nil {
		c.w.statfs = statfs
	}
	if c.w.interval <= 0 {
		c.w.interval = DefaultCatalogRetry
	}
	// A directory costs no memory-mapped write; a full disk fails it
	// with ENOSPC, and the catalog then starts degraded.
	if err := os.MkdirAll(c.w.dir, 0o700); err != nil && !errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("placement: catalog: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	free, floor, err := c.room()
	if err == nil {
		if err := os.MkdirAll(c.w.dir, 0o700); err != nil {
			return fmt.Errorf("placement: catalog: %w", err)
		}
		db, err := badger.Open(catalogOptions(c.w.dir, false))
		if err != nil {
			return fmt.Errorf("placement: open catalog in %s: %w", c.w.dir, err)
		}
		c.db, c.w.writable = db, true
		return nil
	}
	c.degrade(free, floor, err)
	if _, err := os.Stat(filepath.Join(c.w.dir, "MANIFEST")); err != nil {
		return nil // nothing to read: the walk builds the tree
	}
	if err := lockedByOther(c.w.dir); err != nil {
		return err
	}
	db, err := badger.Open(catalogOptions(c.w.dir, true))
	if err != nil {
		// A read-only open refuses a WAL that needs replaying (after a
		// crash, or a Close below the floor).
		c.log.Warn("catalog cannot be read until the state directory has room; walking the source", zap.Error(err))
		return nil
	}
	c.db = db
	return nil
}

// lockedByOther fails if another process has the catalog open (badger
// flocks its directory): a read-only open would fail for that reason too,
// and must not be mistaken for an unreadable catalog.
func lockedByOther(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("placement: catalog: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("placement: catalog in %s is in use by another process: %w", dir, err)
	}
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

// room returns the state directory's free bytes and the floor, and
// errBelowFloor (or statfs's error) when there is no room to write. c.mu
// is held.
func (c *Catalog) room() (free, floor uint64, err error) {
	if now := time.Now(); now.Sub(c.w.tablesAt) > time.Second {
		c.w.tables, c.w.tablesAt = tableBytes(c.w.dir), now
	}
	floor = c.w.minFree + c.w.tables
	// The catalog's directory, or the nearest one that exists.
	dir := c.w.dir
	for _, serr := os.Stat(dir); serr != nil && filepath.Dir(dir) != dir; _, serr = os.Stat(dir) {
		dir = filepath.Dir(dir)
	}
	free, _, err = c.w.statfs(dir)
	if err == nil && free < floor {
		err = errBelowFloor
	}
	return free, floor, err
}

// tableBytes is the size of badger's tables in dir (compactions rewrite up
// to that much).
func tableBytes(dir string) uint64 {
	des, _ := os.ReadDir(dir)
	var n uint64
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".sst") {
			if info, err := de.Info(); err == nil {
				n += uint64(info.Size())
			}
		}
	}
	return n
}

// guarded is the one path of every catalog write: it runs write if the
// state directory is above the floor and reports whether it was written.
// When it was not (no room, or write failed) the catalog turns degraded
// and the caller keeps what it meant to write. c.mu is held.
func (c *Catalog) guarded(write func() error) bool {
	if c.w.blocked != nil {
		return false
	}
	free, floor, err := c.room()
	if err == nil {
		if err = write(); err == nil {
			return true
		}
	}
	c.degrade(free, floor, err)
	return false
}

// degrade turns the catalog degraded, logging it once. c.mu is held.
func (c *Catalog) degrade(free, floor uint64, err error) {
	if c.w.degraded {
		if !errors.Is(err, errBelowFloor) {
			c.log.Debug("catalog write failed while degraded", zap.Error(err))
		}
		return
	}
	c.w.degraded = true
	c.log.Warn("catalog degraded: updates are kept in memory until the state directory has room",
		zap.String("state_dir", c.w.stateDir), zap.Uint64("free", free), zap.Uint64("floor", floor), zap.Error(err))
}

// write records the current state of e at path p, or deletes the record
// when e is nil, now if the catalog is writable, otherwise for the
// catch-up.
func (c *Catalog) write(p string, e *Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.w.degraded && c.guarded(func() error { return c.writeOne(p, e) }) {
		return
	}
	c.w.pending[p] = e
}

func (c *Catalog) writeOne(p string, e *Entry) error {
	return c.db.Update(func(txn *badger.Txn) error {
		if e == nil {
			return txn.Delete(fileKey(p))
		}
		return txn.Set(fileKey(p), c.recordOf(e).encode(nil))
	})
}

// forget deletes the record of path p (a file removed from the source),
// now or, when the catalog cannot be written, at the catch-up.
func (c *Catalog) forget(p string) { c.write(p, nil) }

// Health reports "ok" or "degraded" (CatalogOK, CatalogDegraded) and the
// number of records waiting to be written (a walk waiting to be stored
// counts all of its entries).
func (c *Catalog) Health() (state string, pending int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	state = CatalogOK
	if c.w.degraded {
		state = CatalogDegraded
	}
	pending = len(c.w.pending)
	if c.w.tree != nil {
		pending += c.w.tree.entries
	}
	return state, pending
}

func countEntries(e *Entry) int {
	n := 1
	for _, ch := range e.Children() {
		n += countEntries(ch)
	}
	return n
}

// treeWriter writes a walk's records in checked batches. At the first
// batch that cannot be written the whole store is left to the catch-up,
// which redoes it from the start.
type treeWriter struct {
	c      *Catalog
	root   *Entry
	source string
	keep   bool
	ops    []treeOp
	bytes  int
	bad    bool
}

type treeOp struct {
	key, val []byte
	del      bool
}

// beginTree starts a store: it sets the rescan marker (keep) or drops the
// old records.
func (c *Catalog) beginTree(root *Entry, source string, keep bool) *treeWriter {
	tw := &treeWriter{c: c, root: root, source: source, keep: keep}
	tw.step(func() error {
		if !keep {
			return c.db.DropPrefix(keyFilePrefix, keyComplete)
		}
		if err := c.db.Update(func(txn *badger.Txn) error { return txn.Set(keyRescan, []byte("1")) }); err != nil {
			return err
		}
		return c.db.Sync()
	})
	return tw
}

func (tw *treeWriter) failed() bool { return tw.bad }

// step runs one write through guarded, or leaves the store to the
// catch-up.
func (tw *treeWriter) step(write func() error) bool {
	if tw.bad {
		return false
	}
	c := tw.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.w.writable || !c.guarded(write) {
		tw.deferTree()
	}
	return !tw.bad
}

// fail leaves the store to the catch-up after an error outside step.
func (tw *treeWriter) fail(err error) bool {
	c := tw.c
	c.mu.Lock()
	defer c.mu.Unlock()
	free, floor, _ := c.room()
	c.degrade(free, floor, err)
	tw.deferTree()
	return false
}

// deferTree records the store as pending. c.mu is held.
func (tw *treeWriter) deferTree() {
	tw.bad = true
	c := tw.c
	if c.w.tree == nil {
		c.w.tree = &pendingTree{entries: countEntries(tw.root)}
	}
	// Without a database the old catalog's state is unknown.
	c.w.tree.keep, c.w.tree.keepKnown = tw.keep, c.db != nil
}

func (tw *treeWriter) set(key, val []byte) bool { return tw.add(treeOp{key: key, val: val}) }
func (tw *treeWriter) del(key []byte) bool      { return tw.add(treeOp{key: key, del: true}) }

func (tw *treeWriter) add(op treeOp) bool {
	if tw.bad {
		return false
	}
	tw.ops = append(tw.ops, op)
	tw.bytes += len(op.key) + len(op.val)
	if len(tw.ops) >= catalogBatchRecords || tw.bytes >= catalogBatchBytes {
		return tw.flush()
	}
	return true
}

// flush writes the batch collected so far.
func (tw *treeWriter) flush() bool {
	ops := tw.ops
	tw.ops, tw.bytes = tw.ops[:0], 0
	if len(ops) == 0 {
		return !tw.bad
	}
	return tw.step(func() error {
		wb := tw.c.db.NewWriteBatch()
		defer wb.Cancel()
		for _, op := range ops {
			var err error
			if op.del {
				err = wb.Delete(op.key)
			} else {
				err = wb.Set(op.key, op.val)
			}
			if err != nil {
				return err
			}
		}
		return wb.Flush()
	})
}

// complete writes the "complete" marker: the store is done.
func (tw *treeWriter) complete() {
	c := tw.c
	ok := tw.flush() && tw.step(func() error {
		err := c.db.Update(func(txn *badger.Txn) error {
			if err := txn.Set(keyComplete, []byte("1")); err != nil {
				return err
			}
			return txn.Delete(keyRescan)
		})
		if err != nil {
			return err
		}
		return c.db.Sync()
	})
	if ok {
		c.mu.Lock()
		c.w.tree = nil
		c.mu.Unlock()
	}
}

// startWriter starts the goroutine that watches the floor and catches up.
func (c *Catalog) startWriter() {
	c.w.stop, c.w.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(c.w.done)
		t := time.NewTicker(c.w.interval)
		defer t.Stop()
		for {
			select {
			case <-c.w.stop:
				return
			case <-t.C:
			}
			c.mu.Lock()
			degraded := c.w.degraded
			if !degraded {
				// Report a full state directory before a write finds it.
				if free, floor, err := c.room(); err != nil {
					c.degrade(free, floor, err)
				}
			}
			c.mu.Unlock()
			if degraded {
				c.catchUp()
			}
		}
	}()
}

// catchUp writes what a degraded catalog holds once there is room, and
// returns it to "ok". Only the writer goroutine, or Close after it
// stopped, calls it.
func (c *Catalog) catchUp() {
	c.mu.Lock()
	if !c.w.degraded || c.w.blocked != nil {
		c.mu.Unlock()
		return
	}
	if !c.w.writable && !c.guarded(c.reopen) {
		c.mu.Unlock()
		return
	}
	tree := c.w.tree
	c.mu.Unlock()
	written := 0
	if tree != nil {
		c.store(c.root, c.w.source, tree.keep)
		c.mu.Lock()
		stored := c.w.tree == nil
		c.mu.Unlock()
		if !stored {
			return
		}
		written += tree.entries
	}
	for {
		c.mu.Lock()
		if len(c.w.pending) == 0 {
			if free, floor, err := c.room(); err == nil {
				c.w.degraded = false
				c.log.Info("catalog writes caught up", zap.Int("records", written),
					zap.Uint64("free", free), zap.Uint64("floor", floor))
			}
			c.mu.Unlock()
			return
		}
		snap := c.w.pending
		c.w.pending = map[string]*Entry{}
		c.mu.Unlock()
		left := c.writePending(snap)
		written += len(snap) - len(left)
		if len(left) > 0 {
			c.mu.Lock()
			for p, e := range left {
				if _, newer := c.w.pending[p]; !newer {
					c.w.pending[p] = e
				}
			}
			c.mu.Unlock()
			return
		}
	}
}

// writePending writes the updates of snap in batches, and returns those
// it could not write.
func (c *Catalog) writePending(snap map[string]*Entry) map[string]*Entry {
	paths := make([]string, 0, len(snap))
	for p := range snap {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for len(paths) > 0 {
		n := min(len(paths), catalogBatchRecords)
		batch := paths[:n]
		c.mu.Lock()
		ok := c.guarded(func() error {
			wb := c.db.NewWriteBatch()
			defer wb.Cancel()
			for _, p := range batch {
				var err error
				if e := snap[p]; e == nil {
					err = wb.Delete(fileKey(p))
				} else {
					err = wb.Set(fileKey(p), c.recordOf(e).encode(nil))
				}
				if err != nil {
					return err
				}
			}
			return wb.Flush()
		})
		c.mu.Unlock()
		if !ok {
			left := make(map[string]*Entry, len(paths))
			for _, p := range paths {
				left[p] = snap[p]
			}
			return left
		}
		paths = paths[n:]
	}
	return nil
}

// reopen replaces a read-only or missing database with a read-write one;
// guarded runs it. A store left without knowing the old catalog's state
// learns it here.
func (c *Catalog) reopen() error {
	if c.db != nil {
		if err := c.db.Close(); err != nil {
			c.log.Warn("close read-only catalog", zap.Error(err))
		}
		c.db = nil
	}
	if err := os.MkdirAll(c.w.dir, 0o700); err != nil {
		return err
	}
	db, err := badger.Open(catalogOptions(c.w.dir, false))
	if err != nil {
		return err
	}
	c.db, c.w.writable = db, true
	if t := c.w.tree; t != nil && !t.keepKnown {
		var src, complete, rescanning []byte
		if err := db.View(func(txn *badger.Txn) error {
			src = getValue(txn, keySource)
			complete = getValue(txn, keyComplete)
			rescanning = getValue(txn, keyRescan)
			return nil
		}); err != nil {
			return err
		}
		if src != nil && string(src) != c.w.source {
			c.w.blocked = fmt.Errorf("%w: %s", ErrOtherSource, src)
			c.log.Error("catalog not written: the state directory holds the catalog of another source", zap.Error(c.w.blocked))
			return c.w.blocked
		}
		t.keep, t.keepKnown = complete != nil || rescanning != nil, true
	}
	return nil
}

// Close writes what is pending if it can, then flushes and closes the
// catalog. Below the floor it leaves badger open rather than let its
// flush fault (see the note at the top).
func (c *Catalog) Close() error {
	if c.w.stop != nil {
		close(c.w.stop)
		<-c.w.done
		c.w.stop = nil
	}
	// A last catch-up: the space may be back since the last tick.
	c.catchUp()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w.degraded {
		n := len(c.w.pending)
		if c.w.tree != nil {
			n += c.w.tree.entries
		}
		if n > 0 {
			c.log.Warn("catalog closed with updates not written: the next mount walks the source again if the walk was not stored, and copies again the files placed since",
				zap.Int("pending", n))
		}
	}
	db := c.db
	if db == nil {
		return nil
	}
	c.db = nil
	if c.w.writable {
		if free, floor, err := c.room(); err != nil {
			c.log.Warn("catalog left open: the state directory is below its floor and closing would write a table; the next mount replays its write-ahead log",
				zap.Uint64("free", free), zap.Uint64("floor", floor), zap.Error(err))
			return nil
		}
		if err := db.Sync(); err != nil {
			db.Close()
			return fmt.Errorf("placement: catalog sync: %w", err)
		}
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("placement: catalog close: %w", err)
	}
	return nil
}
