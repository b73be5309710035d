package catalog

// Storing a walk's tree with badger's StreamWriter.
//
// A first walk (or any walk that replaces the records whole) stores a
// record an entry into a store it empties first. Written in batches, the
// records go through badger's write path: the write-ahead log, a memtable,
// its flush to level 0, and compactions from there to the bottom level,
// which go on for seconds after the store returned; for 1,000,000 files
// that path allocated 585 MB and left the daemon holding the compactions'
// buffers until it had been quiet for half a minute. The StreamWriter
// builds the bottom level's tables directly from keys in order: no log,
// no memtable, no compaction after. The keys are the entries' paths,
// written in the store's byte order (streamOrder); the "complete" marker
// is written after the stream's Flush, with an ordinary transaction, so
// that it is never on disk before every table is. When the stream cannot
// run (a rescan keeps the old records; the writer runs; the state
// directory is below its floor) or fails midway, the store falls back to
// the batches (persist.go), whose first step drops what a stream wrote.

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/ristretto/v2/z"
	"go.uber.org/zap"
)

// streamChunkSize is how many bytes of records a stream hands badger at a
// time, and how often it checks the state directory's room (the floor
// leaves 160 MiB for what is written between two checks).
const streamChunkSize = 4 << 20

// errStreamOrder stops a stream whose next key would not follow the last
// one (streamOrder is the store's order; this is the check of it).
var errStreamOrder = errors.New("catalog: a record out of the store's order")

// errStreamRoom stops a stream whose state directory fell below its
// floor.
var errStreamRoom = errors.New("catalog: the state directory fell below its floor during the store")

// streamStore stores root (a tree whose records replace the old ones
// whole) with a StreamWriter and writes the "complete" marker, and reports
// whether it did. When it did not, the store is left to the batches; the
// error is logged. It holds c.mu only to look at the room, so that the
// status is not held up by a store of millions of records; nothing else
// writes meanwhile (the writer has not started, and a guarded write that
// comes anyway is refused by the emptied store and kept for the
// catch-up).
func (c *Catalog) streamStore(root *Entry, source string) bool {
	c.mu.Lock()
	ok := c.db != nil && c.w.streamChunk > 0 && c.w.writable && c.w.blocked == nil && !c.w.started.Load()
	c.mu.Unlock()
	if !ok || c.roomNow() != nil {
		return false // the batches degrade and log it
	}
	err := c.stream(root, source)
	if err == nil {
		// Written last, with every table on disk: a crash before leaves a
		// catalog the next mount walks again.
		err = c.db.Update(func(txn *badger.Txn) error { return txn.Set(keyComplete, []byte("1")) })
	}
	if err == nil {
		err = c.db.Sync()
	}
	if err != nil {
		c.log.Warn("catalog: the walk's store as one stream failed; storing it in batches", zap.Error(err))
		return false
	}
	return true
}

// roomNow is room's verdict: nil when the state directory is above its
// floor.
func (c *Catalog) roomNow() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _, err := c.room()
	return err
}

// stream writes root's records and the source's path into the emptied
// store.
func (c *Catalog) stream(root *Entry, source string) (err error) {
	sw := c.db.NewStreamWriter()
	if err := sw.Prepare(); err != nil {
		sw.Cancel()
		return fmt.Errorf("prepare: %w", err)
	}
	chunk := c.w.streamChunk
	buf := z.NewBuffer(chunk+chunk/4, "catalog.stream")
	defer buf.Release()
	var last []byte
	put := func(key, val []byte) error {
		// badger's stream panics, in a goroutine of its own, on a key
		// out of order: a tree that would not stream in order falls back
		// to the batches instead.
		if last != nil && bytes.Compare(key, last) <= 0 {
			return fmt.Errorf("%w: %q after %q", errStreamOrder, key, last)
		}
		last = append(last[:0], key...)
		badger.KVToBuffer(&pb.KV{Key: key, Value: val, Version: 1}, buf)
		if buf.LenNoPadding() < chunk {
			return nil
		}
		if err := sw.Write(buf); err != nil {
			return err
		}
		buf.Reset()
		if err := c.roomNow(); err != nil {
			return fmt.Errorf("%w: %w", errStreamRoom, err)
		}
		return nil
	}
	var key, val []byte
	for e := range streamOrder(root) {
		key = append(append(key[:0], keyFilePrefix...), e.Path()...)
		val = c.recordOf(e).encode(val[:0])
		if err = put(key, val); err != nil {
			break
		}
	}
	if err == nil {
		err = put(keySource, []byte(source))
	}
	if err == nil && buf.LenNoPadding() > 0 {
		err = sw.Write(buf)
	}
	if err != nil {
		sw.Cancel()
		return err
	}
	if err := sw.Flush(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

// streamOrder yields the entries of the tree below root, root first, in
// the byte order of their keys (the store's order). A directory's path is
// the prefix of its entries' paths followed by '/', which sorts before
// some names that follow the directory's own ('.', '-', ' '): so a
// directory's entries come where its name with a '/' after it sorts among
// its siblings, not right after it.
func streamOrder(root *Entry) func(yield func(*Entry) bool) {
	return func(yield func(*Entry) bool) {
		if yield(root) {
			streamBelow(root, yield)
		}
	}
}

// streamItem is one place in a directory's key order: an entry's own
// record, or (below) the records of a directory's entries.
type streamItem struct {
	e     *Entry
	name  string // e's, made once for the sort (storedpath.go)
	below bool
}

func (it streamItem) cmp(o streamItem) int {
	a, b := it.name, o.name
	n := min(len(a), len(b))
	if c := cmp.Compare(a[:n], b[:n]); c != 0 {
		return c
	}
	// One name is a prefix of the other, or they are equal: compare the
	// next bytes, a '/' standing after a directory's name for "below".
	next := func(s string, below bool) int {
		switch {
		case n < len(s):
			return int(s[n])
		case below:
			return '/'
		}
		return -1 // the name ends here
	}
	return cmp.Compare(next(a, it.below), next(b, o.below))
}

// streamBelow yields the entries below directory d in key order, and
// reports whether to go on.
func streamBelow(d *Entry, yield func(*Entry) bool) bool {
	kids := d.Children()
	items := make([]streamItem, 0, kids.Len())
	for k := range kids.All() {
		name := k.Name()
		items = append(items, streamItem{e: k, name: name})
		if k.Kind() == KindDir {
			items = append(items, streamItem{e: k, name: name, below: true})
		}
	}
	slices.SortStableFunc(items, streamItem.cmp)
	for _, it := range items {
		if it.below {
			if !streamBelow(it.e, yield) {
				return false
			}
		} else if !yield(it.e) {
			return false
		}
	}
	return true
}
