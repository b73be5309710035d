package placement

import (
	"sync"
	"sync/atomic"
	"syscall"
)

// Open tier copies kept between opens.
//
// The open of a resident file is the daemon's hot path: a training epoch
// opens every file of the dataset, and on a few cores the daemon's CPU per
// open bounds the rate. The first open of a copy opens the tier file (open
// and fstat) into a Resident; the Resident is then kept in the entry's slot
// (Entry.res) and every later open of the same version takes a reference on
// it: no system call, no lock, one compare-and-swap. The fs layer hangs the
// kernel's passthrough registration of the descriptor on the same object
// (Resident.Attach), so that a repeat open costs no ioctl either.
//
// The budget (Options.OpenFiles) bounds the Residents kept. Inserting one
// beyond it releases kept ones that no reader holds, least recently used
// first (CLOCK: every open sets the Resident's used bit, the sweeping hand
// clears it and releases a Resident it finds unused). When every kept
// Resident is in use the new one is not kept: its reader owns it and it is
// closed with the reader, as every open was before.
//
// A kept Resident is served only while it is the entry's copy. Every place
// that drops a copy clears the entry's tier and then calls forgetResident,
// which bumps the entry's copy generation (Entry.copyGen) and empties its
// slot; an open that read the tier before the drop and opened the old file
// keeps its Resident only if the generation it read before opening is still
// the entry's after the insert, and a hit checks the generation too. So a
// copy dropped and placed again (the same version copied anew after a
// verify found it bad) is never served from the old file's descriptor.
//
// Lock order: residentCache.mu, then Resident.mu. The hit path takes
// neither.

// DefaultOpenFiles is the budget of kept tier descriptors when
// Options.OpenFiles is 0: half the process's descriptor limit (Go raises
// the soft limit to the hard one at start), between 64 and 1 << 20.
func DefaultOpenFiles() int {
	var rl syscall.Rlimit
	n := 4096
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur > 0 {
		n = int(min(rl.Cur/2, 1<<20))
	}
	return max(n, 64)
}

// Resident is an open installed tier copy of one version of a file, shared
// by the readers of that version. Its descriptor is closed when the last
// reference goes: the budget's (while kept) and one per holder (a Reader,
// or the fs layer pinning the copy its passthrough handles share).
type Resident struct {
	e     *Entry
	fd    int
	tier  int
	size  int64
	mtime int64
	gen   uint64 // the entry's copy generation when the file was opened

	refs atomic.Int32
	used atomic.Bool // opened since the hand last passed
	kept atomic.Bool // in the entry's slot and the cache's ring

	mu       sync.Mutex // guards attached, detach and closed
	attached atomic.Pointer[any]
	detach   func()
	closed   bool

	c *residentCache
}

// FD is the copy's descriptor; valid while the caller holds a reference.
func (c *Resident) FD() int { return c.fd }

// Tier is the index of the tier holding the copy.
func (c *Resident) Tier() int { return c.tier }

// Same reports whether o is a Resident of the same copy (same tier, version
// and copy generation): a kernel registration of either serves both.
func (c *Resident) Same(o *Resident) bool {
	return c == o || o != nil && c.e == o.e && c.tier == o.tier && c.size == o.size && c.mtime == o.mtime && c.gen == o.gen
}

// Hold takes a reference; false if the descriptor is closed already.
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
	c.mu.Unlock()
	if detach != nil {
		detach()
	}
	syscall.Close(c.fd)
	c.c.open.Add(-1)
}

// Attached returns the value attached to the copy, or nil.
func (c *Resident) Attached() any {
	if v := c.attached.Load(); v != nil {
		return *v
	}
	return nil
}

// Attach returns the value attached to the copy, attaching one first if
// there is none: attach is called with the descriptor (under the copy's
// lock, so once per copy while it succeeds) and its value kept; detach runs
// once, when the descriptor is closed. The fs layer attaches the kernel's
// passthrough registration of the descriptor. The caller holds a reference.
func (c *Resident) Attach(attach func(fd int) (v any, detach func(), err error)) (any, error) {
	if v := c.attached.Load(); v != nil {
		return *v, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v := c.attached.Load(); v != nil {
		return *v, nil
	}
	v, detach, err := attach(c.fd)
	if err != nil {
		return nil, err
	}
	c.attached.Store(&v)
	c.detach = detach
	return v, nil
}

// residentCache is the budget of kept Residents.
type residentCache struct {
	budget int

	mu   sync.Mutex  // guards ring and hand
	ring []*Resident // kept Residents (and forgotten ones the hand has not removed yet)
	hand int

	open                           atomic.Int64 // descriptors open: kept or held by readers only
	kept                           atomic.Int64
	hits, misses, released, unkept atomic.Int64
}

// newResidentCache makes a budget of n descriptors: 0 means
// DefaultOpenFiles, below 0 none is kept.
func newResidentCache(n int) *residentCache {
	if n == 0 {
		n = DefaultOpenFiles()
	}
	return &residentCache{budget: max(n, 0)}
}

// ResidentStats are the counters of the kept tier descriptors.
type ResidentStats struct {
	Open     int64 // tier descriptors open now (kept, or held by readers only)
	Kept     int64 // kept between opens now
	Budget   int64 // most kept at once
	Hits     int64 // opens of a resident file that found its descriptor open
	Misses   int64 // opens of a resident file that opened it
	Released int64 // kept descriptors released to make room (least recently used)
	NotKept  int64 // descriptors not kept because every kept one was in use
}

// ResidentStats returns the counters of the kept tier descriptors.
func (p *Placer) ResidentStats() ResidentStats {
	c := p.res
	return ResidentStats{Open: c.open.Load(), Kept: c.kept.Load(), Budget: int64(c.budget),
		Hits: c.hits.Load(), Misses: c.misses.Load(), Released: c.released.Load(), NotKept: c.unkept.Load()}
}

// lookup returns a held reference on e's kept copy in tier i of version a,
// or nil.
func (rc *residentCache) lookup(e *Entry, i int, a Attr) *Resident {
	c := e.res.Load()
	if c == nil || c.tier != i || c.size != a.Size || c.mtime != a.Mtime || c.gen != e.copyGen.Load() || !c.Hold() {
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
// caller's reference is the Resident's first. It is kept when the budget
// has room; when another open kept one of the same copy meanwhile, that one
// is returned instead (with a reference) and fd closed.
func (rc *residentCache) newResident(e *Entry, fd, i int, a Attr, gen uint64) *Resident {
	rc.misses.Add(1)
	rc.open.Add(1)
	c := &Resident{e: e, fd: fd, tier: i, size: a.Size, mtime: a.Mtime, gen: gen, c: rc}
	c.refs.Store(1)
	c.used.Store(true)
	if e.copyGen.Load() != gen {
		// Dropped while it was being opened: serve this open only.
		return c
	}
	rc.mu.Lock()
	if old := e.res.Load(); old != nil {
		if old.Same(c) && old.Hold() {
			rc.mu.Unlock()
			c.Release()
			return old
		}
		// Another version, or closing: this one replaces it.
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
	rc.ring = append(rc.ring, c)
	e.res.Store(c)
	rc.mu.Unlock()
	if e.copyGen.Load() != gen {
		// The copy was dropped while it was being opened.
		rc.forget(e)
	}
	return c
}

// room makes room in the ring for one more Resident: it removes forgotten
// ones and releases unused ones that nobody holds, sweeping at most twice
// around. rc.mu is held.
func (rc *residentCache) room() bool {
	if rc.budget == 0 {
		return false
	}
	for steps := 2*len(rc.ring) + 1; len(rc.ring) >= rc.budget && steps > 0; steps-- {
		if rc.hand >= len(rc.ring) {
			rc.hand = 0
		}
		c := rc.ring[rc.hand]
		switch {
		case !c.kept.Load():
			rc.removeAtHand()
		case c.refs.Load() > 1 || c.used.Swap(false):
			rc.hand++ // in use, or used since the last pass
		case rc.unkeep(c.e, c):
			rc.released.Add(1)
			rc.removeAtHand()
		default:
			rc.hand++
		}
	}
	return len(rc.ring) < rc.budget
}

func (rc *residentCache) removeAtHand() {
	last := len(rc.ring) - 1
	rc.ring[rc.hand] = rc.ring[last]
	rc.ring[last] = nil
	rc.ring = rc.ring[:last]
}

// unkeep takes c out of e's slot and drops the budget's reference; false if
// it was not kept. The ring entry is removed by the hand.
func (rc *residentCache) unkeep(e *Entry, c *Resident) bool {
	e.res.CompareAndSwap(c, nil)
	if !c.kept.CompareAndSwap(true, false) {
		return false
	}
	rc.kept.Add(-1)
	c.Release()
	return true
}

// forget empties e's slot.
func (rc *residentCache) forget(e *Entry) {
	if c := e.res.Load(); c != nil {
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
// was cleared: the copy's kept descriptor is no longer served.
func (p *Placer) forgetResident(e *Entry) {
	e.copyGen.Add(1)
	p.res.forget(e)
}
