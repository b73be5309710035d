package catalog

// The catalog as one document, for nodes that share it (the cluster's
// shared catalog: the first node to mount walks the source and publishes
// the document; the others build their tree from it instead of walking).
// The document is the walked tree, pre-order (a directory before its
// children, children by name), each entry as uvarint len + path, uvarint
// len + its record (record.go; no tier: copies are each node's own), after
// the magic "EPT1". Nothing in it is trusted: decodeTree checks every
// record and that every entry's parent came before it.

import (
	"context"
	"encoding/binary"
	"fmt"
	"path"
)

const treeMagic = "EPT1"

// SharedWalk, as Options.Shared, stands in for the walk of the
// source: it returns the tree's document, calling walk (which walks the
// source and encodes the tree) when it has none to give; walked reports
// that it called walk.
type SharedWalk func(ctx context.Context, walk func(context.Context) ([]byte, error)) (doc []byte, walked bool, err error)

// encodeTree is root's tree as a document.
func encodeTree(root *Entry) []byte {
	var b []byte
	b = append(b, treeMagic...)
	var rb []byte
	root.Walk(func(e *Entry) bool {
		r := sourceRecord(e)
		rb = r.encode(rb[:0])
		b = binary.AppendUvarint(b, uint64(len(e.Path())))
		b = append(b, e.Path()...)
		b = binary.AppendUvarint(b, uint64(len(rb)))
		b = append(b, rb...)
		return true
	})
	return b
}

// decodeTree builds the tree of a document.
func (c *Catalog) decodeTree(doc []byte) (*Entry, error) {
	if len(doc) < len(treeMagic) || string(doc[:len(treeMagic)]) != treeMagic {
		return nil, fmt.Errorf("%w: shared catalog: no magic", ErrBadRecord)
	}
	b := doc[len(treeMagic):]
	next := func() ([]byte, bool) {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, false
		}
		v := b[n : n+int(l)]
		b = b[n+int(l):]
		return v, true
	}
	dirs := map[string]*Entry{}
	kids := map[*Entry][]*Entry{}
	var root *Entry
	var paths pathArena // the paths and entries share blocks (arena.go, slab.go)
	var slab entrySlab
	for len(b) > 0 {
		pb, ok := next()
		if !ok {
			return nil, fmt.Errorf("%w: shared catalog: truncated path", ErrBadRecord)
		}
		rb, ok := next()
		if !ok {
			return nil, fmt.Errorf("%w: shared catalog: truncated record", ErrBadRecord)
		}
		rec, err := decodeRecord(rb)
		if err != nil {
			return nil, fmt.Errorf("shared catalog %q: %w", pb, err)
		}
		rec.Tier = ""
		e := slab.alloc()
		c.fillEntry(e, paths.bytes(pb), &rec)
		p := e.Path()
		if p == "" {
			if root != nil || e.Kind() != KindDir {
				return nil, fmt.Errorf("%w: shared catalog: bad root", ErrBadRecord)
			}
			root = e
			dirs[""] = e
			continue
		}
		if path.Clean(p) != p || p[0] == '/' || p == "." || p == ".." || len(p) > 2 && p[:3] == "../" {
			return nil, fmt.Errorf("%w: shared catalog: path %q", ErrBadRecord, p)
		}
		pp := path.Dir(p)
		if pp == "." {
			pp = ""
		}
		parent := dirs[pp]
		if parent == nil {
			return nil, fmt.Errorf("%w: shared catalog: %q has no parent before it", ErrBadRecord, p)
		}
		if k := kids[parent]; len(k) > 0 && k[len(k)-1].compareNames(e) >= 0 {
			return nil, fmt.Errorf("%w: shared catalog: %q out of order", ErrBadRecord, p)
		}
		kids[parent] = append(kids[parent], e)
		if e.Kind() == KindDir {
			dirs[p] = e
		}
	}
	if root == nil {
		return nil, fmt.Errorf("%w: shared catalog: no root", ErrBadRecord)
	}
	for _, d := range dirs {
		d.setChildren(ptrKids(kids[d]))
	}
	return root, nil
}

// walkShared gets the tree through o.Shared: the document another node
// published, or a walk of the source here (published by o.Shared). A
// document that does not decode is walked over.
func (c *Catalog) walkShared(ctx context.Context, o Options) (root *Entry, walked bool, err error) {
	var mine *Entry
	doc, walked, err := o.Shared(ctx, func(ctx context.Context) ([]byte, error) {
		r, err := walkSource(ctx, o, c.log)
		if err != nil {
			return nil, err
		}
		mine = r
		return encodeTree(r), nil
	})
	if err != nil {
		return nil, false, err
	}
	if walked && mine != nil {
		return mine, true, nil
	}
	if root, err = c.decodeTree(doc); err != nil {
		c.log.Warn("the shared catalog is unusable; walking the source")
		r, werr := walkSource(ctx, o, c.log)
		return r, true, werr
	}
	return root, false, nil
}
