package sampler

import (
	"slices"
	"sort"
)

// Ranks and epochs (torch's DistributedSampler, made cache-aware).
//
// A job of W ranks has one seen set per epoch, shared by its ranks: a rank
// draws from the samples no rank of the job has had (or planned) this
// epoch, so shares are disjoint, and ODS may hand any rank any unseen
// buffered sample of the job. Each rank gets a quota per epoch, the job's
// share: ceil(M/W) of the subset's M samples, or floor(M/W) with
// drop_last. Quotas sum to at least M without drop_last; when a rank has
// its unseen set exhausted before its quota, it is padded with samples
// already handed out that epoch (the first sample of another rank, as torch
// pads with the first indices of the permutation; a sequential job pads
// exactly as torch does). With drop_last they sum to at most M, and what is
// left unseen when every quota is met is that epoch's remainder.
//
// A rank's epoch ends once it got its quota: its next read reports the end,
// the read after that starts the next epoch, created by the first rank
// that gets there. Two epochs at most are in flight: a rank that would
// start a third gets ErrRankAhead and must call again (the jobs layer
// waits, renewing its lease).
//
// A rank that does not read for the lease is lost: its plan goes back to
// the unseen set and what it had yet to get of each epoch in flight is
// shared out over the live ranks that still draw from that epoch, so the
// epoch still covers the subset (counts then differ by one at most among
// the survivors). If no live rank still draws from it, that part of the
// epoch is dropped and counted. Epochs created while a rank is lost give
// it nothing. A lost rank that reads again rejoins: the epochs it lost end
// for it at once, and it gets a share from the next epoch created.

// newEpoch creates the job's next epoch and puts it in flight.
func (s *Sampler) newEpoch(j *job) *epoch {
	num := 1
	if j.latest != nil {
		num = j.latest.num + 1
	} else if len(j.resume) > 0 {
		num = j.resume[0].Num // the interrupted run's epoch (resume.go)
	}
	w := len(j.ranks)
	s.join(j)
	set := j.spare
	if set != nil && set.n == j.size {
		j.spare = nil
		set.reset()
	} else {
		j.spare = nil
		set = newDrawSet(j.size)
	}
	ep := &epoch{num: num, set: set, rng: j.seededRNG(num), quota: make([]int, w), got: make([]int, w),
		planned: map[int32]int32{}, first: make([]int32, w), share: j.share}
	if j.cfg.Claimer != nil {
		ep.here, ep.final, ep.pads = make([]uint64, (set.n+63)/64), make([]bool, w), make([]int, w)
	}
	s.exclude(j, ep)
	s.resumeInto(j, ep)
	if j.cfg.Claimer == nil {
		// Torch's counts over the samples the epoch still has to hand
		// out: all of the subset, less those gone and those an
		// interrupted run handed out.
		left := j.size - ep.excluded - ep.resumed
		ep.share = perRank(left, w, j.cfg.DropLast)
		j.st.Size, j.st.PerRank = j.size-ep.excluded, ep.share
	} else if ep.resumed > 0 {
		// Every node resumes from the same state: their counts agree
		// (what is gone need not, and is padded for).
		ep.share = perRank(j.size-ep.resumed, w, j.cfg.DropLast)
		j.st.PerRank = ep.share
	} else {
		ep.share = j.share
		j.st.PerRank = j.share
	}
	lost := 0
	for i, r := range j.ranks {
		ep.first[i] = -1
		if r.lost {
			lost++
			if j.cfg.Claimer != nil {
				// Its share of this epoch goes to the live ranks of
				// every node (claims.go).
				ep.final[i] = true
				s.lost = append(s.lost, lostReport{k: j.cfg.Claimer, epoch: num, rank: i})
			}
			continue
		}
		if j.remote(r) {
			continue // quota 0 here: it reads on another node (claims.go)
		}
		ep.quota[i] = ep.share
	}
	if lost > 0 {
		ep.lossy = true
		if j.cfg.Claimer == nil {
			s.redistribute(j, ep, lost*ep.share)
		}
	}
	s.rewant(j, func() { j.eps = append(j.eps, ep) })
	if j.latest != nil {
		j.latest.next = ep
	}
	j.latest = ep
	s.invalidateDSA()
	if ep.resumed > 0 && ep.share == 0 {
		// What an interrupted run left of it may be nothing, or less than
		// a sample per rank with drop_last: complete at its creation.
		s.prune(j)
	}
	return ep
}

// join takes the samples added to the dataset since the job's last epoch
// began into its subset (all of them for a job over the whole dataset),
// for the epoch being created: they are appended after every older sample,
// so an epoch in flight keeps its local indices. A cluster job keeps its
// subset (its nodes must agree on it).
func (s *Sampler) join(j *job) {
	if j.cfg.Claimer != nil || j.cfg.Fixed {
		j.joining = nil
		return
	}
	size := j.size
	if j.subset == nil {
		size = s.n
	} else if len(j.joining) > 0 {
		j.subset = append(j.subset, j.joining...)
		size = len(j.subset)
	}
	j.joining = nil
	if size == j.size {
		return
	}
	j.size = size
	j.share = perRank(size, len(j.ranks), j.cfg.DropLast)
	j.st.Size, j.st.PerRank = size, j.share
}

// exclude leaves the samples gone from the dataset (Options.Gone) out of
// a new epoch: they are taken in its set before any draw, and the
// ranks' share is the remaining samples' (torch's counts over them), so
// the epoch hands out each sample left exactly once apart from torch's
// padding. A cluster job keeps its share: the nodes of its epochs need not
// agree on what is gone, and their ranks must get equal counts; a gone
// sample is skipped at its hand-out there, and padding makes up for it.
func (s *Sampler) exclude(j *job, ep *epoch) {
	if s.opt.Gone == nil {
		return
	}
	for l := range j.size {
		if s.gone(j.global(l)) {
			ep.set.take(l)
			ep.excluded++
		}
	}
}

// redistribute shares left samples of ep out over the live ranks that
// still draw from it (they are in it and have not reported its end, or
// are in an older epoch): evenly, the remainder to those with the smallest
// quota. With no such rank they are dropped.
func (s *Sampler) redistribute(j *job, ep *epoch, left int) {
	if left <= 0 {
		return
	}
	var to []*rank
	for _, r := range j.ranks {
		if !r.lost && (r.ep == ep && !r.ended || r.ep.num < ep.num) {
			to = append(to, r)
		}
	}
	if len(to) == 0 {
		ep.dropped += left
		j.st.Dropped += left
		return
	}
	sort.SliceStable(to, func(a, b int) bool { return ep.quota[to[a].id] < ep.quota[to[b].id] })
	each, extra := left/len(to), left%len(to)
	for i, r := range to {
		ep.quota[r.id] += each
		if i < extra {
			ep.quota[r.id]++
		}
	}
}

// loseRank: r did not read for the lease.
func (s *Sampler) loseRank(j *job, r *rank) {
	r.lost = true
	r.st.Losses++
	j.st.RanksLost++
	s.stats.RanksLost++
	for ep := r.ep; ep != nil; ep = ep.next {
		if !j.inFlight(ep) || ep == r.ep && r.ended {
			continue
		}
		ep.lossy = true
		var returned []int32
		if ep == r.ep {
			if j.cfg.Claimer != nil && !ep.fallback {
				returned = s.abandonPlan(j, r)
			}
			for _, e := range r.plan {
				s.untake(j, ep, e)
			}
			r.plan = r.plan[:0]
		}
		left := ep.quota[r.id] - ep.got[r.id]
		ep.quota[r.id] = ep.got[r.id]
		if j.cfg.Claimer != nil {
			ep.final[r.id] = true
			if ep.fallback {
				// Drawn locally: what the lost rank had yet to read is
				// left out.
				ep.dropped += left
				j.st.Dropped += left
				continue
			}
			// The cluster shares what it had yet to read out over the
			// live ranks of every node (claims.go).
			s.lost = append(s.lost, lostReport{k: j.cfg.Claimer, epoch: ep.num, rank: r.id, returned: returned})
			continue
		}
		s.redistribute(j, ep, left)
	}
	s.prune(j)
}

// prune takes the complete epochs out of flight.
func (s *Sampler) prune(j *job) {
	if !slices.ContainsFunc(j.eps, (*epoch).complete) {
		return
	}
	var gone []*epoch
	s.rewant(j, func() {
		keep := j.eps[:0]
		for _, ep := range j.eps {
			if ep.complete() {
				gone = append(gone, ep)
			} else {
				keep = append(keep, ep)
			}
		}
		clear(j.eps[len(keep):])
		j.eps = keep
	})
	for _, ep := range gone {
		// Nothing reads a complete epoch's set or plans again.
		j.spare, ep.set, ep.planned = ep.set, nil, nil
	}
	s.invalidateDSA()
}

// rewant applies mutate, a change of which epochs of j are in flight, to
// the buffer's reference counts: an entry j wanted before and not after
// loses j's reference (and is released at 0), and the reverse.
func (s *Sampler) rewant(j *job, mutate func()) {
	if len(s.buf) == 0 {
		mutate()
		return
	}
	entries := slices.Clone(s.buf)
	before := make([]bool, len(entries))
	for i, e := range entries {
		before[i] = j.wants(e)
	}
	mutate()
	for i, e := range entries {
		after := j.wants(e)
		switch {
		case after && !before[i]:
			s.setRef(e, s.ref(e)+1)
		case before[i] && !after:
			r := s.ref(e) - 1
			s.setRef(e, max(r, 0))
			if r <= 0 && s.state(e) == stBuffered {
				s.bufRemove(e, true)
				s.stats.Released++
			}
		}
	}
}

// advance is the start of a read of r: a lost rank rejoins, a rank that
// read its epoch's end moves to the next epoch (ErrRankAhead when that
// would put it two epochs ahead). Repeating it is harmless.
func (s *Sampler) advance(j *job, r *rank) error {
	if r.lost {
		r.lost = false
		r.st.Rejoined++
	}
	if j.remote(r) {
		s.arrive(j, r)
	}
	r.started = true
	if r.ended {
		nx := r.ep.next
		if nx == nil {
			if len(j.eps) > 0 && j.eps[0].num < r.ep.num {
				return ErrRankAhead
			}
			nx = s.newEpoch(j)
		}
		r.ep, r.ended = nx, false
	}
	return nil
}

// nextRank is NextRank with the lock held and the job found.
func (s *Sampler) nextRank(j *job, r *rank) (batch []int, end bool, err error) {
	if err := s.advance(j, r); err != nil {
		return nil, false, err
	}
	ep := r.ep
	if r.done() {
		r.ended = true
		if j.inFlight(ep) && ep.complete() {
			s.prune(j) // a cluster job's last count became final
		}
		return nil, true, nil
	}
	s.fillRank(j, r)
	k := min(j.cfg.BatchSize, len(r.plan))
	if j.cfg.Kind == KindODS {
		s.substitute(j, r, k)
	}
	batch = make([]int, 0, min(j.cfg.BatchSize, r.need()+len(r.plan)))
	skipped := false
	handOut := func(n int) {
		for _, e := range r.plan[:n] {
			delete(ep.planned, e)
			if s.gone(e) {
				// Removed from the dataset since it was drawn: it stays
				// taken (never drawn again this epoch) and is not handed
				// out; the rank's quota is met by other samples, or by
				// padding once the unseen ones run out.
				skipped = true
				ep.skipped++
				j.st.Skipped++
				s.unwant(j, e)
				continue
			}
			batch = append(batch, int(e))
			ep.got[r.id]++
			ep.distinct++
			if ep.here != nil {
				l, _ := j.local(e)
				ep.here[l>>6] |= 1 << uint(l&63)
			}
			if ep.first[r.id] < 0 {
				ep.first[r.id] = e
			}
			s.serve(j, ep.num, true, e)
		}
		r.plan = append(r.plan[:0], r.plan[n:]...)
	}
	handOut(k)
	for skipped && len(batch) < j.cfg.BatchSize && r.need()+len(r.plan) > 0 {
		s.fillRank(j, r)
		n := min(j.cfg.BatchSize-len(batch), len(r.plan))
		if n == 0 {
			break
		}
		handOut(n)
	}
	for len(batch) < j.cfg.BatchSize && len(r.plan) == 0 && r.need() > 0 {
		if s.fillRank(j, r); len(r.plan) > 0 {
			break // samples came back (a lost rank's): the next read takes them
		}
		if !s.mayPad(j, r) {
			break // a claim may still get samples (claims.go)
		}
		e := s.padding(j, r)
		if e < 0 {
			// Every sample handed out this epoch is gone: what the rank
			// still had to get is dropped.
			ep.dropped += r.need()
			j.st.Dropped += r.need()
			ep.quota[r.id] = ep.got[r.id]
			break
		}
		batch = append(batch, int(e))
		ep.got[r.id]++
		if ep.pads != nil {
			ep.pads[r.id]++
		}
		r.st.Padded++
		j.st.Padded++
		s.serve(j, ep.num, false, e)
	}
	if len(batch) == 0 {
		// Only a cluster job's read gets here: claims of another read
		// are out. Nothing was changed; the caller reads again.
		return nil, false, ErrClaimPending
	}
	r.st.Batches++
	j.st.Batches++
	if ep.complete() {
		s.prune(j)
	} else if !r.done() {
		// Draw the next window now, so that Prefetch sees it before the
		// next read.
		s.fillRank(j, r)
	}
	return batch, false, nil
}

// window is how many samples a rank keeps drawn ahead.
func (s *Sampler) window(j *job) int { return max(s.opt.Lookahead*j.cfg.BatchSize, j.cfg.BatchSize) }

// fillRank draws r's plan up to its window (and its quota).
func (s *Sampler) fillRank(j *job, r *rank) {
	want := s.window(j)
	if len(r.plan) >= want || !r.drawing() || !j.inFlight(r.ep) {
		return
	}
	if j.cfg.Claimer != nil && !r.ep.fallback {
		return // drawn by claims, outside the lock (claims.go)
	}
	if j.cfg.Kind == KindODS && s.dsaActive() && s.dsa.has(j) {
		s.dsaFill(j, r, want)
		return
	}
	for len(r.plan) < want && r.need() > 0 && s.drawOwn(j, r) {
	}
}

// drawOwn draws r's next sample on its own (no DSA) into its plan; false
// when r can draw nothing more this epoch (what it still needs is
// padding).
func (s *Sampler) drawOwn(j *job, r *rank) bool {
	ep := r.ep
	var l int
	if j.cfg.Kind == KindSequential {
		// Rank r's i-th sample is the subset's r + i·W-th, as torch
		// hands them out; past the end it is padding. After a loss the
		// survivors also take what the lost rank left.
		c := r.id + (ep.got[r.id]+len(r.plan))*len(j.ranks)
		switch {
		case c < ep.set.n && !ep.set.has(c):
			l = c
		case ep.set.free > 0 && (c < ep.set.n || ep.lossy):
			l = ep.set.kth(0)
		default:
			return false
		}
	} else {
		if ep.set.free == 0 {
			return false
		}
		l = ep.set.kth(ep.rng.IntN(ep.set.free))
	}
	e := j.global(l)
	s.take(j, ep, r, e)
	r.plan = append(r.plan, e)
	return true
}

// padding is a sample already handed out this epoch, for r, whose unseen
// samples ran out before its quota. A sequential job pads as torch does
// (the subset's (r + i·W) mod M-th); otherwise the first sample of
// another rank, round robin.
//
// A sample gone from the dataset is never padding; -1 means every
// candidate is gone.
func (s *Sampler) padding(j *job, r *rank) int32 {
	ep := r.ep
	w := len(j.ranks)
	if j.cfg.Kind == KindSequential && !ep.lossy {
		if e := j.global((r.id + ep.got[r.id]*w) % ep.set.n); !s.gone(e) {
			return e
		}
	}
	for range w {
		k := ep.padFrom % w
		ep.padFrom++
		if k != r.id && ep.first[k] >= 0 && !s.gone(ep.first[k]) {
			return ep.first[k]
		}
	}
	if ep.first[r.id] >= 0 && !s.gone(ep.first[r.id]) {
		return ep.first[r.id]
	}
	// Nothing handed out yet: every sample is in some rank's plan.
	for e := range ep.planned {
		if !s.gone(e) {
			return e
		}
	}
	if j.cfg.Claimer != nil || s.opt.Gone != nil {
		// Ranks elsewhere had the whole epoch (any sample was drawn), or
		// every sample handed out so far is gone: the first one of the
		// subset that is not.
		for i := range ep.set.n {
			if e := j.global((r.id + ep.got[r.id] + i) % ep.set.n); !s.gone(e) {
				return e
			}
		}
		return -1
	}
	panic("sampler: padding with nothing drawn")
}

// gone reports whether sample e was removed from the dataset.
func (s *Sampler) gone(e int32) bool {
	return s.opt.Gone != nil && s.opt.Gone(int(e))
}

// take moves a free sample of ep into r's plan (the caller appends it).
func (s *Sampler) take(j *job, ep *epoch, r *rank, e int32) {
	l, _ := j.local(e)
	ep.set.take(l)
	ep.planned[e] = int32(r.id)
	if s.dsa != nil {
		s.dsa.remove(j, e)
	}
}

// untake returns a planned sample to ep's unseen set.
func (s *Sampler) untake(j *job, ep *epoch, e int32) {
	l, _ := j.local(e)
	ep.set.untake(l)
	delete(ep.planned, e)
	if s.dsa != nil {
		s.dsa.restore(j, e)
	}
}
