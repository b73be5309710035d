package fs

import (
	"github.com/epochfs/epochfs/internal/placement"
	"github.com/hanwen/go-fuse/v2/fuse"
	"go.uber.org/zap"
)

// The passthrough registry: every registration of a backing file with the
// kernel, for a dataset file's tier copy (file.go, prewarm.go) and for a
// batch's memory file (jobviews.go), is made and counted here. A dataset
// copy's registration is kept with the copy (attach: placement.Resident's
// Lend and Keep);
// FS.backings maps each inode to the registration its passthrough opens
// name. Each passthrough handle hands its ID to go-fuse's bridge
// (fusefs.FileBackingIDer), which puts it in the OPEN reply and leaves
// the registration to us: it neither registers nor unregisters one.

// backing is the kernel's registration of a descriptor as a backing file
// of an inode: its backing ID (ID) and the inode (Ino).
type backing = placement.Registration

// backingOf returns the kernel registration of res's descriptor,
// registering it at the copy's first passthrough open; nil if the kernel
// refused (the open then goes in cached mode).
func (fsys *FS) backingOf(n *node, res *placement.Resident) *backing {
	b, err := fsys.attach(n.StableAttr().Ino, res)
	if err != nil {
		fsys.refused("opening in cached mode", n.e.Path(), err)
	}
	return b
}

// attach returns the registration kept with the copy res of inode ino,
// registering its descriptor first if there is none (Resident.Lend and
// Keep: fs calls placement, never the other way). Two first opens may
// both register; the one whose registration was not kept undoes its own.
func (fsys *FS) attach(ino uint64, res *placement.Resident) (*backing, error) {
	if b := res.Attached(); b != nil {
		return b, nil
	}
	fd, ok, err := res.Lend()
	if err != nil {
		return nil, err
	}
	if !ok {
		return res.Attached(), nil
	}
	b, undo, err := fsys.registerBacking(ino, fd)
	if err != nil {
		res.Return()
		return nil, err
	}
	if kept := res.Keep(b, undo); kept != b {
		undo()
		return kept, nil
	}
	return b, nil
}

// refused counts a registration the kernel refused, and logs the first.
func (fsys *FS) refused(instead, path string, err error) {
	if fsys.ptRefusedLog.CompareAndSwap(false, true) {
		fsys.log.Warn("passthrough registration refused; "+instead, zap.String("path", path), zap.Error(err))
	}
	fsys.ptRefused.Add(1)
}

// registerBacking registers fd with the kernel as a backing file of inode
// ino. The returned function unregisters it, when the placer closes fd.
func (fsys *FS) registerBacking(ino uint64, fd int) (*backing, func(), error) {
	id, errno := fsys.server.RegisterBackingFd(&fuse.BackingMap{Fd: int32(fd)})
	if errno != 0 {
		return nil, nil, errno
	}
	fsys.ptRegistered.Add(1)
	fsys.ptBackings.Add(1)
	b := &backing{ID: id, Ino: ino}
	return b, func() {
		fsys.backings.Compute(ino, func(cur *backing, ok bool) (*backing, bool) { return cur, !ok || cur == b })
		// After an unmount the connection is gone, and with it the
		// registration.
		fsys.server.UnregisterBackingFd(id)
		fsys.ptBackings.Add(-1)
	}, nil
}

// backingID is the registration published for inode ino, which its
// passthrough opens name. Not found is not reached: a node answers
// FOPEN_PASSTHROUGH only while it holds the copy whose registration it
// published. Without an ID the kernel fails the open with EIO and
// releases the handle.
func (fsys *FS) backingID(ino uint64) (int32, bool) {
	if b, ok := fsys.backings.Load(ino); ok {
		return b.ID, true
	}
	fsys.log.Error("passthrough open without a backing registration", zap.Uint64("ino", ino))
	return 0, false
}
