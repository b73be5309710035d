package fs

import (
	"strings"

	"github.com/epochfs/epochfs/internal/placement"
	fusefs "github.com/hanwen/go-fuse/v2/fs"
)

// OnEvent tells the kernel about a change of the tree the placer made, so
// that its caches (attributes and pages of a file, entries and listing of
// a directory, which the mount keeps for a day: the dataset is read-only)
// never serve an old version. It runs in the goroutine that made the
// change, with no placer lock held.
//
// A change of attributes found by an open's validation (ev.Sync) is
// invalidated synchronously: the kernel has dropped the old size and pages
// before the open returns, so the first read returns exactly the new bytes.
// Every other notification is sent from a goroutine, never from inside the
// request that found the change: a READ that notified the kernel about its
// own inode would wait for the page lock the read itself holds, and a
// refresh would wait behind it. Entry invalidations take the parent
// directory's lock in the kernel and are always sent from a goroutine.
//
// The daemon installs it as the placer's notify (placement.Placer.
// SetNotify) once the mount is up.
func (fsys *FS) OnEvent(ev placement.Event) {
	switch ev.Kind {
	case placement.EntryChanged:
		if in := fsys.inodeOf(ev.Entry.Path()); in != nil {
			if n, ok := in.Operations().(*node); ok && n.stale() {
				// A new content is a new inode (ino.go): the kernel
				// drops the path's entry and looks it up again; the old
				// inode keeps its content's attributes and pages for
				// the handles still open on it. An open of it answers
				// ESTALE (file.go), and the kernel looks the path up
				// again at once.
				fsys.dropEntry(ev.Entry.Path())
				return
			}
			if ev.Sync {
				in.NotifyContent(0, 0)
			} else {
				// Not from here: the request that found the change may
				// hold the page lock the kernel's invalidation waits for.
				// An open that comes first tells the kernel itself.
				if n, ok := in.Operations().(*node); ok {
					n.untold.Store(true)
				}
				go in.NotifyContent(0, 0)
			}
		}
	case placement.EntryRemoved:
		dir, name := splitPath(ev.Entry.Path())
		parent := fsys.inodeOf(dir)
		if parent == nil {
			return // the kernel has nothing of it cached
		}
		go func() {
			if child := parent.GetChild(name); child != nil {
				parent.NotifyDelete(name, child)
			}
			parent.RmChild(name)
			parent.NotifyEntry(name)
			parent.NotifyContent(0, 0)
		}()
	case placement.EntryAdded:
		fsys.dropEntry(ev.Entry.Path())
	}
}

// dropEntry tells the kernel, from a goroutine, to forget its entry of
// path p (and any answer that it has no such entry), and the listing of
// p's directory it keeps (dir.go).
func (fsys *FS) dropEntry(p string) {
	dir, name := splitPath(p)
	if parent := fsys.inodeOf(dir); parent != nil {
		go func() {
			parent.NotifyEntry(name)
			parent.NotifyContent(0, 0)
		}()
	}
}

// inodeOf returns the kernel-known inode of a dataset path, or nil when
// the kernel has not looked it up.
func (fsys *FS) inodeOf(p string) *fusefs.Inode {
	in := &fsys.root.Inode
	if p == "" {
		return in
	}
	for _, name := range strings.Split(p, "/") {
		if in = in.GetChild(name); in == nil {
			return nil
		}
	}
	return in
}

func splitPath(p string) (dir, name string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", p
	}
	return p[:i], p[i+1:]
}
