package placement

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/puzpuzpuz/xsync/v3"
)

// Resident copies kept ready between opens.
//
// The open of a resident file is the daemon's hot path: a training epoch
// opens every file of the dataset, and on a few cores the daemon's CPU per
// open bounds the rate. The first open of a copy opens the tier file (open
// and fstat) into a Resident, which is then kept in the cache's map by
// entry (a lock-free read): every later open of the same version takes a
// reference on it with one compare-and-swap, no system call and no lock. The fs layer
// registers the descriptor with the kernel for passthrough and keeps the
// registration with the Resident (Lend, then Keep), so a repeat open costs
// no ioctl either.
//
// A registration holds the file in the kernel, so an attached Resident
// does not keep its descriptor for later opens: the descriptor is closed
// once no reader uses it, and a reader that needs one (a read the kernel
// did not pass through, a cached-mode open of the same inode) opens it
// again. A passthrough mount therefore keeps copies ready without holding
// descriptors, and a process limit of a few thousand descriptors does not
// bound how many copies stay ready.
//
// Two budgets bound what is kept: KeptCopies Residents in all, and
// OpenFiles descriptors open (kept, or used by readers). Making room
// releases kept Residents that no reader holds, least recently used first
// (CLOCK: every open sets the Resident's used bit, the sweeping hand
// clears it and releases a Resident it finds unused). When nothing can be
// released the new Resident is not kept: its reader owns it and it closes
// with the reader, as every open did before.
//
// A kept Resident is served only while it is the entry's copy. Every place
// that drops a copy clears the entry's tier and then calls forgetResident,
// which bumps the entry's copy generation (residency.State.CopyGen) and
// takes its kept Resident out of the map; an open that read the tier before the drop and
// opened the old file keeps its Resident only if the generation it read
// before opening is still the entry's after the insert; a hit, and a
// reopen of the descriptor, check the generation too. So a copy dropped
// and placed again (the same version copied anew after a verify found it
// bad) is never served from the old file.
//
// Lock order: residentCache.mu, then Resident.mu. The hit path takes
// neither.

// MaxDefaultKeptCopies caps the default budgets: a kept copy pins its tier
// file's inode and dentry in the kernel (about 1 KiB) through its
// descriptor or its registration, so the default pins at most ~256 MiB.
const MaxDefaultKeptCopies = 1 << 18

// DefaultOpenFiles is the descriptor budget when Options.OpenFiles is 0:
// half the process's descriptor limit, at least 64 and at most
// MaxDefaultKeptCopies. The limit is the process's to raise (the daemon
// raises it to the kernel's ceiling at start, cmd/epochfs).
func DefaultOpenFiles() int {
	var rl syscall.Rlimit
	n := uint64(4096)
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur > 0 {
		n = rl.Cur / 2
	}
	return int(max(min(n, MaxDefaultKeptCopies), 64))
}

// errCopyGone means a Resident's copy was dropped before its descriptor
// could be opened again.
var errCopyGone = fmt.Errorf("placement: tier copy dropped")

// Resident is an installed tier copy of one version of a file, kept ready
// for the readers of that version. The copy is released when the last
// reference goes: the budget's (while kept) and one per holder (a Reader,
// or the fs layer pinning the copy its passthrough handles share).
type Resident struct {
	e     *catalog.Entry
	tier  int
	size  int64
	mtime int64
	gen   uint64 // the entry's copy generation when the file was opened

	refs atomic.Int32
	used atomic.Bool // opened since the hand last passed
	kept atomic.Bool // in the cache's map and ring

	mu       sync.Mutex // guards fd, fdUsers, detach and closed
	fd       int        // -1 while closed
	fdUsers  int        // readers using fd
	attached atomic.Pointer[Registration]
	detach   func()
	closed   bool

	c *residentCache
}

// Tier is the index of the tier holding the copy.
func (c *Resident) Tier() int { return c.tier }

// Same reports whether o is a Resident of the same copy (same tier, version
// and copy generation): a kernel registration of either serves both.
func (c *Resident) Same(o *Resident) bool {
	return c == o || o != nil && c.e == o.e && c.tier == o.tier && c.size == o.size && c.mtime == o.mtime && c.gen == o.gen
}

// Hold takes a reference; false if the copy was released already.
func (c *Resident) Hold() bool {
	for {
		n := c.refs.Load()
		if n <= 0 {
			return false
		}
		if c.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release drops a reference; the last one closes the descriptor and runs
// the detach function of what was attached.
func (c *Resident) Release() {
	if c.refs.Add(-1) != 0 {
		return
	}
	c.mu.Lock()
	c.closed = true
	detach := c.detach
	c.detach = nil
	c.closeFDLocked()
	c.mu.Unlock()
	if detach != nil {
		detach()
	}
}

// closeFDLocked closes the descriptor if it is open. c.mu is held.
func (c *Resident) closeFDLocked() {
	if c.fd >= 0 {
		syscall.Close(c.fd)
		c.fd = -1
		c.c.open.Add(-1)
	}
}

// useFD returns the copy's descriptor for a reader, opening it again if it
// was closed; the reader calls unuseFD when done. It fails when the copy
// was dropped meanwhile or cannot be opened.
func (c *Resident) useFD(p *opener) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		if c.closed || c.e.Residency().CopyGen() != c.gen {
			return -1, errCopyGone
		}
		fd, size, err := p.o.Tiers[c.tier].OpenFD(c.e.Path())
		if err != nil {
			return -1, err
		}
		if size != c.size {
			syscall.Close(fd)
			return -1, errCopyGone
		}
		c.fd = fd
		c.c.open.Add(1)
		c.c.reopens.Add(1)
	}
	c.fdUsers++
	return c.fd, nil
}

// unuseFD ends a reader's use of the descriptor. With a registration
// attached the descriptor is not kept for later opens.
func (c *Resident) unuseFD() {
	c.mu.Lock()
	c.fdUsers--
	if c.fdUsers == 0 && c.attached.Load() != nil {
		c.closeFDLocked()
	}
	c.mu.Unlock()
}

// Registration is the kernel's registration of a copy's descriptor as a
// passthrough backing file, made by the fs layer (internal/fs/backing.go) and kept
// with the copy: its backing ID, and the inode it was registered for.
type Registration struct {
	ID  int32
	Ino uint64
}

// Attached returns the registration attached to the copy, or nil.
func (c *Resident) Attached() *Registration { return c.attached.Load() }

// Lend returns the copy's descriptor for the caller to register while no
// registration is attached (ok false: one is, Attached returns it); the
// descriptor stays open until the caller's Keep or Return. The caller
// holds a reference. The fs layer registers the descriptor with the kernel
// as a passthrough backing file and keeps the registration with the copy:
// since that holds the file, the descriptor is then closed once no reader
// uses it.
func (c *Resident) Lend() (fd int, ok bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.attached.Load() != nil {
		return -1, false, nil
	}
	if c.fd < 0 {
		// Not reached: a Resident closes its descriptor only once
		// something is attached.
		return -1, false, errCopyGone
	}
	c.fdUsers++
	return c.fd, true, nil
}

// Keep ends a Lend: it attaches r, the registration of the descriptor
// lent, and returns the registration attached, r or one another caller
// kept first (the caller then undoes r itself); detach runs once, when the
// copy is released.
func (c *Resident) Keep(r *Registration, detach func()) *Registration {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fdUsers--
	v := c.attached.Load()
	if v == nil {
		v = r
		c.attached.Store(r)
		c.detach = detach
	}
	if c.fdUsers == 0 {
		c.closeFDLocked()
	}
	return v
}

// Return ends a Lend that made no registration (the kernel refused it).
func (c *Resident) Return() { c.unuseFD() }

// residentCache holds the kept Residents within their budgets.
type residentCache struct {
	keepMax int // Residents kept at most
	fdMax   int // descriptors open at most, kept or used

	mu   sync.Mutex  // guards ring and hand
	ring []*Resident // kept Residents (and forgotten ones the hand has not removed yet)
	hand int
	// kept Residents by entry: a map, not a field of every entry, as few
	// of a dataset's files are kept at once (keepMax).
	byEntry *xsync.MapOf[*catalog.Entry, *Resident]

	open, kept                              atomic.Int64
	hits, misses, reopens, released, unkept atomic.Int64
	prewarmed                               atomic.Int64
}

// newResidentCache makes the budgets: 0 means the default (see
// Options.OpenFiles and Options.KeptCopies), below 0 nothing is kept.
func newResidentCache(openFiles, keptCopies int) *residentCache {
	if openFiles == 0 {
		openFiles = DefaultOpenFiles()
	}
	if keptCopies == 0 {
		keptCopies = MaxDefaultKeptCopies
	}
	return &residentCache{fdMax: max(openFiles, 0), keepMax: max(keptCopies, 0), byEntry: xsync.NewMapOf[*catalog.Entry, *Resident]()}
}

// ResidentStats are the counters of the copies kept ready between opens.
type ResidentStats struct {
	Kept       int64 // copies kept now
	KeptBudget int64 // most kept at once
	Open       int64 // tier descriptors open now (kept, or used by readers)
	OpenBudget int64 // most open at once
	Hits       int64 // opens of a resident file that found its copy kept
	Misses     int64 // opens of a resident file that opened the tier file
	Reopens    int64 // descriptors of kept copies opened again for a reader
	Released   int64 // kept copies released to make room (least recently used)
	NotKept    int64 // copies not kept because nothing could be released
	Prewarmed  int64 // copies kept ready at mount, before any open (prewarm.go)
}

// ResidentStats returns the counters of the copies kept ready.
func (p *opener) ResidentStats() ResidentStats {
	c := p.res
	return ResidentStats{Kept: c.kept.Load(), KeptBudget: int64(c.keepMax), Open: c.open.Load(), OpenBudget: int64(c.fdMax),
		Hits: c.hits.Load(), Misses: c.misses.Load(), Reopens: c.reopens.Load(), Released: c.released.Load(), NotKept: c.unkept.Load(), Prewarmed: c.prewarmed.Load()}
}

// lookup returns a held reference on e's kept copy in tier i of version a,
// or nil.
func (rc *residentCache) lookup(e *catalog.Entry, i int, a catalog.Attr) *Resident {
	c := rc.keptOf(e)
	if c == nil || c.tier != i || c.size != a.Size || c.mtime != a.Mtime || c.gen != e.Residency().CopyGen() || !c.Hold() {
		return nil
	}
	if !c.used.Load() {
		c.used.Store(true)
	}
	rc.hits.Add(1)
	return c
}

// newResident wraps a descriptor just opened on e's copy in tier i of
// version a; gen is the entry's copy generation read before the open. The
// caller's reference is the Resident's first. It is kept when the budgets
// have room; when another open kept one of the same copy meanwhile, that
// one is returned instead (with a reference) and fd closed. A prewarm's
// Resident (prewarm.go) is not a reader's miss, and starts unused.
func (rc *residentCache) newResident(e *catalog.Entry, fd, i int, a catalog.Attr, gen uint64, prewarm bool) *Resident {
	if !prewarm {
		rc.misses.Add(1)
	}
	rc.open.Add(1)
	c := &Resident{e: e, fd: fd, tier: i, size: a.Size, mtime: a.Mtime, gen: gen, c: rc}
	c.refs.Store(1)
	c.used.Store(!prewarm)
	if e.Residency().CopyGen() != gen {
		// Dropped while it was being opened: serve this open only.
		return c
	}
	rc.mu.Lock()
	if old := rc.keptOf(e); old != nil {
		if old.Same(c) && old.Hold() {
			rc.mu.Unlock()
			c.Release()
			return old
		}
		// Another version, or released: this one replaces it.
		rc.unkeep(e, old)
	}
	if !rc.room() {
		rc.mu.Unlock()
		rc.unkept.Add(1)
		return c
	}
	c.refs.Add(1) // the budget's
	c.kept.Store(true)
	rc.kept.Add(1)
	if prewarm {
		rc.prewarmed.Add(1)
	}
	rc.ring = append(rc.ring, c)
	rc.storeKept(e, c)
	rc.mu.Unlock()
	if e.Residency().CopyGen() != gen {
		// The copy was dropped while it was being kept.
		rc.forget(e)
	}
	return c
}

// room makes room for one more kept Resident holding a descriptor: it
// removes forgotten Residents from the ring and releases unused ones that
// nobody holds (for the descriptor budget, only ones holding a
// descriptor), sweeping at most twice around. rc.mu is held.
func (rc *residentCache) room() bool {
	full := func() (copies, fds bool) {
		// The new descriptor is counted in open already.
		return len(rc.ring) >= rc.keepMax, rc.open.Load() > int64(rc.fdMax)
	}
	copies, fds := full()
	for steps := 2*len(rc.ring) + 1; (copies || fds) && len(rc.ring) > 0 && steps > 0; steps-- {
		if rc.hand >= len(rc.ring) {
			rc.hand = 0
		}
		c := rc.ring[rc.hand]
		switch {
		case !c.kept.Load():
			rc.removeAtHand()
		case c.refs.Load() > 1 || c.used.Swap(false):
			rc.hand++ // in use, or used since the last pass
		case !copies && !c.holdsFD():
			rc.hand++ // releasing it frees no descriptor
		case rc.unkeep(c.e, c):
			rc.released.Add(1)
			rc.removeAtHand()
		default:
			rc.hand++
		}
		copies, fds = full()
	}
	return !copies && !fds
}

func (c *Resident) holdsFD() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fd >= 0
}

func (rc *residentCache) removeAtHand() {
	last := len(rc.ring) - 1
	rc.ring[rc.hand] = rc.ring[last]
	rc.ring[last] = nil
	rc.ring = rc.ring[:last]
}

// unkeep takes c out of the map (if e's) and drops the budget's reference; false if
// it was not kept. The ring entry is removed by the hand.
func (rc *residentCache) unkeep(e *catalog.Entry, c *Resident) bool {
	rc.casKept(e, c, nil)
	if !c.kept.CompareAndSwap(true, false) {
		return false
	}
	rc.kept.Add(-1)
	c.Release()
	return true
}

// forget takes e's kept Resident out of the map.
func (rc *residentCache) forget(e *catalog.Entry) {
	if c := rc.keptOf(e); c != nil {
		rc.unkeep(e, c)
	}
}

// close releases every kept Resident (shutdown).
func (rc *residentCache) close() {
	rc.mu.Lock()
	ring := rc.ring
	rc.ring, rc.hand = nil, 0
	rc.mu.Unlock()
	for _, c := range ring {
		rc.unkeep(c.e, c)
	}
}

// forgetResident is called wherever a copy of e is dropped, after its tier
// was cleared: the copy's kept Resident is no longer served.
func (p *opener) forgetResident(e *catalog.Entry) {
	e.Residency().BumpCopyGen()
	p.res.forget(e)
}

// keptOf is e's kept Resident, or nil.
func (rc *residentCache) keptOf(e *catalog.Entry) *Resident {
	c, _ := rc.byEntry.Load(e)
	return c
}

// storeKept makes c e's kept Resident.
func (rc *residentCache) storeKept(e *catalog.Entry, c *Resident) { rc.byEntry.Store(e, c) }

// casKept replaces e's kept Resident old by c (nil: none), if old is still
// it.
func (rc *residentCache) casKept(e *catalog.Entry, old, c *Resident) (swapped bool) {
	rc.byEntry.Compute(e, func(cur *Resident, loaded bool) (*Resident, bool) {
		if cur != old {
			return cur, !loaded
		}
		swapped = true
		return c, c == nil
	})
	return swapped
}
