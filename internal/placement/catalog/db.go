package catalog

// The catalog's database: opening it (read-write above the state
// directory's floor, read-only or not at all below it), reopening it
// read-write once there is room, and closing it (writer.go says
// why each step is where it is).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"go.uber.org/zap"
)

// catalogOptions are the badger options of the catalog; the note at the
// top of writer.go depends on them.
func catalogOptions(dir string, readOnly bool) badger.Options {
	return badger.DefaultOptions(dir).
		WithLogger(nil).
		WithMemTableSize(catalogMemTableSize).
		WithNumMemtables(catalogNumMemtables).
		WithBlockCacheSize(2 << 20).
		WithIndexCacheSize(2 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(2).
		// Small tables, not compressed: a table builder's memory (the
		// table and, compressed, its blocks again) goes back to badger's
		// pool of allocators, which keeps up to 8 of them and frees one
		// every 2 s. The tables of the bottom level (where a walk's
		// stream writes, and the deepest compactions) are BaseTableSize ×
		// 2^5: 2 MiB instead of 64 MiB, whose builders held 384 MB of
		// the daemon's heap for ~16 s after a stream of 1,000,000 records
		// (compressed 2 MiB tables: 46 MB; uncompressed: none to speak
		// of). The catalog on disk is then about 5 times larger (71 MiB
		// for 1,000,000 files of 20-byte paths, against 14).
		WithBaseTableSize(catalogBaseTableSize).
		WithCompression(options.None).
		WithCompactL0OnClose(false).
		WithSyncWrites(false).
		WithReadOnly(readOnly).
		// One daemon per state directory: its lock (internal/mounts/lock.go)
		// guards the catalog. badger's own lock of the directory would
		// outlive a daemon killed while its source hangs (its exit
		// stuck closing a source file) and refuse the next mount.
		WithBypassLockGuard(true)
}

// openDB opens badger read-write when the state directory is above the
// floor; below it, read-only if there is a catalog to read, or not at all.
func (c *Catalog) openDB(o Options) error {
	c.w = catalogWriter{
		stateDir: o.StateDir, dir: filepath.Join(o.StateDir, "catalog"), source: o.Source,
		minFree: DefaultCatalogMinFree, statfs: o.Statfs, interval: o.RetryInterval,
		pending: map[string]*Entry{}, kick: make(chan struct{}, 1), syncs: make(chan chan error),
	}
	if o.MinFree > 0 {
		c.w.minFree = uint64(o.MinFree)
	}
	if c.w.streamChunk = o.streamChunk; c.w.streamChunk == 0 {
		c.w.streamChunk = streamChunkSize
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
		return fmt.Errorf("catalog: %w", err)
	}
	c.mapDir = mappedDir(c.w.dir)
	c.mu.Lock()
	defer c.mu.Unlock()
	free, floor, err := c.room()
	if err == nil {
		if err := os.MkdirAll(c.w.dir, 0o700); err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
		c.removeEmptyLogs()
		db, err := badger.Open(catalogOptions(c.w.dir, false))
		if err != nil {
			return fmt.Errorf("catalog: open %s: %w", c.w.dir, err)
		}
		c.db, c.w.writable = db, true
		return nil
	}
	c.degrade(free, floor, err)
	if _, err := os.Stat(filepath.Join(c.w.dir, "MANIFEST")); err != nil {
		return nil // nothing to read: the walk builds the tree
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

// removeEmptyLogs removes the empty write-ahead and value logs (*.mem,
// *.vlog of 0 bytes) of the catalog's directory before badger opens it
// read-write. A daemon killed between creating such a file and writing its
// header leaves one, and badger refuses to open a directory that has one
// ("while opening fid: N err: Create a new file", dgraph-io/badger#2207);
// the file holds nothing, so removing it loses nothing.
func (c *Catalog) removeEmptyLogs() {
	ents, err := os.ReadDir(c.w.dir)
	if err != nil {
		return
	}
	for _, de := range ents {
		name := de.Name()
		if !de.Type().IsRegular() || !strings.HasSuffix(name, ".mem") && !strings.HasSuffix(name, ".vlog") {
			continue
		}
		if fi, err := de.Info(); err != nil || fi.Size() != 0 {
			continue
		}
		if err := os.Remove(filepath.Join(c.w.dir, name)); err != nil {
			c.log.Warn("cannot remove an empty catalog log a crash left", zap.String("file", name), zap.Error(err))
			continue
		}
		c.log.Info("removed an empty catalog log a crash left", zap.String("file", name))
	}
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
	c.removeEmptyLogs()
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
	c.stopWalk() // before the writer: a walk that ends starts it
	if c.w.stop != nil {
		close(c.w.stop)
		<-c.w.done
		c.w.stop = nil
	}
	// A last catch-up: the space may be back since the last tick; then
	// what is pending.
	c.catchUp()
	c.flush()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w.degraded {
		n := c.pendingCount()
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
			return fmt.Errorf("catalog: sync: %w", err)
		}
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("catalog: close: %w", err)
	}
	return nil
}
