package placement

import (
	"context"
	"errors"
	"syscall"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// Prewarm: a remount's kept copies, ready before their first open.
//
// A mount keeps the copies its readers opened (resident.go), so a later
// epoch opens each resident file without a system call. A new mount of
// the same catalog (the next job's prolog) starts with none kept: each
// first open pays the tier file's open and fstat, and in passthrough mode
// the kernel's registration of it, about as much as the rest of the open.
// Prewarm does that work in the background right after the mount, file
// by file in catalog order, so the next job's first epoch costs what a
// later epoch does.
//
// It keeps copies only while the budgets have room without releasing any
// (a prewarmed copy must not push out one a reader uses), and leaves each
// prewarmed copy marked unused, so that the budget's hand releases it
// first if readers need the room. The caller attaches what makes the copy
// ready (the fs layer: the passthrough registration); a copy whose attach
// fails ends the prewarm, since without it the copy would hold a
// descriptor.

// PrewarmStats count a prewarm's work.
type PrewarmStats struct {
	Kept    int   // copies opened, kept and attached
	Left    int   // resident files left as they were (tier not wanted, budget full, stopped)
	Stopped error // why it stopped early: ctx's error, errPrewarmFull, or nil
}

// Prewarm opens and keeps the copies of resident files in the tiers want
// accepts, calling attach on each newly kept copy (held for the call); it
// returns when every resident file was seen, the budgets are full, attach
// fails, or ctx or the placer ends. A copy that cannot be opened is left
// to its first reader, which drops it if it is missing. It starts once the
// tree is whole (a remount's catalog loads in the background): the
// readers meanwhile open their copies themselves.
func (p *opener) Prewarm(ctx context.Context, want func(tier int) bool, attach func(e *catalog.Entry, c *Resident) error) PrewarmStats {
	rc := p.res
	var st PrewarmStats
	select {
	case <-p.cat.WalkDone():
	case <-ctx.Done():
		st.Stopped = ctx.Err()
		return st
	case <-p.ctx.Done():
		st.Stopped = p.ctx.Err()
		return st
	}
	p.cat.Root().Files(func(e *catalog.Entry) bool {
		i := e.Tier()
		switch {
		case i < 0:
			return true
		case st.Stopped != nil:
		case ctx.Err() != nil:
			st.Stopped = ctx.Err()
		case p.ctx.Err() != nil:
			st.Stopped = p.ctx.Err()
		case !rc.roomWithoutRelease():
			st.Stopped = errPrewarmFull
		}
		if st.Stopped != nil || !want(i) {
			st.Left++
			return true
		}
		if rc.keptOf(e) != nil {
			return true // a reader was first
		}
		a := e.Attr()
		gen := e.Residency().CopyGen()
		fd, size, err := p.o.Tiers[i].OpenFD(e.Path())
		if err != nil || size != a.Size {
			if err == nil {
				syscall.Close(fd)
			}
			st.Left++
			return true
		}
		c := rc.newResident(e, fd, i, a, gen, true)
		if !c.kept.Load() {
			// Dropped meanwhile, or the budget filled: a copy not kept
			// would close with this reference.
			c.Release()
			st.Left++
			return true
		}
		err = attach(e, c)
		c.Release()
		if err != nil {
			st.Stopped = err
			st.Left++
			return true
		}
		st.Kept++
		return true
	})
	return st
}

// errPrewarmFull ends a prewarm when the budgets have no room left.
var errPrewarmFull = errors.New("placement: kept copies budget full")

// roomWithoutRelease reports whether one more copy can be kept, and its
// descriptor opened, without releasing a kept one.
func (rc *residentCache) roomWithoutRelease() bool {
	return rc.kept.Load() < int64(rc.keepMax) && rc.open.Load() < int64(rc.fdMax)
}
