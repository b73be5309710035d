package placement

import (
	"context"
	"io"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// RemoteKey names one version of a dataset file for a Remote.
type RemoteKey struct {
	Path  string
	Size  int64
	Mtime int64 // nanoseconds since the epoch
}

// SourceCopy reads the source file whole into w, checking that it is the
// version asked for, and calls progress (if set) with the bytes written so
// far. The placer hands one to Remote.Copy.
type SourceCopy func(w io.Writer, progress func(int64)) (int64, error)

// Remote is a store of whole files shared with other nodes (the cluster
// tier; the daemon adapts package cluster to it). A whole-file copy (into a
// tier or the shared buffer) asks it before the source: a file it holds is
// not read from the source on this node at all, and a file it does not hold
// is read from the source through it, so that it keeps the bytes for the
// other nodes. The order is: local tiers, the remote, the source.
type Remote interface {
	// Copy writes version k of the file to w, from its first byte to its
	// last, and returns the bytes written (k.Size on success). It reads
	// the stored copy when there is one and otherwise calls source
	// (at most once per call, possibly after waiting a bounded time for
	// another node that reads it). The remote's own failures are never
	// returned: it falls back to source. source's errors are returned.
	// progress (if set) is called with the bytes written to w so far.
	Copy(ctx context.Context, k RemoteKey, w io.Writer, progress func(int64), source SourceCopy) (int64, error)
}

// RangeRemote is a Remote that also reads parts of the files it holds: a
// read with no local copy to follow (a file that fits no tier, a read that
// found every copy slot taken, a copy that failed) takes its bytes from
// the remote's stored copy before the source. It never fills the remote:
// only whole-file copies do.
type RangeRemote interface {
	Remote
	// Stored returns the stored copy of version k, or false when the
	// remote does not hold it or fails.
	Stored(ctx context.Context, k RemoteKey) (RemoteFile, bool)
}

// RemoteFile is a stored copy of one file version, read in parts.
type RemoteFile interface {
	// ReadAt fills buf from off, fewer bytes only at the end of the file.
	// After an error the reader reads the source instead.
	ReadAt(ctx context.Context, buf []byte, off int64) (int, error)
}

// remoteKey is e's key in version a.
func remoteKey(e *catalog.Entry, a catalog.Attr) RemoteKey {
	return RemoteKey{Path: e.Path(), Size: a.Size, Mtime: a.Mtime}
}

// sliceWriter writes into a preallocated slice, in order.
type sliceWriter struct {
	b []byte
	n int
}

func (w *sliceWriter) Write(p []byte) (int, error) {
	if len(p) > len(w.b)-w.n {
		return 0, io.ErrShortWrite
	}
	w.n += copy(w.b[w.n:], p)
	return len(p), nil
}

// Sharer is a Remote whose nodes split the dataset between them (a cluster
// with data = "peers"): each node keeps its own share in its tiers, and
// reads the rest from the node that holds it (RangeRemote) rather than
// copying it. The copier asks Keeps before it copies a file into a tier
// (a background copy, a fill, a warmup, the copy a read starts) and tells
// the others what it installed and dropped.
type Sharer interface {
	RangeRemote
	// Keeps reports whether this node keeps version k in its tiers.
	Keeps(k RemoteKey) bool
	// Holds records that this node installed a copy of version k in a
	// tier; Dropped that it no longer has one. Both are bounded in time
	// and their failures are the remote's own (a directory entry missing
	// costs a peer a wasted request, never a wrong byte).
	Holds(k RemoteKey)
	Dropped(k RemoteKey)
	// Sharing reports whether this node takes a share now (not until
	// the nodes agree on who keeps what): it copies nothing until then.
	Sharing() bool
	// Rank is this node's place in the order in which the nodes keep
	// version k: 0 for its owner, up to the replicas for the nodes that
	// keep it, more for those that would keep it with fewer nodes; -1
	// while it keeps nothing. Copies beyond the share are taken in this
	// order, and dropped in the reverse one.
	Rank(k RemoteKey) int
	// HeldElsewhere reports whether another live node holds a copy of
	// version k now (false when it cannot tell): a copy of a file this
	// node does not keep is dropped to make room for its share only then.
	HeldElsewhere(ctx context.Context, k RemoteKey) bool
}

// sharer is o.Remote as a Sharer, or nil.
func (o *Options) sharer() Sharer {
	s, _ := o.Remote.(Sharer)
	return s
}

// keeps reports whether this node keeps e (in version a) in its tiers:
// always, unless the remote shares the dataset between nodes.
func (o *Options) keeps(e *catalog.Entry, a catalog.Attr) bool {
	s := o.sharer()
	return s == nil || s.Keeps(remoteKey(e, a))
}

// holds and dropped tell a Sharer of an installed or dropped copy of e in
// version a.
func (o *Options) holds(e *catalog.Entry, a catalog.Attr) {
	if s := o.sharer(); s != nil {
		s.Holds(remoteKey(e, a))
	}
}

func (o *Options) dropped(e *catalog.Entry, a catalog.Attr) {
	if s := o.sharer(); s != nil {
		s.Dropped(remoteKey(e, a))
	}
}
