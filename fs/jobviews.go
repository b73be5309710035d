package fs

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/jobs"
	"github.com/epochfs/epochfs/placement"
	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// A job's views (docs/views.md): jobs/NAME/batch (and rank/R/batch), each
// read at offset 0 taking the next batch as one .npz, and
// jobs/NAME/augmented/PATH.npy, one augmentation of PATH for the job. Both
// belong to the job's owner, readable by them only, like next.

// inoAugmentedBase: a job's augmented/ tree takes catalog IDs above it,
// per job (job id << 44 keeps trees apart: 2^44 entries per job).
const inoAugmentedBase = 1 << 60

func newBatchFile(ref jobRef, rank int, ino uint64) fusefs.InodeEmbedder {
	return &batchFile{ref: ref, rank: rank, ino: ino}
}

func newAugmentedDir(ref jobRef, _ int, ino uint64) fusefs.InodeEmbedder {
	fsys := ref.fsys
	o := ref.owner
	tree := &viewTree{
		rootIno: ino, inoBase: inoAugmentedBase + ref.id<<44, owner: &o, label: ref.label(-1, "augmented"),
		open: func(ctx context.Context, e *placement.Entry) ([]byte, error) {
			return fsys.o.Jobs.Augmented(ctx, ref.name, e)
		},
		live: ref.live,
	}
	return &viewNode{fsys: fsys, e: fsys.p.Catalog().Root(), tree: tree}
}

// batchFile is jobs/NAME/batch or jobs/NAME/rank/R/batch.
type batchFile struct {
	fusefs.Inode
	ref  jobRef
	rank int
	ino  uint64
}

var (
	_ fusefs.NodeOpener    = (*batchFile)(nil)
	_ fusefs.NodeGetattrer = (*batchFile)(nil)
)

func (n *batchFile) fillAttr(a *fuse.Attr) {
	ctlAttr(a, n.ino, syscall.S_IFREG|0o400, n.ref.owner, time.Now())
}

func (n *batchFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fillAttr(&out.Attr)
	out.SetTimeout(0)
	return 0
}

func (n *batchFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	in, ok := n.ref.info()
	if !ok || n.rank >= in.WorldSize {
		return nil, 0, syscall.ENOENT
	}
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, 0, n.ref.fsys.ctlError(n.ref.label(n.rank, "batch"), denied("batch is read-only: read it for the next batch"))
	}
	return &batchHandle{n: n}, fuse.FOPEN_DIRECT_IO, 0
}

// batchHandle is one open of a batch file; it holds the batch being read.
type batchHandle struct {
	n *batchFile

	mu    sync.Mutex
	batch *sharedBatch
}

var (
	_ fusefs.FileReader   = (*batchHandle)(nil)
	_ fusefs.FileReleaser = (*batchHandle)(nil)
)

// sharedBatch counts who still uses a batch's pooled buffer: the handle
// that holds it and every reply the FUSE server has yet to send from it.
// The buffer goes back for later batches when the last of them is done, so
// a reply is never sent from a buffer a later batch is writing.
type sharedBatch struct {
	b    *jobs.Batch
	refs atomic.Int32
}

func newSharedBatch(b *jobs.Batch) *sharedBatch {
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

// Read serves the batch from offset 0 on; a read at offset 0 takes the next
// batch, so one open can read many batches by seeking back.
func (h *batchHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off == 0 {
		rctx, done := waitCtx(ctx)
		b, _, err := h.n.ref.fsys.o.Jobs.Batch(rctx, h.n.ref.name, h.n.rank)
		done()
		switch {
		case errors.Is(err, context.Canceled):
			return nil, h.n.ref.fsys.toErrno(err)
		case err != nil:
			return nil, h.n.ref.fsys.ctlError(h.n.ref.label(h.n.rank, "batch"), err)
		}
		h.batch.unref()
		h.batch = nil
		if b != nil {
			h.batch = newSharedBatch(b)
			if len(b.Corrupt) > 0 {
				h.n.ref.fsys.errs.add(h.n.ref.label(h.n.rank, "batch") + ": left out, cannot be preprocessed: " +
					oneLine(strings.Join(b.Corrupt, ", ")))
			}
		}
	}
	if h.batch == nil || off >= int64(len(h.batch.b.NPZ)) {
		return fuse.ReadResultData(nil), 0
	}
	data := h.batch.b.NPZ
	end := min(off+int64(len(dest)), int64(len(data)))
	h.batch.refs.Add(1)
	return &batchReply{s: h.batch, data: data[off:end]}, 0
}

// Release drops the handle's hold on its last batch; the buffer goes back
// once the replies still being sent from it are done.
func (h *batchHandle) Release(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.batch.unref()
	h.batch = nil
	return 0
}
