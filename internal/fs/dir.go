package fs

// A dataset directory's listing, served from the catalog and cached by the
// kernel.

import (
	"context"
	"sync"
	"syscall"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// dirOpenFlags ask the kernel to keep the listings it reads in the
// directory's page cache (FUSE_CACHE_READDIR, since Linux 4.20), and to
// keep them across opens: a second walk of an unchanged dataset never
// reaches the daemon but for OPENDIR. The cache of a directory is dropped
// when its catalog entries change (events.go: OnEvent, dropEntry), and by
// the kernel when the directory's mtime differs at the start of a listing.
const dirOpenFlags = fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE

// OpendirHandle opens a dataset directory: its entries as the catalog has
// them at the open (a refresh replaces a directory's children whole, so
// the snapshot stays valid while it is read), with the kernel's readdir
// cache on.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if n.e.Kind() != catalog.KindDir {
		return nil, 0, syscall.ENOTDIR
	}
	if err := n.fsys.listed(ctx, n.e); err != nil {
		return nil, 0, n.fsys.toErrno(err)
	}
	n.fsys.dirOpens.Add(1)
	return &dirHandle{n: n, kids: n.e.Children()}, dirOpenFlags, 0
}

// dirHandle is an open dataset directory. Entry i of kids carries offset
// i+1, the offset to go on from after it: the kernel asks for the entries
// from the offset of the last one it kept.
type dirHandle struct {
	n    *node
	mu   sync.Mutex
	kids catalog.Kids
	next int
	// cur is the entry Readdirent returns: go-fuse copies it before the
	// next call, so one serves the whole listing.
	cur fuse.DirEntry
	// The READDIRPLUS request being answered (go-fuse makes a context per
	// request), and the index of its first entry.
	plusReq  context.Context
	plusFrom int
}

var (
	_ fusefs.FileReaddirenter = (*dirHandle)(nil)
	_ fusefs.FileSeekdirer    = (*dirHandle)(nil)
	_ fusefs.FileLookuper     = (*dirHandle)(nil)
)

// Readdirent returns the next entry, or nil at the end.
func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.next >= d.kids.Len() {
		return nil, 0
	}
	c := d.kids.At(d.next)
	d.next++
	d.n.fsys.dirEntries.Add(1)
	d.cur = fuse.DirEntry{Name: c.Name(), Mode: modeType(c.Kind()), Ino: fileIno(c.ID(), c.Version()), Off: uint64(d.next)}
	return &d.cur, 0
}

// Seekdir moves to offset off (0: the start).
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off > uint64(d.kids.Len()) {
		return syscall.EINVAL
	}
	d.next = int(off)
	return 0
}

// Lookup answers the entry named last by Readdirent in a READDIRPLUS
// reply. With FUSE_READDIRPLUS_AUTO the kernel asks for READDIRPLUS at the
// start of every listing, whatever the caller does, and later in the
// listing only once a child was looked up (the caller looks at the
// entries: ls -l). So the entries of a reply from the start get no
// attributes (node ID 0: the kernel links nothing, and no inode is made
// here or in the kernel for a names-only walk such as ls -R, find, os.walk
// or ImageFolder), and the entries of a later READDIRPLUS get them, as a
// LOOKUP would.
func (d *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	d.mu.Lock()
	if ctx != d.plusReq {
		d.plusReq, d.plusFrom = ctx, d.next-1
	}
	fromStart := d.plusFrom <= 0
	d.mu.Unlock()
	if fromStart {
		return nil, syscall.EAGAIN
	}
	return d.n.Lookup(ctx, name, out)
}
