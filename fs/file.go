package fs

import (
	"context"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/placement"
	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// releaseQuiet is how long after a cached-mode release an inode is kept
// out of passthrough. go-fuse (v2.12) drops a reference of the inode's
// passthrough registration at EVERY release, also of handles that never
// took one, after our Release returns. A passthrough open racing with the
// tail of a cached-mode release would have its registration dropped under
// it, and the next passthrough open would register a second backing file,
// which the kernel refuses with EIO. Waiting this long after a release
// closes that window.
const releaseQuiet = time.Second

// Open picks the inode's I/O mode. A resident file opens in passthrough
// when the mount has it and no cached-mode handle of the inode is live;
// otherwise the file opens in cached mode. If a passthrough handle is live
// and the file is not resident, or resident in a newer version than theirs
// (the source changed), the open is a directHandle: the kernel requires every open of
// an inode in passthrough mode to be a passthrough open, and direct I/O
// overrides passthrough for its reads, which come to the daemon.
func (n *node) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return nil, 0, syscall.EROFS
	}
	if n.e.Kind != placement.KindFile {
		return nil, 0, syscall.EISDIR
	}
	rctx, release := reqCtx(ctx)
	r, err := n.fsys.p.Open(rctx, n.e)
	release()
	if err != nil {
		return nil, 0, n.fsys.toErrno(err)
	}
	keep := uint32(fuse.FOPEN_KEEP_CACHE)
	if r.Changed() {
		// The kernel's attributes and pages of the old content were
		// invalidated before Open returned (FS.onEvent); keep no page.
		keep = 0
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	// The dataset is read-only: no FLUSH round trip at close.
	const noflush = fuse.FOPEN_NOFLUSH
	// Live passthrough opens share one registration of one tier copy: a
	// new passthrough open joins it only if it holds the same version.
	a := n.e.Attr()
	if r.ResidentFD() >= 0 && n.fsys.passthroughTier(r.TierIndex()) && n.cached == 0 &&
		(n.pt > 0 && n.ptAttr == a || n.pt == 0 && time.Since(n.lastCachedR) >= releaseQuiet) {
		n.pt++
		n.ptAttr = a
		return &ptHandle{n: n, r: r}, noflush, 0
	}
	if n.pt > 0 {
		return &directHandle{cachedHandle{n: n, r: r, direct: true}}, fuse.FOPEN_DIRECT_IO | noflush, 0
	}
	n.cached++
	return &cachedHandle{n: n, r: r}, keep | noflush, 0
}

// ptHandle is a passthrough open: the kernel reads the tier file itself.
type ptHandle struct {
	n *node
	r *placement.Reader
}

var (
	_ fusefs.FilePassthroughFder = (*ptHandle)(nil)
	_ fusefs.FileReader          = (*ptHandle)(nil)
	_ fusefs.FileReleaser        = (*ptHandle)(nil)
)

func (h *ptHandle) PassthroughFd() (int, bool) {
	return h.r.ResidentFD(), true
}

// Read is used only if the kernel does not pass the read through.
func (h *ptHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	rctx, release := reqCtx(ctx)
	n, err := h.r.ReadAt(rctx, dest, off)
	release()
	if err != nil {
		return nil, h.n.fsys.toErrno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *ptHandle) Release(ctx context.Context) syscall.Errno {
	h.n.mu.Lock()
	h.n.pt--
	h.n.mu.Unlock()
	return h.n.fsys.toErrno(h.r.Close())
}

// directHandle is a direct I/O open beside live passthrough handles. go-fuse
// answers it with the inode's passthrough registration (and counts it, which
// balances the reference it drops at every release); with FOPEN_DIRECT_IO
// the kernel still sends its reads to the daemon. If the registration is
// gone by then, the inode has left passthrough mode in the kernel too, and
// the open is plain direct I/O. An mmap of such a handle maps the old tier
// copy (the kernel maps the backing file of an inode in passthrough mode).
type directHandle struct {
	cachedHandle
}

var _ fusefs.FilePassthroughFder = (*directHandle)(nil)

// PassthroughFd registers nothing: the handle joins a registration only.
func (h *directHandle) PassthroughFd() (int, bool) { return -1, false }

// cachedHandle is a cached-mode (or direct I/O) open served by the daemon.
type cachedHandle struct {
	n      *node
	r      *placement.Reader
	direct bool
}

var (
	_ fusefs.FileReader   = (*cachedHandle)(nil)
	_ fusefs.FileReleaser = (*cachedHandle)(nil)
)

func (h *cachedHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if fd := h.r.ResidentFD(); fd >= 0 {
		// Zero-copy: go-fuse splices from the tier file.
		return fuse.ReadResultFd(uintptr(fd), off, len(dest)), 0
	}
	rctx, release := reqCtx(ctx)
	n, err := h.r.ReadAt(rctx, dest, off)
	release()
	if err != nil {
		return nil, h.n.fsys.toErrno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *cachedHandle) Release(ctx context.Context) syscall.Errno {
	h.n.mu.Lock()
	if !h.direct {
		h.n.cached--
	}
	h.n.lastCachedR = time.Now()
	h.n.mu.Unlock()
	return h.n.fsys.toErrno(h.r.Close())
}
