package fs

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/preprocess"
	"github.com/epochfs/epochfs/internal/views"
	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// .epochfs/views/decoded/ mirrors the dataset: PATH.npy for every regular
// file PATH is the file decoded with the mount's static steps (uint8 HWC,
// NumPy format 1.0), from the decoded cache or decoded on open. A view has
// its file's owner and read permissions, so the kernel
// (default_permissions) refuses it to whoever may not read the file. The
// size is not known before the file is decoded: views are served with
// direct I/O, and read until a 0-byte read like the ctl files.

// viewSuffix ends a view file's name (inode numbers: ino.go).
const viewSuffix = ".npy"

// viewsDir is .epochfs/views/.
type viewsDir struct {
	fusefs.Inode
	fsys *FS
}

var (
	_ fusefs.NodeLookuper  = (*viewsDir)(nil)
	_ fusefs.NodeReaddirer = (*viewsDir)(nil)
	_ fusefs.NodeGetattrer = (*viewsDir)(nil)
)

func (fsys *FS) viewsLookup(ctx context.Context, parent *fusefs.Inode, out *fuse.EntryOut) *fusefs.Inode {
	d := &viewsDir{fsys: fsys}
	ctlAttr(&out.Attr, inoViewsDir, syscall.S_IFDIR|0o755, owner{}, fsys.start)
	return parent.NewInode(ctx, d, fusefs.StableAttr{Mode: syscall.S_IFDIR, Ino: inoViewsDir})
}

func (d *viewsDir) Getattr(ctx context.Context, f fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	ctlAttr(&out.Attr, inoViewsDir, syscall.S_IFDIR|0o755, owner{}, d.fsys.start)
	return 0
}

func (d *viewsDir) Readdir(ctx context.Context) (fusefs.DirStream, syscall.Errno) {
	return fusefs.NewListDirStream([]fuse.DirEntry{{Name: "decoded", Mode: syscall.S_IFDIR, Ino: inoViewsDecod}}), 0
}

func (d *viewsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if name != "decoded" {
		return nil, syscall.ENOENT
	}
	// The decoded views are numbered as the dataset's files are: by the
	// whole tree.
	if err := d.fsys.p.Catalog().WaitWalk(ctx); err != nil {
		return nil, d.fsys.toErrno(err)
	}
	root := d.fsys.p.Catalog().Root()
	n := &viewNode{fsys: d.fsys, e: root, tree: d.fsys.decodedTree()}
	n.fillAttr(&out.Attr)
	out.SetEntryTimeout(d.fsys.o.Timeout)
	out.SetAttrTimeout(d.fsys.o.Timeout)
	return d.NewInode(ctx, n, fusefs.StableAttr{Mode: syscall.S_IFDIR, Ino: inoViewsDecod}), 0
}

// viewTree is one tree of views mirroring the dataset: views/decoded/, or a
// job's augmented/.
type viewTree struct {
	rootIno uint64
	inoBase uint64 // + catalog ID
	// owner, if set, owns every node (a job's views: its owner's only);
	// else a node has its source file's owner and read bits.
	owner *owner
	// who, if set, is the credential the tree shows the dataset to (a
	// job's owner): it lists and looks up only what who could list and
	// open on the mount, the same answer for a hidden name as for a
	// missing one. Nil: the kernel checks each node's own modes.
	who   *catalog.Cred
	label string // for .epochfs/errors
	// open makes a view file's bytes.
	open func(ctx context.Context, e *catalog.Entry) ([]byte, error)
	// live reports whether the tree still exists (a job's: the job).
	live func() bool
}

func (fsys *FS) decodedTree() *viewTree {
	return &viewTree{rootIno: inoViewsDecod, inoBase: inoViewBase, label: "views/decoded",
		open: func(ctx context.Context, e *catalog.Entry) ([]byte, error) {
			return views.DecodedNPY(ctx, fsys.o.Views, int(e.Index))
		},
		live: func() bool { return true }}
}

// viewNode is a directory of a view tree or one view file.
type viewNode struct {
	fusefs.Inode
	fsys *FS
	e    *catalog.Entry
	tree *viewTree
}

var (
	_ fusefs.NodeLookuper  = (*viewNode)(nil)
	_ fusefs.NodeReaddirer = (*viewNode)(nil)
	_ fusefs.NodeGetattrer = (*viewNode)(nil)
	_ fusefs.NodeOpener    = (*viewNode)(nil)
)

func (n *viewNode) ino() uint64 {
	if n.e.Path() == "" {
		return n.tree.rootIno
	}
	return n.tree.inoBase + n.e.ID()
}

// fillAttr: a directory as its source directory; a view read-only with
// its source file's owner and read bits, or the tree's owner's.
func (n *viewNode) fillAttr(out *fuse.Attr) {
	fillAttr(n.e, out)
	out.Ino = n.ino()
	if n.e.Kind() == catalog.KindFile {
		out.Mode = syscall.S_IFREG | n.e.Attr().Mode&0o444
		out.Size, out.Blocks = 0, 0
	}
	if o := n.tree.owner; o != nil {
		out.Uid, out.Gid = o.uid, o.gid
		if n.e.Kind() == catalog.KindFile {
			out.Mode = syscall.S_IFREG | 0o400
		} else {
			out.Mode = syscall.S_IFDIR | 0o500
		}
	}
}

// timeout is the kernel's cache time: a job's tree goes with the job.
func (n *viewNode) timeout() time.Duration {
	if n.tree.owner != nil {
		return time.Second
	}
	return n.fsys.o.Timeout
}

func (n *viewNode) Getattr(ctx context.Context, f fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if !n.tree.live() {
		return syscall.ENOENT
	}
	n.fillAttr(&out.Attr)
	out.SetTimeout(n.timeout())
	return 0
}

func (n *viewNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if n.e.Kind() != catalog.KindDir {
		return nil, syscall.ENOTDIR
	}
	c := n.e.Lookup(name)
	if !n.tree.live() {
		return nil, syscall.ENOENT
	}
	if c == nil || c.Kind() != catalog.KindDir {
		base, ok := strings.CutSuffix(name, viewSuffix)
		if !ok {
			return nil, syscall.ENOENT
		}
		if c = n.e.Lookup(base); c == nil || c.Kind() != catalog.KindFile {
			return nil, syscall.ENOENT
		}
	}
	if !n.shows(c) {
		return nil, syscall.ENOENT
	}
	ch := &viewNode{fsys: n.fsys, e: c, tree: n.tree}
	ch.fillAttr(&out.Attr)
	out.SetEntryTimeout(n.timeout())
	out.SetAttrTimeout(n.timeout())
	return n.NewInode(ctx, ch, fusefs.StableAttr{Mode: modeType(c.Kind()), Ino: ch.ino()}), 0
}

func (n *viewNode) Readdir(ctx context.Context) (fusefs.DirStream, syscall.Errno) {
	if who := n.tree.who; who != nil && (!n.fsys.p.Catalog().ReachableAs(who, n.e) || !who.May(n.e.Attr(), catalog.PermRead)) {
		return nil, syscall.EACCES // as the source directory would answer who
	}
	var list []fuse.DirEntry
	for c := range n.e.Children().All() {
		if !n.shows(c) {
			continue
		}
		switch c.Kind() {
		case catalog.KindDir:
			list = append(list, fuse.DirEntry{Name: c.Name(), Mode: syscall.S_IFDIR, Ino: n.tree.inoBase + c.ID()})
		case catalog.KindFile:
			list = append(list, fuse.DirEntry{Name: c.Name() + viewSuffix, Mode: syscall.S_IFREG, Ino: n.tree.inoBase + c.ID()})
		}
	}
	return fusefs.NewListDirStream(list), 0
}

// shows reports whether the tree shows c, a child of n's directory: to
// its who, a directory it could reach and a file it could open.
func (n *viewNode) shows(c *catalog.Entry) bool {
	who := n.tree.who
	if who == nil || who.Root() {
		return true
	}
	if !n.fsys.p.Catalog().ReachableAs(who, c) {
		return false
	}
	return c.Kind() != catalog.KindFile || who.MayRead(c.Attr())
}

// Open makes the view (decodes, or augments, or takes it from a cache) and
// serves it as .npy bytes.
func (n *viewNode) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if n.e.Kind() != catalog.KindFile {
		return nil, 0, syscall.EISDIR
	}
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, 0, syscall.EROFS
	}
	if n.e.Gone() {
		return nil, 0, syscall.ENOENT
	}
	if !n.tree.live() {
		return nil, 0, syscall.ENOENT
	}
	rctx, release := reqCtx(ctx, 0)
	defer release()
	data, err := n.tree.open(rctx, n.e)
	if err != nil {
		return nil, 0, n.fsys.viewError(ctx, n.tree.label+"/"+n.e.Path(), err)
	}
	return &viewHandle{data: data}, fuse.FOPEN_DIRECT_IO, 0
}

// viewError records why a view could not be made (a corrupt image is
// named in .epochfs/errors) and returns its errno: EIO for a sample that
// cannot be preprocessed.
func (fsys *FS) viewError(ctx context.Context, p string, err error) syscall.Errno {
	if errors.Is(err, preprocess.ErrBadSample) {
		fsys.errs.add(callerUID(ctx), p+": "+oneLine(err.Error()))
		return syscall.EIO
	}
	return fsys.toErrno(err)
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// viewHandle serves one view's bytes.
type viewHandle struct{ data []byte }

var _ fusefs.FileReader = (*viewHandle)(nil)

func (h *viewHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= int64(len(h.data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), int64(len(h.data)))
	return fuse.ReadResultData(h.data[off:end]), 0
}
