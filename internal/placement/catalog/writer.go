package catalog

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
//     (16 MiB, sparse), and every committed entry is copied into the map
//     (memtable.go writeEntry). Pages are allocated as entries are written;
//     a memtable is rotated once it holds MemTableSize (8 MiB), so at most
//     8 MiB + one batch is ever touched per file. A new one is made at
//     every open and rotation (its 20-byte header touches one page).
//   - SST tables (NNNNNN.sst): table.CreateTable truncates the file to the
//     built size and copies the whole table into a map. A memtable flush
//     (in the background once a memtable is full, and in DB.Close for the
//     current one) writes one table no bigger than the memtable's data
//     (entries, not compressed, plus index and bloom filter);
//     compactions write tables whose total is at most the total of their
//     input tables, and concurrent compactions have disjoint inputs, so
//     all compactions in flight write at most the catalog's table bytes
//     before their inputs are deleted. DropPrefix (a walk's store in
//     batches) is a memtable flush plus such compactions. A walk's store
//     as a stream (stream.go) writes the bottom level's tables directly
//     from the records it is handed, streamChunkSize (4 MiB) at a time,
//     each table at most BaseTableSize × 2^5 (2 MiB).
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
// and up to NumMemtables queued (db.flushChan), 4 × 8 MiB = 32 MiB; the
// compactions those tables and earlier ones trigger, at most the table
// bytes (the second term, which therefore grows with the catalog: about
// 50 bytes plus the path a record, 71 MiB for a million files of 20-byte
// paths, measured) plus the new L0 tables again (32 MiB); DISCARD (1 MiB)
// and one page each for the headers of a new WAL and value log.
// 1 + 32 + 32 + 1 + ε ≈ 66 MiB fits under 160 MiB. A stream's check
// comes every 4 MiB of records: those records' tables and the table in
// flight before them, well under that. The bound is loose: tables are
// under the WAL bytes they hold (prefix-compressed keys), a flush frees
// its WAL's pages and a compaction its inputs. MemTableSize,
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
// Batching. An update (persist, forget) is not written by its caller: it
// joins the pending updates (the latest per path) and the writer goroutine
// writes them in batches, group commit style: the updates that arrive
// while a batch is written make the next one, so an idle catalog writes an
// update at once and a busy one (a warmup installing thousands of copies a
// second) writes a batch per floor check and badger transaction instead of
// one per copy, and the placer's workers never wait for a write. A batch
// takes the entries' state when it is built, and the placer records a copy
// (sets its entry's tier) only after installing it, so a copy is never
// recorded before it is installed. Close writes what is left. A crash
// loses the updates not yet written (badger's unsynced writes were always
// lost that way): their files are copied again at the next mount.
//
// Lock order: Catalog.mu, then Catalog.pendMu. c.mu guards the writer's
// state and is held across every write, so the writes of the writer
// goroutine and of a walk's store in batches never interleave; a store as
// a stream runs before the writer starts and holds c.mu only for its
// checks of the floor. pendMu guards only the
// pending updates and is never held across a write: an update is queued
// while a batch is being written.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
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

	catalogMemTableSize  = 8 << 20
	catalogNumMemtables  = 2
	catalogBaseTableSize = 64 << 10
	catalogBatchRecords  = 4096
	catalogBatchBytes    = 1 << 20
)

// Catalog health, as Health reports it.
const (
	HealthOK       = "ok"
	HealthDegraded = "degraded"
)

// errBelowFloor is why a write was not attempted.
var errBelowFloor = errors.New("catalog: state directory below its free-space floor")

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
	kick     chan struct{}   // an update is pending (buffered, one slot)
	syncs    chan chan error // Sync's requests: write everything pending now
	started  atomic.Bool     // the writer runs (after the first walk's store)
	batches  atomic.Int64    // batches of updates written
	held     atomic.Int64    // batches held back for catalogBatchGap (a busy catalog)
	// streamChunk is the bytes of records a walk's store as a stream
	// hands badger at a time (stream.go); -1 stores in batches.
	streamChunk int

	// Guarded by Catalog.mu.
	writable bool // db is open read-write; when false the catalog is degraded
	degraded bool
	pending  map[string]*Entry // path → entry whose record to write; nil: delete it (guarded by pendMu)
	inflight int               // updates taken from pending and being written (guarded by pendMu)
	sync     func() error      // makes the copies installed so far durable (setSync)
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
// when e is nil: the writer goroutine writes it with the next batch, or
// the catch-up when the catalog cannot be written now.
func (c *Catalog) write(p string, e *Entry) {
	c.pendMu.Lock()
	if e != nil && e.Gone() {
		// Removed: its record is deleted (forget), never written again
		// by a late update (a copy that finished after the removal).
		// Remove marks an entry gone before it forgets it, and both
		// take pendMu, so the deletion is always the last word.
		c.pendMu.Unlock()
		return
	}
	c.w.pending[p] = e
	c.pendMu.Unlock()
	select {
	case c.w.kick <- struct{}{}:
	default: // a batch is due already
	}
}

// setSync installs fn, which makes every copy installed so far durable,
// to run before each batch of updates is written: a record never names a
// copy that a crash could lose (tier.Tier.Sync). A failing fn fails the
// batch, as a failed write does.
func (c *Catalog) SetSync(fn func() error) {
	c.mu.Lock()
	c.w.sync = fn
	c.mu.Unlock()
}

// forget deletes the record of path p (a file removed from the source),
// with the next batch or at the catch-up.
func (c *Catalog) forget(p string) { c.write(p, nil) }

// Health reports "ok" or "degraded" (HealthOK, HealthDegraded) and the
// number of records waiting to be written (a walk waiting to be stored
// counts all of its entries).
func (c *Catalog) Health() (state string, pending int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	state = HealthOK
	if c.w.degraded {
		state = HealthDegraded
	}
	pending = c.pendingCount()
	if c.w.tree != nil {
		pending += c.w.tree.entries
	}
	return state, pending
}

func countEntries(e *Entry) int {
	n := 1
	for ch := range e.Children().All() {
		n += countEntries(ch)
	}
	return n
}

// catalogBatchGap is the least time between the starts of two batches
// written for updates (the periodic catch-up aside): a busy catalog (a
// placer installing thousands of copies a second) writes one batch, and
// syncs the tiers' file systems once, per gap instead of back to back,
// while an update to an idle catalog is still written at once. A crash
// loses at most the gap's updates more (their files are copied again).
const catalogBatchGap = 250 * time.Millisecond

// startWriter starts the goroutine that writes the pending updates,
// watches the floor and catches up.
func (c *Catalog) startWriter() {
	c.w.stop, c.w.done = make(chan struct{}), make(chan struct{})
	c.w.started.Store(true)
	go func() {
		defer close(c.w.done)
		t := time.NewTicker(c.w.interval)
		defer t.Stop()
		// last is the start of the last batch written: none yet, so an
		// update to a catalog whose writer has only just started is not
		// held back for a gap nothing began.
		var last time.Time
		start, before := time.Now(), c.w.batches.Load()
		c.flush() // updates made before the writer started
		if c.w.batches.Load() != before {
			last = start
		}
		for {
			select {
			case <-c.w.stop:
				return
			case reply := <-c.w.syncs:
				last = time.Now()
				c.flush()
				reply <- c.synced()
				continue
			case <-c.w.kick:
				if wait := catalogBatchGap - time.Since(last); wait > 0 {
					c.w.held.Add(1)
					select {
					case <-c.w.stop:
						return // Close writes what is left
					case <-time.After(wait):
					}
				}
				last = time.Now()
				c.flush()
				continue
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
			} else {
				c.flush()
			}
		}
	}()
}

// Sync writes every update made before it was called, now rather than
// at the writer's next batch: what a caller reports done (a refresh's
// additions and removals) must survive a crash of the daemon after it.
// It fails when the catalog cannot write (degraded: the updates wait for
// room) or ctx ends first.
func (c *Catalog) Sync(ctx context.Context) error {
	if !c.w.started.Load() {
		return nil // a walk still stores the tree: nothing is written before it
	}
	reply := make(chan error, 1)
	select {
	case c.w.syncs <- reply:
	case <-c.w.done:
		return errors.New("catalog: closed")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// synced is Sync's answer once the writer flushed.
func (c *Catalog) synced() error {
	if n := c.pendingCount(); n > 0 {
		state, _ := c.Health()
		return fmt.Errorf("catalog: %d updates not written (%s): they are written once the state directory has room", n, state)
	}
	return nil
}

// flush writes the pending updates in checked batches until none is left;
// a batch that cannot be written turns the catalog degraded, and what is
// left waits for the catch-up. Only the writer goroutine, or Close after
// it stopped, calls it.
func (c *Catalog) flush() {
	for {
		c.mu.Lock()
		stop := c.w.degraded || !c.w.writable || c.w.blocked != nil
		c.mu.Unlock()
		if stop {
			return
		}
		if n, all := c.writeSome(); n == 0 || !all {
			return
		}
	}
}

// writeSome takes the pending updates and writes them; what it could not
// write is pending again (unless a newer update of the same path arrived
// meanwhile). Until then the taken updates count as pending (Health).
func (c *Catalog) writeSome() (written int, all bool) {
	c.pendMu.Lock()
	snap := c.w.pending
	if len(snap) == 0 {
		c.pendMu.Unlock()
		return 0, true
	}
	c.w.pending = make(map[string]*Entry, len(snap))
	c.w.inflight = len(snap)
	c.pendMu.Unlock()
	left := c.writePending(snap)
	c.pendMu.Lock()
	for p, e := range left {
		if _, newer := c.w.pending[p]; !newer {
			c.w.pending[p] = e
		}
	}
	c.w.inflight = 0
	c.pendMu.Unlock()
	return len(snap) - len(left), len(left) == 0
}

// pendingCount is the number of updates not yet written.
func (c *Catalog) pendingCount() int {
	c.pendMu.Lock()
	defer c.pendMu.Unlock()
	return len(c.w.pending) + c.w.inflight
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
		if c.pendingCount() == 0 {
			if free, floor, err := c.room(); err == nil {
				c.w.degraded = false
				c.log.Info("catalog writes caught up", zap.Int("records", written),
					zap.Uint64("free", free), zap.Uint64("floor", floor))
			}
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		n, all := c.writeSome()
		written += n
		if !all {
			return
		}
	}
}

// writePending writes the updates of snap in batches of at most
// catalogBatchRecords records and catalogBatchBytes bytes, one badger
// transaction each after a check of the floor, and returns those it could
// not write. (A transaction, not a badger WriteBatch: a write to a broken
// database then fails rather than waits.)
func (c *Catalog) writePending(snap map[string]*Entry) map[string]*Entry {
	paths := make([]string, 0, len(snap))
	for p := range snap {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for len(paths) > 0 {
		c.mu.Lock()
		n := 0
		ok := c.guarded(func() error {
			// The copies these records name must be durable first.
			if c.w.sync != nil {
				if err := c.w.sync(); err != nil {
					return err
				}
			}
			return c.db.Update(func(txn *badger.Txn) error {
				bytes := 0
				for n < len(paths) && n < catalogBatchRecords && bytes < catalogBatchBytes {
					p := paths[n]
					key := fileKey(p)
					var err error
					if e := snap[p]; e == nil {
						err = txn.Delete(key)
						bytes += len(key)
					} else {
						val := c.recordOf(e).encode(nil)
						err = txn.Set(key, val)
						bytes += len(key) + len(val)
					}
					if err != nil {
						return err
					}
					n++
				}
				return nil
			})
		})
		c.mu.Unlock()
		if !ok {
			left := make(map[string]*Entry, len(paths))
			for _, p := range paths {
				left[p] = snap[p]
			}
			return left
		}
		c.w.batches.Add(1)
		paths = paths[n:]
	}
	return nil
}
