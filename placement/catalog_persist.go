package placement

// Persisting the catalog: a walk's tree (store) and single entries
// (persist), both through the guarded writer (catalog_writer.go).

import (
	badger "github.com/dgraph-io/badger/v4"
)

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
