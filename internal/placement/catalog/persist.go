package catalog

// Persisting the catalog: a walk's tree (store) and single entries
// (persist), both through the guarded writer (writer.go), a first walk's
// tree as one stream when it can (stream.go).

import (
	badger "github.com/dgraph-io/badger/v4"
)

// store replaces the persisted tree with root. With keep (the records may
// name tier copies) the old records are overwritten and then the ones root
// no longer has are deleted, under the rescan marker, so that a crash at
// any point leaves every copy recorded by an old or a new record; without,
// the tree is written as one stream into the emptied store (stream.go), or
// when that cannot be done the records are dropped first and written in
// batches. The batches go through the catalog's
// guarded writes (writer.go): when the state directory has no room
// the store is left, whole, to the catch-up, and until it is done the
// catalog on disk is incomplete (the next mount walks again).
func (c *Catalog) store(root *Entry, source string, keep bool) {
	if !keep && c.streamStore(root, source) {
		return // stream.go
	}
	tw := c.beginTree(root, source, keep)
	var put func(e *Entry)
	put = func(e *Entry) {
		if tw.failed() || !tw.set(fileKey(e.Path()), c.recordOf(e).encode(nil)) {
			return
		}
		for ch := range e.Children().All() {
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
	r := sourceRecord(e)
	r.Checked = e.Checked()
	if t := e.Tier(); t >= 0 && t < len(c.tiers) {
		r.Tier = c.tiers[t]
	}
	return &r
}

// sourceRecord is what the source said of e, as a record.
func sourceRecord(e *Entry) record {
	a := e.Attr()
	r := record{Kind: e.Kind(), Mode: a.Mode, UID: a.UID, GID: a.GID, Size: a.Size, Mtime: a.Mtime, Target: e.Target(),
		Nlink: a.Nlink, Blocks: a.Blocks, Atime: a.Atime, Ctime: a.Ctime}
	if k := e.link(); k != nil && a.Nlink != 0 {
		r.Dev, r.Ino = k.dev, k.ino
	}
	return r
}

// Persist writes e's current record, or keeps it for the catch-up when
// the catalog cannot be written now (writer.go); it does not fail.
func (c *Catalog) Persist(e *Entry) error {
	c.write(e.Path(), e)
	return nil
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

// PersistAll writes the current records of es in batches, through the
// guarded writer (writer.go): what it cannot write now waits for
// the catch-up.
func (c *Catalog) PersistAll(es []*Entry) {
	snap := make(map[string]*Entry, len(es))
	for _, e := range es {
		if !e.Gone() { // (its record is deleted: write)
			snap[e.Path()] = e
		}
	}
	c.mu.Lock()
	degraded := c.w.degraded
	c.mu.Unlock()
	left := snap
	if !degraded {
		left = c.writePending(snap)
	}
	if len(left) == 0 {
		return
	}
	c.mu.Lock()
	for p, e := range left {
		if _, newer := c.w.pending[p]; !newer {
			c.w.pending[p] = e
		}
	}
	c.mu.Unlock()
}

// AddBytes adds n (a changed file's new size less its old) to the dataset's
// bytes.
func (c *Catalog) AddBytes(n int64) { c.bytes.Add(n) }
