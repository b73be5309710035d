package fs

import (
	"context"
	"errors"
	"sync"
	"syscall"

	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/status"
	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// I/O modes of an inode.
//
// The kernel (fs/fuse/iomode.c) lets an inode be open in passthrough mode
// or in cached mode, never both: an open in one mode while a handle of the
// other is live fails with EIO, and every passthrough open of an inode must
// name the backing file its live passthrough handles use (another one fails
// with EIO too). The kernel leaves a mode when the last handle of it is
// closed, before it sends the RELEASE: so the counts below, which drop at
// RELEASE, never undercount the kernel's, and an inode with no handle
// counted here has none in the kernel either.
//
// The backing file of a resident copy is registered with the kernel once
// (FS.registerBacking), attached to the copy's kept descriptor
// (backing.go: placement.Resident.Lend and Keep), and unregistered when the placer closes that
// descriptor (its budget released it, or the copy was dropped). While an
// inode has passthrough handles it holds a reference on the copy they
// share, so the registration outlives every one of them. A repeat open of a
// resident file therefore costs the daemon no system call: the backing ID
// comes from the registration (the handle's BackingID, which go-fuse's
// bridge adds to the reply).
//
// Lock order: ioMode.mu, then the placer's (Resident.Lend, Keep and Release).

// ioMode counts an inode's open handles by I/O mode.
type ioMode struct {
	mu     sync.Mutex
	pt     int                 // live handles in passthrough mode (ptHandle, and cachedHandle with direct)
	ptRes  *placement.Resident // the copy they share, held while pt > 0
	cached int                 // live cached-mode handles
}

// Open picks the inode's I/O mode. A resident file opens in passthrough
// when the mount has it and no cached-mode handle of the inode is live;
// otherwise the file opens in cached mode. If passthrough handles are live
// and this open cannot join them (the file is not resident, or resident in
// another version than theirs: the source changed), the open is a direct
// I/O one in passthrough mode: the kernel requires every open of an inode
// in passthrough mode to be a passthrough open, and direct I/O overrides
// passthrough for its reads, which come to the daemon.
func (n *node) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return nil, 0, syscall.EROFS
	}
	if n.e.Kind() != catalog.KindFile {
		return nil, 0, syscall.EISDIR
	}
	rctx, release := reqCtx(ctx, n.fsys.budget())
	r, err := n.fsys.p.Open(rctx, n.e)
	for try := 0; try < 3 && errors.Is(err, placement.ErrAccessChanged) && callerCred(ctx).MayRead(n.e.Attr()); try++ {
		// The kernel checked old attributes, and the new ones let the
		// caller read too. (A copy in flight when the change was found
		// fails the same way once more: each failure records what the
		// source has now.)
		r, err = n.fsys.p.Open(rctx, n.e)
	}
	release()
	if err != nil {
		return nil, 0, n.fsys.ioError(ctx, n.e.Path(), err)
	}
	r.SetOpener(opener(ctx)) // (a chmod on the source before its first read)
	if !mayRead(ctx, r.Attr()) {
		// The kernel checked attributes older than those the reader
		// serves (a copy found the source's owner or mode changed).
		r.Close()
		return nil, 0, syscall.EACCES
	}
	if a := r.Attr(); a.Size != n.size || a.Mtime != n.mtime {
		// The source has another content than this inode's, and its
		// path leads to another inode now (ino.go: fileIno). ESTALE
		// makes the kernel look the path up again and open the new
		// inode (once); this inode's handles serve its own content.
		r.Close()
		return nil, 0, syscall.ESTALE
	}
	// A change found outside an open (a copy, a read, a refresh) is told
	// to the kernel from a goroutine: it may not have arrived yet. Tell
	// it now, before this open can use the old pages or size.
	untold := n.untold.Swap(false)
	if untold {
		n.NotifyContent(0, 0)
	}
	// The dataset is read-only: no FLUSH round trip at close.
	const noflush = fuse.FOPEN_NOFLUSH
	m := &n.io
	m.mu.Lock()
	defer m.mu.Unlock()
	if res := r.Resident(); res != nil && m.cached == 0 && n.fsys.passthroughTier(res.Tier()) {
		if m.pt > 0 && m.ptRes.Same(res) {
			m.pt++
			n.fsys.ptHandles.Add(1)
			return &ptHandle{n: n, r: r}, fuse.FOPEN_PASSTHROUGH | noflush, 0
		}
		if m.pt == 0 {
			// A copy registered under another inode (a prewarm that
			// raced with a change of the file) opens in cached mode.
			if b := n.fsys.backingOf(n, res); b != nil && b.Ino == n.StableAttr().Ino && res.Hold() {
				m.pt, m.ptRes = 1, res
				n.fsys.backings.Store(b.Ino, b)
				n.fsys.ptHandles.Add(1)
				return &ptHandle{n: n, r: r}, fuse.FOPEN_PASSTHROUGH | noflush, 0
			}
		}
	}
	if m.pt > 0 {
		m.pt++
		n.fsys.ptHandles.Add(1)
		return &cachedHandle{n: n, r: r, direct: true}, fuse.FOPEN_DIRECT_IO | fuse.FOPEN_PASSTHROUGH | noflush, 0
	}
	m.cached++
	n.fsys.cachedHandles.Add(1)
	keep := uint32(fuse.FOPEN_KEEP_CACHE)
	if r.Changed() || untold {
		// The kernel's attributes and pages of the old content were
		// invalidated before Open returned (FS.OnEvent); keep no page.
		keep = 0
	}
	return &cachedHandle{n: n, r: r}, keep | noflush, 0
}

// releasePT ends a handle in passthrough mode; the last one lets go of the
// copy the handles shared.
func (m *ioMode) releasePT(fsys *FS) {
	fsys.ptHandles.Add(-1)
	m.mu.Lock()
	m.pt--
	var res *placement.Resident
	if m.pt == 0 {
		res, m.ptRes = m.ptRes, nil
	}
	m.mu.Unlock()
	if res != nil {
		res.Release()
	}
}

// ptHandle is a passthrough open: the kernel reads the tier file itself.
type ptHandle struct {
	n *node
	r *placement.Reader
}

var (
	_ fusefs.FileReader      = (*ptHandle)(nil)
	_ fusefs.FileReleaser    = (*ptHandle)(nil)
	_ fusefs.FileBackingIDer = (*ptHandle)(nil)
)

// Read is used only if the kernel does not pass the read through.
func (h *ptHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	rctx, release := reqCtx(ctx, h.n.fsys.budget())
	n, err := h.r.ReadAt(rctx, dest, off)
	release()
	if err != nil {
		return nil, h.n.fsys.ioError(ctx, h.n.e.Path(), err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *ptHandle) Release(ctx context.Context) syscall.Errno {
	h.n.io.releasePT(h.n.fsys)
	return h.n.fsys.toErrno(h.r.Close())
}

// cachedHandle is a cached-mode open served by the daemon, or with direct
// a direct I/O open in passthrough mode beside live passthrough handles (an
// mmap of it maps the backing file of those: the kernel maps the backing
// file of an inode in passthrough mode).
// BackingID is the passthrough registration of the handle's inode
// (fusefs.FileBackingIDer: the bridge answers the open with it).
func (h *ptHandle) BackingID() (int32, bool) { return h.n.fsys.backingID(h.n.StableAttr().Ino) }

type cachedHandle struct {
	n      *node
	r      *placement.Reader
	direct bool
}

// BackingID is the inode's passthrough registration for a handle opened
// in direct I/O beside passthrough handles (the kernel wants every open
// of a passthrough inode to name it); none for a cached-mode handle.
func (h *cachedHandle) BackingID() (int32, bool) {
	if !h.direct {
		return 0, false
	}
	return h.n.fsys.backingID(h.n.StableAttr().Ino)
}

var (
	_ fusefs.FileReader      = (*cachedHandle)(nil)
	_ fusefs.FileReleaser    = (*cachedHandle)(nil)
	_ fusefs.FileBackingIDer = (*cachedHandle)(nil)
)

func (h *cachedHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if fd := h.r.ResidentFD(); fd >= 0 {
		// Zero-copy: go-fuse splices from the tier file.
		return fuse.ReadResultFd(uintptr(fd), off, len(dest)), 0
	}
	rctx, release := reqCtx(ctx, h.n.fsys.budget())
	n, err := h.r.ReadAt(rctx, dest, off)
	release()
	if err != nil {
		return nil, h.n.fsys.ioError(ctx, h.n.e.Path(), err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *cachedHandle) Release(ctx context.Context) syscall.Errno {
	m := &h.n.io
	if h.direct {
		m.releasePT(h.n.fsys)
	} else {
		h.n.fsys.cachedHandles.Add(-1)
		m.mu.Lock()
		m.cached--
		m.mu.Unlock()
	}
	return h.n.fsys.toErrno(h.r.Close())
}

// openStatus is the status of the open path: resident copies kept ready
// (placement.ResidentStats), handles by mode and passthrough registrations.
func (fsys *FS) openStatus(d *status.Doc) {
	rs := fsys.p.ResidentStats()
	d.Int("kept_copies", rs.Kept)
	d.Int("kept_copies_budget", rs.KeptBudget)
	d.Int("kept_hits", rs.Hits)
	d.Int("kept_misses", rs.Misses)
	d.Int("kept_released", rs.Released)
	d.Int("kept_refused", rs.NotKept)
	d.Int("tier_fds", rs.Open)
	d.Int("tier_fds_budget", rs.OpenBudget)
	d.Int("tier_fd_reopens", rs.Reopens)
	d.Int("handles_passthrough", fsys.ptHandles.Load())
	d.Int("handles_cached", fsys.cachedHandles.Load())
	d.Int("xattr_requests", fsys.xattrs.Load())
	d.Int("dir_opens", fsys.dirOpens.Load())
	d.Int("dir_entries", fsys.dirEntries.Load())
	d.Int("passthrough_backings", fsys.ptBackings.Load())
	d.Int("passthrough_registrations", fsys.ptRegistered.Load())
	d.Int("passthrough_refused", fsys.ptRefused.Load())
	d.Int("batches_passthrough", fsys.batchesPassthrough.Load())
}
