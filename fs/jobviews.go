package fs

import (
	"context"
	"errors"
	"strings"
	"sync"
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
	batch *jobs.Batch
	data  []byte
}

var (
	_ fusefs.FileReader   = (*batchHandle)(nil)
	_ fusefs.FileReleaser = (*batchHandle)(nil)
)

// Release gives the last batch's buffer back for later batches: no read of
// this handle is in flight once the kernel releases it. (A batch replaced
// by a read at offset 0 is left to the garbage collector, since another
// thread may still be reading it through the same descriptor.)
func (h *batchHandle) Release(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.batch.Release()
	h.batch, h.data = nil, nil
	return 0
}

func (h *batchHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off == 0 {
		rctx, done := reqCtx(ctx)
		b, _, err := h.n.ref.fsys.o.Jobs.Batch(rctx, h.n.ref.name, h.n.rank)
		done()
		switch {
		case errors.Is(err, context.Canceled):
			return nil, h.n.ref.fsys.toErrno(err)
		case err != nil:
			return nil, h.n.ref.fsys.ctlError(h.n.ref.label(h.n.rank, "batch"), err)
		}
		h.batch, h.data = b, nil
		if b != nil {
			h.data = b.NPZ
			if len(b.Corrupt) > 0 {
				h.n.ref.fsys.errs.add(h.n.ref.label(h.n.rank, "batch") + ": left out, cannot be preprocessed: " +
					oneLine(strings.Join(b.Corrupt, ", ")))
			}
		}
	}
	if off >= int64(len(h.data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), int64(len(h.data)))
	return fuse.ReadResultData(h.data[off:end]), 0
}

var _ = jobs.ViewAugmented
