package fs

import (
	"context"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/source"
	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// xattrTier names the tier that holds a dataset file ("source" if none).
const xattrTier = "user.epochfs.tier"

// ctlName is the hidden control directory in the mount root.
const ctlName = ".epochfs"

// node is a dataset file, directory or symlink.
type node struct {
	fusefs.Inode
	fsys *FS
	e    *catalog.Entry

	// The content the inode shows (ino.go: fileIno): the entry's version
	// when the kernel looked it up, and that content's size, mtime and
	// blocks, which the inode keeps once the source has another.
	ver    uint32
	size   int64
	mtime  int64
	blocks int64

	io ioMode // the inode's open handles by I/O mode (file.go)
	// untold: the entry changed and the kernel is being told from a
	// goroutine (events.go); the next open tells it first.
	untold atomic.Bool
}

var (
	_ fusefs.NodeLookuper       = (*node)(nil)
	_ fusefs.NodeOpendirHandler = (*node)(nil)
	_ fusefs.NodeGetattrer      = (*node)(nil)
	_ fusefs.NodeOpener         = (*node)(nil)
	_ fusefs.NodeReadlinker     = (*node)(nil)
	_ fusefs.NodeGetxattrer     = (*node)(nil)
	_ fusefs.NodeListxattrer    = (*node)(nil)
	_ fusefs.NodeSetattrer      = (*node)(nil)
	_ fusefs.NodeCreater        = (*node)(nil)
	_ fusefs.NodeMkdirer        = (*node)(nil)
	_ fusefs.NodeMknoder        = (*node)(nil)
	_ fusefs.NodeUnlinker       = (*node)(nil)
	_ fusefs.NodeRmdirer        = (*node)(nil)
	_ fusefs.NodeRenamer        = (*node)(nil)
	_ fusefs.NodeSymlinker      = (*node)(nil)
	_ fusefs.NodeLinker         = (*node)(nil)
	_ fusefs.NodeSetxattrer     = (*node)(nil)
	_ fusefs.NodeRemovexattrer  = (*node)(nil)
)

func modeType(k catalog.Kind) uint32 {
	switch k {
	case catalog.KindDir:
		return syscall.S_IFDIR
	case catalog.KindSymlink:
		return syscall.S_IFLNK
	default:
		return syscall.S_IFREG
	}
}

// newNode is the node of e's content a, version ver (Entry.Snapshot).
func newNode(fsys *FS, e *catalog.Entry, a catalog.Attr, ver uint32) *node {
	return &node{fsys: fsys, e: e, ver: ver, size: a.Size, mtime: a.Mtime, blocks: a.Blocks}
}

// attr is what the inode shows: the entry's attributes, with the size,
// mtime and blocks of the node's content if the source has another now.
func (n *node) attr() catalog.Attr {
	a, v := n.e.Snapshot()
	if v != n.ver {
		a.Size, a.Mtime, a.Blocks = n.size, n.mtime, n.blocks
	}
	return a
}

// stale reports whether the source has another content of the file than
// the node's (its path now leads to another inode).
func (n *node) stale() bool { return n.e.Version() != n.ver }

func fillAttr(e *catalog.Entry, out *fuse.Attr) {
	fillFrom(e.Kind(), e.Attr(), out)
	out.Ino = e.ID()
}

// fillFrom fills out from a of an entry of kind k (the inode number is
// the caller's: go-fuse answers the node's own).
func fillFrom(k catalog.Kind, a catalog.Attr, out *fuse.Attr) {
	out.Mode = a.Mode
	out.Size = uint64(a.Size)
	out.Blksize = 4096
	out.Uid, out.Gid = a.UID, a.GID
	out.Mtime, out.Mtimensec = timeOf(a.Mtime)
	if a.Nlink != 0 {
		// The source's stat, as recorded.
		out.Nlink = a.Nlink
		out.Blocks = uint64(a.Blocks)
		out.Atime, out.Atimensec = timeOf(a.Atime)
		out.Ctime, out.Ctimensec = timeOf(a.Ctime)
		return
	}
	// A record written before the catalog kept them: what can be told
	// from the size and mtime.
	out.Blocks = (uint64(a.Size) + 511) / 512
	out.Ctime, out.Ctimensec = out.Mtime, out.Mtimensec
	out.Atime, out.Atimensec = out.Mtime, out.Mtimensec
	out.Nlink = 1
	if k == catalog.KindDir {
		out.Nlink = 2
	}
}

// timeOf splits nanoseconds since the epoch as FUSE wants them; a time
// before the epoch is shown as the epoch.
func timeOf(ns int64) (uint64, uint32) {
	if ns < 0 {
		return 0, 0
	}
	return uint64(ns / 1e9), uint32(ns % 1e9)
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if n.e.Path() == "" && name == ctlName {
		return n.fsys.ctlLookup(ctx, &n.Inode, out)
	}
	if err := n.fsys.listed(ctx, n.e); err != nil {
		return nil, n.fsys.toErrno(err)
	}
	c := n.e.Lookup(name)
	if c == nil {
		return nil, syscall.ENOENT
	}
	a, ver := c.Snapshot()
	fillFrom(c.Kind(), a, &out.Attr)
	out.SetEntryTimeout(n.fsys.o.Timeout)
	out.SetAttrTimeout(n.fsys.o.Timeout)
	ch := newNode(n.fsys, c, a, ver)
	return n.NewInode(ctx, ch, fusefs.StableAttr{Mode: modeType(c.Kind()), Ino: fileIno(c.ID(), ver)}), 0
}

func (n *node) Getattr(ctx context.Context, f fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	fillFrom(n.e.Kind(), n.attr(), &out.Attr)
	out.SetTimeout(n.fsys.o.Timeout)
	return 0
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	if n.e.Kind() != catalog.KindSymlink {
		return nil, syscall.EINVAL
	}
	return []byte(n.e.Target()), 0
}

// Getxattr answers the tier attribute of a file, and the source's user.*
// attributes (read from the source when asked: internal/source/xattr.go). Every other
// name is absent: ENODATA in the user namespace, EOPNOTSUPP in the others
// (the dataset carries no security labels and no POSIX ACLs). The kernel
// caches no GETXATTR answer, so ls -l would send two per entry
// (security.selinux, system.posix_acl_access); tools such as ls remember
// an EOPNOTSUPP per file system and ask once per run instead, so ls -l
// sends the source nothing. The kernel checked that the caller may read
// the file (user.* attributes need read permission).
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	n.fsys.xattrs.Add(1)
	var v []byte
	switch {
	case attr == xattrTier && n.e.Kind() == catalog.KindFile:
		v = []byte(n.fsys.p.Catalog().TierName(n.e.Tier()))
	case attr == xattrTier || !strings.HasPrefix(attr, source.UserXattrPrefix):
		return 0, absentXattr(attr)
	default:
		rctx, release := reqCtx(ctx, n.fsys.budget())
		val, ok, err := n.fsys.p.Source().Xattr(rctx, n.e.Path(), attr)
		release()
		if err != nil {
			return 0, n.fsys.toErrno(err)
		}
		if !ok {
			return 0, syscall.ENODATA
		}
		v = val
	}
	if len(dest) == 0 {
		return uint32(len(v)), 0
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// absentXattr is the answer for an attribute name the dataset does not
// have: ENODATA for a user.* name, EOPNOTSUPP for the namespaces the mount
// does not support at all (security.*, system.*, trusted.*).
func absentXattr(name string) syscall.Errno {
	if strings.HasPrefix(name, "user.") {
		return syscall.ENODATA
	}
	return syscall.EOPNOTSUPP
}

// Listxattr lists the source's user.* attributes. The tier attribute is
// readable by name but not listed, so that cp -a and rsync -X from the
// mount do not stamp it on their copies.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	n.fsys.xattrs.Add(1)
	if n.e.Kind() == catalog.KindSymlink {
		return 0, 0
	}
	rctx, release := reqCtx(ctx, n.fsys.budget())
	names, err := n.fsys.p.Source().XattrNames(rctx, n.e.Path())
	release()
	if err != nil {
		return 0, n.fsys.toErrno(err)
	}
	var v []byte
	for _, name := range names {
		if name != xattrTier {
			v = append(append(v, name...), 0)
		}
	}
	if len(dest) == 0 {
		return uint32(len(v)), 0
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// The dataset is read-only: every write-type operation answers EROFS.

func (n *node) Setattr(ctx context.Context, f fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno  { return syscall.EROFS }
func (n *node) Rename(ctx context.Context, name string, newParent fusefs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EROFS
}
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (n *node) Link(ctx context.Context, target fusefs.InodeEmbedder, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return syscall.EROFS
}
func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno { return syscall.EROFS }
