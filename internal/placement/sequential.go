package placement

import (
	"context"
	"sync/atomic"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// Reading ahead of a reader that goes through the dataset in path order.
//
// A reader that opens files one after another in path order (cat, tar,
// rsync, a loader without shuffling) waits for one source round trip per
// file or more when the file is not resident yet: over a PFS with latency
// that is slower than reading the PFS directly, which its client does not
// beat either. When three opens in a row are of consecutive files (by
// Entry.Index), the placer starts the copies of the next seqAhead files,
// and keeps seqAhead ahead while the run lasts; an open that finds its
// file's copy under way joins it without a source open of its own
// (validate.go: openChecked), so the reader reads at the speed of the
// copies, which overlap. Shuffled readers never make a run: nothing is
// read ahead for them file by file; fill.go fills their directory instead.

// seqAhead is how many files a sequential reader is read ahead.
const seqAhead = 16

// seqRun is the length of a run of consecutive opens that starts the
// reading ahead.
const seqRun = 3

type seqDetector struct {
	last  atomic.Int32 // the Index of the last open, -1 before any
	run   atomic.Int32 // consecutive opens that ended at last
	ahead atomic.Int32 // the highest Index read ahead so far
}

// noteOpen records an open of e and reads ahead when it continues a run:
// only the files the opener (ctx's caller) could open, as a fill does.
func (p *copier) noteOpen(ctx context.Context, e *catalog.Entry) {
	i := e.Index
	if i < 0 || p.walking() {
		return
	}
	s := &p.seq
	prev := s.last.Swap(i)
	if i != prev+1 {
		s.run.Store(1)
		return
	}
	if s.run.Add(1) < seqRun {
		return
	}
	from := max(i+1, s.ahead.Load()+1)
	to := i + seqAhead
	if from > to {
		return
	}
	s.ahead.Store(to)
	who := callerOf(ctx)
	for j := from; j <= to; j++ {
		f := p.cat.ByIndex(int(j))
		if f == nil {
			return // past the last file
		}
		if f.Gone() || f.Tier() >= 0 || f.Residency().NoSpace() || !who.May(f.Attr(), catalog.PermRead) || !p.cat.ReachableAs(who, f) {
			continue
		}
		if !p.copyAhead(f) {
			return // every demand slot is taken
		}
	}
}

// copyAhead starts the copy of f unless one runs; false when no demand
// slot is free.
func (p *copier) copyAhead(f *catalog.Entry) bool {
	if _, ok := p.flights.Load(f); ok {
		return true
	}
	select {
	case p.demand <- struct{}{}:
	default:
		return false
	}
	fl, started := p.startFlight(f)
	if fl == nil || !started {
		if fl != nil {
			fl.release()
		}
		<-p.demand
		return true
	}
	if p.yieldToCheck(fl) {
		fl.release()
		<-p.demand
		return true
	}
	p.seqCopies.Add(1)
	p.queued.Add(1)
	go func() {
		p.run(fl)
		p.queued.Add(-1)
		fl.release()
		<-p.demand
	}()
	return true
}

// yieldToCheck drops the new flight fl, not yet run, when a reader is
// opening its file now: that reader starts the copy with the source file
// it opened (validate.go: openChecked looks for copies after it registered
// its check), so the source sees one open. The caller still holds its
// reference.
func (p *copier) yieldToCheck(fl *flight) bool {
	if _, checking := p.val.checks.Load(fl.e); !checking {
		return false
	}
	p.dropFlight(fl)
	fl.setChecked(false)
	fl.finish(errResident)
	return true
}
