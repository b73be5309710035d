package catalog

// Loading a stored catalog: the tree of a complete one (load), or only the
// copies its records name (loadCopies, before a rescan's walk keeps those
// still up to date: carryOver).

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	badger "github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
)

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

// eachRecord calls fn with the path and the decoded record of every stored
// entry, in path order; a record that does not decode fails the walk. The
// paths are stored in shared blocks (arena.go, storedpath.go).
func (c *Catalog) eachRecord(fn func(p *byte, rec record) error) error {
	return c.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = keyFilePrefix
		opts.PrefetchSize = 1000
		it := txn.NewIterator(opts)
		defer it.Close()
		var paths pathArena
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			p := paths.bytes(item.Key()[len(keyFilePrefix):])
			var rec record
			err := item.Value(func(v []byte) error {
				var derr error
				rec, derr = decodeRecord(v)
				return derr
			})
			if err != nil {
				return fmt.Errorf("catalog: entry %q: %w", storedString(p), err)
			}
			if err := fn(p, rec); err != nil {
				return err
			}
		}
		return nil
	})
}

// load reads every record into a tree.
func (c *Catalog) load() (*Entry, error) {
	dirs := map[string]*Entry{}
	kids := map[*Entry][]*Entry{}
	var root *Entry
	var orphans []string
	var slab entrySlab
	err := c.eachRecord(func(sp *byte, rec record) error {
		e := slab.alloc()
		c.fillEntry(e, sp, &rec)
		p := e.Path()
		if p == "" {
			if e.Kind() != KindDir {
				return fmt.Errorf("%w: root is not a directory", ErrBadRecord)
			}
			root = e
			dirs[""] = e
			return nil
		}
		parentPath := path.Dir(p)
		if parentPath == "." {
			parentPath = ""
		}
		parent := dirs[parentPath]
		if parent == nil {
			// The record of an entry whose directory was removed (or
			// replaced by a file or a symlink), written again by a crash's
			// timing: the source no longer has it under this path.
			orphans = append(orphans, p)
			if rec.Kind == KindFile && rec.Tier != "" {
				c.stale = append(c.stale, StaleCopy{Tier: rec.Tier, Path: p, Size: rec.Size})
			}
			return nil
		}
		kids[parent] = append(kids[parent], e)
		if e.Kind() == KindDir {
			dirs[p] = e
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if root == nil {
		return nil, fmt.Errorf("%w: no root", ErrBadRecord)
	}
	if len(orphans) > 0 {
		c.dropOrphans(orphans)
	}
	for _, d := range dirs {
		d.setChildren(ptrKids(kids[d]))
	}
	return root, nil
}

// dropOrphans deletes the records of entries whose directory the catalog
// does not have: they are not part of the dataset (a refresh adds them
// back if the source has them); a copy one names is stale (Stale: the
// placer removes it).
func (c *Catalog) dropOrphans(paths []string) {
	c.log.Warn("catalog: dropping records whose directory the catalog does not have",
		zap.Int("records", len(paths)), zap.String("first", paths[0]))
	err := c.db.Update(func(txn *badger.Txn) error {
		for _, p := range paths {
			if err := txn.Delete(fileKey(p)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		// Skipped again at the next load.
		c.log.Warn("catalog: cannot delete the records", zap.Error(err))
	}
}

func (c *Catalog) newEntry(p string, rec record) *Entry {
	e := new(Entry)
	c.fillEntry(e, storePath(make([]byte, storedLen(p)), p), &rec)
	return e
}

// fillEntry makes e, a zeroed entry, the entry of the record rec of the
// path p (stored: storedpath.go).
func (c *Catalog) fillEntry(e *Entry, p *byte, rec *record) {
	e.setKind(rec.Kind)
	e.setStored(p)
	e.setTarget(rec.Target)
	e.initAttr(Attr{Size: rec.Size, Mtime: rec.Mtime, Mode: rec.Mode, UID: rec.UID, GID: rec.GID,
		Nlink: rec.Nlink, Blocks: rec.Blocks, Atime: rec.Atime, Ctime: rec.Ctime})
	if rec.Kind == KindFile && rec.Nlink > 1 && (rec.Dev != 0 || rec.Ino != 0) {
		e.setLink(&linkKey{dev: rec.Dev, ino: rec.Ino, size: rec.Size, mtime: rec.Mtime})
	}
	e.checked.Store(checkedBits(rec.Checked))
	if rec.Tier != "" {
		for i, t := range c.tiers {
			if t == rec.Tier {
				e.SetTier(i)
			}
		}
	}
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
	err := c.eachRecord(func(p *byte, rec record) error {
		if rec.Kind != KindFile || rec.Tier == "" {
			return nil
		}
		for i, t := range c.tiers {
			if t == rec.Tier {
				out = append(out, copyRecord{path: storedString(p), size: rec.Size, mtime: rec.Mtime, tier: i})
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
		if n != nil && n.Kind() == KindFile && n.Attr().Size == o.size && n.Attr().Mtime == o.mtime {
			n.SetTier(o.tier)
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

// StoredTier is the tier the stored record of p names ("" for none): what
// a remount would find, whatever the tree in memory says.
func (c *Catalog) StoredTier(p string) (string, error) {
	var rec record
	err := c.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(fileKey(p))
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error {
			rec, err = decodeRecord(v)
			return err
		})
	})
	if err != nil {
		return "", fmt.Errorf("catalog: stored record of %s: %w", p, err)
	}
	return rec.Tier, nil
}

// readStored reads directory d's entries from the stored records, in name
// order (a background load: bgwalk.go). The records below d are one range
// of keys: d's own entries are read, a subdirectory's range is skipped
// with a seek, and a record whose parent d does not have as a directory
// (a file, or no entry at all) is an orphan, returned for dropOrphans
// with the stale copy it names.
func (c *Catalog) readStored(ctx context.Context, d *Entry) (kids Kids, orphans []string, stale []StaleCopy, err error) {
	prefix := keyFilePrefix
	if d.Path() != "" {
		prefix = append(fileKey(d.Path()), '/')
	}
	err = c.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		// The records are read first, into scratch space the loads share,
		// and their entries made after, in one block of their number
		// (slab.go).
		var paths pathArena
		sc := loadScratch.Get().(*scratch)
		defer sc.put()
		var dirs []string // the names of the directories among them, sorted
		n := 0
		for it.Rewind(); it.Valid(); n++ {
			if n%1024 == 1023 && ctx.Err() != nil {
				return ctx.Err()
			}
			key := it.Item().Key()
			rest := key[len(prefix):]
			if len(rest) == 0 {
				it.Next() // the root's own record
				continue
			}
			p := key[len(keyFilePrefix):]
			if slash := bytes.IndexByte(rest, '/'); slash >= 0 {
				name := string(rest[:slash])
				if _, ok := slices.BinarySearch(dirs, name); ok {
					// Below a subdirectory: its own read takes it.
					// '0' follows '/': the first key past the range.
					it.Seek(append(append(slices.Clip(prefix), rest[:slash]...), '0'))
					continue
				}
				orphans = append(orphans, string(p))
				if rec, derr := c.decodeItem(it.Item()); derr == nil && rec.Kind == KindFile && rec.Tier != "" {
					stale = append(stale, StaleCopy{Tier: rec.Tier, Path: string(p), Size: rec.Size})
				}
				it.Next()
				continue
			}
			rec, derr := c.decodeItem(it.Item())
			if derr != nil {
				return fmt.Errorf("catalog: entry %q: %w", p, derr)
			}
			sp := paths.bytes(p)
			sc.paths, sc.recs = append(sc.paths, sp), append(sc.recs, rec)
			if rec.Kind == KindDir {
				dirs = append(dirs, string(rest))
			}
			it.Next()
		}
		slab := sizedSlab(len(sc.recs))
		for i := range sc.recs {
			c.fillEntry(slab.alloc(), sc.paths[i], &sc.recs[i])
		}
		kids = blockKids(slab.block())
		compactPaths(kids)
		return nil
	})
	return kids, orphans, stale, err
}

// scratch is where a load of a directory reads its records before it
// makes their entries: one a worker, reused, so that the records are not
// copied as a slice of them grows.
type scratch struct {
	paths []*byte
	recs  []record
}

var loadScratch = sync.Pool{New: func() any { return new(scratch) }}

// put empties s and gives it back to the pool; the space of a directory of
// more than 64 Ki entries is left to the collector.
func (s *scratch) put() {
	if cap(s.recs) > 64<<10 {
		return
	}
	clear(s.paths)
	clear(s.recs)
	s.paths, s.recs = s.paths[:0], s.recs[:0]
	loadScratch.Put(s)
}

func (c *Catalog) decodeItem(item *badger.Item) (rec record, err error) {
	err = item.Value(func(v []byte) error {
		var derr error
		rec, derr = decodeRecord(v)
		return derr
	})
	return rec, err
}
