package fs

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/views"
	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// A job's views (docs/views.md): jobs/NAME/batch (and rank/R/batch), each
// open taking the next batch as one .npz, and
// jobs/NAME/augmented/PATH.npy, one augmentation of PATH for the job. Both
// belong to the job's owner, readable by them only, like next.

func newBatchFile(ref jobRef, rank int, ino uint64) fusefs.InodeEmbedder {
	return &batchFile{ref: ref, rank: rank, ino: ino}
}

func newAugmentedDir(ref jobRef, _ int, ino uint64) fusefs.InodeEmbedder {
	fsys := ref.fsys
	o := ref.owner
	tree := &viewTree{
		rootIno: ino, inoBase: inoAugmentedBase + ref.id<<44, owner: &o, who: ref.cred, label: ref.label(-1, "augmented"),
		open: func(ctx context.Context, e *catalog.Entry) ([]byte, error) {
			return fsys.o.Jobs.Augmented(ctx, ref.job(), e)
		},
		live: ref.live,
	}
	if tree.who == nil {
		tree.who = &catalog.Cred{} // root's job
	}
	return &viewNode{fsys: fsys, e: fsys.p.Catalog().Root(), tree: tree}
}

// batchFile is jobs/NAME/batch or jobs/NAME/rank/R/batch.
//
// Each open takes the next batch (an empty file at the end of an epoch),
// and the open's reads return it. Where the mount has passthrough, the
// batch is assembled in a memory file (internal/views/memfile.go) registered as the open's
// backing file, and the kernel serves the reads from it: the bytes are
// copied once, from the memory file to the reader, with no request to the
// daemon. The kernel lets the open handles of one inode name one backing
// file only (see file.go), so an open made while another handle of the
// inode is live, after a short wait for its release, is a direct I/O open
// in passthrough mode beside it, its reads served by the daemon.
type batchFile struct {
	fusefs.Inode
	ref  jobRef
	rank int
	ino  uint64

	mu     sync.Mutex
	live   *batchBacking // the backing file of the inode's live passthrough handles
	newest *batchHandle  // the latest open, until its release
}

// batchBacking is the registration of a batch's memory file, shared by
// the inode's handles in passthrough mode.
type batchBacking struct {
	b          *backing
	unregister func()        // drops b from FS.backings and the kernel
	refs       int           // guarded by batchFile.mu
	gone       chan struct{} // closed when the last handle is released
}

// batchJoinWait bounds how long an open waits for the previous handle's
// release (the kernel sends it after close returns) before opening beside
// it.
const batchJoinWait = 100 * time.Millisecond

var (
	_ fusefs.NodeOpener    = (*batchFile)(nil)
	_ fusefs.NodeGetattrer = (*batchFile)(nil)
)

func (n *batchFile) fillAttr(a *fuse.Attr) {
	ctlAttr(a, n.ino, syscall.S_IFREG|0o400, n.ref.owner, time.Now())
}

// Getattr reports the size of a batch, so that a reader can map it whole:
// asked about an open handle (lseek to SEEK_END), the size of the batch
// that open took; else (stat, fstat) that of the latest open not yet
// released, or 0. (The kernel names no handle for fstat, and go-fuse then
// passes the inode's first open one, which may be a released handle whose
// release is still being processed.)
func (n *batchFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fillAttr(&out.Attr)
	n.mu.Lock()
	if h, ok := fh.(*batchHandle); ok && !h.released {
		out.Size = uint64(h.size)
	} else if n.newest != nil {
		out.Size = uint64(n.newest.size)
	}
	n.mu.Unlock()
	out.SetTimeout(uncached)
	return 0
}

func (n *batchFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	in, ok := n.ref.info()
	if !ok || n.rank >= in.WorldSize {
		return nil, 0, syscall.ENOENT
	}
	fsys := n.ref.fsys
	label := n.ref.label(n.rank, "batch")
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, 0, fsys.ctlError(ctx, label, denied("batch is read-only: read it for the next batch"))
	}
	var alloc views.Alloc
	pt := fsys.Passthrough()
	if pt {
		alloc = fsys.batchMem.Alloc
	}
	rctx, done := waitCtx(ctx)
	b, _, err := fsys.o.Jobs.Batch(rctx, n.ref.job(), n.rank, alloc)
	done()
	switch {
	case errors.Is(err, context.Canceled):
		return nil, 0, fsys.toErrno(err)
	case err != nil:
		return nil, 0, fsys.ctlError(ctx, label, err)
	}
	if b != nil && len(b.Corrupt) > 0 {
		fsys.errs.add(callerUID(ctx), label+": left out, cannot be preprocessed: "+oneLine(strings.Join(b.Corrupt, ", ")))
	}
	h := &batchHandle{n: n}
	if b != nil {
		h.batch, h.size = newSharedBatch(b), int64(len(b.NPZ))
	}
	const noflush = fuse.FOPEN_NOFLUSH
	n.mu.Lock()
	n.newest = h
	n.mu.Unlock()
	// The kernel keeps attributes a clock tick even with the shortest
	// timeout: make it ask for this batch's size (off -1: no page range).
	n.NotifyContent(-1, 0)
	if !pt {
		return h, fuse.FOPEN_DIRECT_IO | noflush, 0
	}
	h.bk, h.direct = n.attach(ctx, b)
	switch {
	case h.bk == nil:
		return h, fuse.FOPEN_DIRECT_IO | noflush, 0
	case h.direct:
		return h, fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PASSTHROUGH | noflush, 0
	}
	// The kernel holds the memory file now: the daemon's mapping goes.
	h.batch.unref()
	h.batch = nil
	fsys.batchesPassthrough.Add(1)
	return h, fuse.FOPEN_PASSTHROUGH | noflush, 0
}

// attach gives an open its passthrough registration: b's memory file's
// when no other handle of the inode is live (direct false), else the live
// handles' (direct true: the daemon serves the open's reads); nil if the
// open goes in direct I/O mode alone (the end of an epoch, or the kernel
// refused the registration).
func (n *batchFile) attach(ctx context.Context, b *views.Batch) (*batchBacking, bool) {
	fsys := n.ref.fsys
	deadline := time.NewTimer(batchJoinWait)
	defer deadline.Stop()
	n.mu.Lock()
	defer n.mu.Unlock()
	for waited := false; n.live != nil; {
		if waited {
			n.live.refs++
			return n.live, true
		}
		gone := n.live.gone
		n.mu.Unlock()
		select {
		case <-gone:
		case <-deadline.C:
			waited = true
		case <-ctx.Done():
			waited = true
		}
		n.mu.Lock()
	}
	if b == nil {
		return nil, false
	}
	mf, ok := b.Buffer().(interface{ FD() int }) // a views.MemFiles file
	if !ok {
		return nil, false
	}
	reg, unregister, err := fsys.registerBacking(n.ino, mf.FD())
	if err != nil {
		fsys.refused("serving the batch in direct I/O mode", n.ref.label(n.rank, "batch"), err)
		return nil, false
	}
	n.live = &batchBacking{b: reg, unregister: unregister, refs: 1, gone: make(chan struct{})}
	fsys.backings.Store(n.ino, n.live.b)
	return n.live, false
}

// detach ends a handle's use of bk; the last one unregisters it.
func (n *batchFile) detach(bk *batchBacking) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if bk.refs--; bk.refs > 0 {
		return
	}
	n.live = nil
	bk.unregister()
	close(bk.gone)
}

// batchHandle is one open of a batch file and the batch it took.
type batchHandle struct {
	n      *batchFile
	batch  *sharedBatch  // nil in passthrough mode: the kernel holds the batch
	bk     *batchBacking // the passthrough registration the handle names
	direct bool          // reads come to the daemon
	size   int64         // the batch's bytes

	released bool // guarded by n.mu
}

// BackingID is the registration of the batch's memory file the handle
// names (fusefs.FileBackingIDer); none in direct I/O without it.
func (h *batchHandle) BackingID() (int32, bool) {
	if h.bk == nil {
		return 0, false
	}
	return h.bk.b.ID, true
}

var (
	_ fusefs.FileReader      = (*batchHandle)(nil)
	_ fusefs.FileReleaser    = (*batchHandle)(nil)
	_ fusefs.FileBackingIDer = (*batchHandle)(nil)
)

// sharedBatch counts who still uses a batch's buffer: the handle that
// holds it and every reply the FUSE server has yet to send from it. The
// buffer is freed when the last of them is done, so a reply is never sent
// from a buffer a later batch is writing.
type sharedBatch struct {
	b    *views.Batch
	refs atomic.Int32
}

func newSharedBatch(b *views.Batch) *sharedBatch {
	s := &sharedBatch{b: b}
	s.refs.Store(1)
	return s
}

func (s *sharedBatch) unref() {
	if s != nil && s.refs.Add(-1) == 0 {
		s.b.Release()
	}
}

// batchReply is one read's reply from a batch: the server calls Done once
// the bytes are sent to the kernel.
type batchReply struct {
	s    *sharedBatch
	data []byte
}

func (r *batchReply) Bytes([]byte) ([]byte, fuse.Status) { return r.data, fuse.OK }
func (r *batchReply) Size() int                          { return len(r.data) }
func (r *batchReply) Done()                              { r.s.unref() }

// Read serves the open's batch (in direct I/O mode).
func (h *batchHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h.batch == nil || off >= int64(len(h.batch.b.NPZ)) {
		return fuse.ReadResultData(nil), 0
	}
	data := h.batch.b.NPZ
	end := min(off+int64(len(dest)), int64(len(data)))
	h.batch.refs.Add(1)
	return &batchReply{s: h.batch, data: data[off:end]}, 0
}

// Release drops the handle's hold on its batch (the buffer is freed once
// the replies still being sent from it are done) and on its registration.
func (h *batchHandle) Release(ctx context.Context) syscall.Errno {
	h.n.mu.Lock()
	h.released = true
	if h.n.newest == h {
		h.n.newest = nil
	}
	h.n.mu.Unlock()
	h.batch.unref()
	h.batch = nil
	if h.bk != nil {
		h.n.detach(h.bk)
		h.bk = nil
	}
	return 0
}
