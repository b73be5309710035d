package fs

import (
	"github.com/hanwen/go-fuse/v2/fuse"
	"go.uber.org/zap"
)

// rawFS is go-fuse's node bridge (fs.NewNodeFS) with the backing file of
// passthrough opens filled in.
//
// go-fuse v2.12's bridge registers a backing file at every open of a handle
// that implements FilePassthroughFder and drops the inode's registration at
// its last release; it also drops a reference at the release of handles
// that never took one. Registering per open costs two ioctls and an open of
// the tier file per open, and the stray drops raced with our own opens. So
// no handle of ours implements FilePassthroughFder and the bridge never
// touches a registration: the node's Open picks the mode, registers the
// copy's descriptor once (file.go) and answers FOPEN_PASSTHROUGH; the
// bridge has no way to return the backing ID, so this layer adds it from
// the registration the node published for the inode in FS.backings. The
// mount runs with ExternalNodeID: the kernel's node ID is the inode number,
// the catalog entry's ID.
type rawFS struct {
	fuse.RawFileSystem
	fsys *FS
}

func (w *rawFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	st := w.RawFileSystem.Open(cancel, in, out)
	if st != fuse.OK || out.OpenFlags&fuse.FOPEN_PASSTHROUGH == 0 {
		return st
	}
	if b, ok := w.fsys.backings.Load(in.NodeId); ok {
		out.BackingID = b.ID
	} else {
		// Not reached: a node answers FOPEN_PASSTHROUGH only while it
		// holds the copy whose registration it published. Without an ID
		// the kernel fails the open with EIO and releases the handle.
		w.fsys.log.Error("passthrough open without a backing registration", zap.Uint64("ino", in.NodeId))
	}
	return st
}
