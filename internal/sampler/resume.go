package sampler

import (
	"fmt"
	"math/bits"
	"slices"
)

// Resumable jobs: a job's place in its epochs, taken out of the sampler
// (Snapshot) and put into a new job that has not read yet (Resume), on
// this node or another, with the same ranks or another number of them.
//
// A snapshot holds, per epoch in flight (one, or two while a rank is one
// epoch ahead), the samples handed out so far, as a bit set over the
// job's local indices (its subset in index order). Samples drawn ahead
// and not handed out yet (the ranks' plans) are not in it: the resumed
// run draws them again. A resumed job starts at the snapshot's first
// epoch with those samples taken before any draw, as gone samples are
// (exclude), and its ranks' quotas are torch's counts over what is left:
// the same number each, ceil(left/W) padded or floor(left/W) with
// drop_last, whatever the interrupted run's world size was. So across the
// interrupted and the resumed run every sample of the epoch is handed out
// exactly once, apart from torch's padding. A snapshot's second epoch, if
// any, is applied when the resumed job creates that epoch. Later epochs
// are new ones.
//
// The order of what is left is drawn as a new job's: seeded by (seed,
// name, epoch), with ODS substitution. A sequential job hands out what is
// left in index order, rank r the r-th of every W'.

// ResumeEpoch is one epoch of an interrupted run.
type ResumeEpoch struct {
	// Num is the epoch's number (1-based).
	Num int
	// Handed is a bit set over the job's local indices: bit l is set when
	// the interrupted run handed out the subset's l-th sample (in index
	// order) in this epoch. Bits at or past the subset's size must be 0.
	Handed []uint64
	// Later, in the same form, are samples that join the job from the
	// next epoch (a refresh added them after the interrupted run saved
	// its state): this epoch leaves them out.
	Later []uint64
	// Vanished counts samples the interrupted run had not handed out that
	// a refresh removed since: counted as skipped.
	Vanished int
}

// EpochSnapshot is one epoch in flight of a live job.
type EpochSnapshot struct {
	Num int
	// Handed: bit l is set when the job's local sample l was handed out in
	// this epoch (by this run or, resumed, by the run it continues).
	Handed []uint64
	// Count is the number of bits set in Handed.
	Count int
	// Got is, per rank, the samples it was handed in this epoch by this
	// run, padding included.
	Got []int
	// Resumed: of Count, those the interrupted run this job continues
	// handed out.
	Resumed int
	// Here (a cluster job's): the samples handed out on this node, and
	// Planned, those its ranks drew ahead (claimed, not handed out).
	Here, Planned []uint64
}

// Snapshot is a job's place in its epochs.
type Snapshot struct {
	// Subset is the job's samples in index order: local index l is
	// sample Subset[l]; nil means every sample (l is the sample). The
	// caller must not modify it.
	Subset []int32
	// Size is the number of local indices of the epochs (the subset's
	// size when the oldest began).
	Size      int
	WorldSize int
	// Epochs are the epochs in flight, oldest first; when none is (every
	// rank ended the last one and none read since), the next one, with
	// nothing handed out. Never empty.
	Epochs []EpochSnapshot
	// Started: a rank of the job has read.
	Started bool
	// Cluster: the job's epochs are shared with other nodes (a
	// Claimer); a snapshot knows only this node's part of them.
	Cluster bool
}

// Snapshot returns a job's place in its epochs. It does not renew any
// lease. O(subset/64 + planned).
func (s *Sampler) Snapshot(name string) (Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reap(s.opt.Now())
	j, err := s.lookup(name)
	if err != nil {
		return Snapshot{}, err
	}
	sn := Snapshot{WorldSize: len(j.ranks), Cluster: j.cfg.Claimer != nil, Size: j.size}
	for _, r := range j.ranks {
		sn.Started = sn.Started || r.started
	}
	for _, ep := range j.eps {
		if len(sn.Epochs) == 0 {
			sn.Size = ep.set.n
		}
		sn.Epochs = append(sn.Epochs, s.snapshotEpoch(j, ep))
	}
	if len(sn.Epochs) == 0 {
		num := 1
		if j.latest != nil {
			num = j.latest.num + 1
		}
		sn.Epochs = []EpochSnapshot{{Num: num, Handed: make([]uint64, (j.size+63)/64), Got: make([]int, len(j.ranks))}}
	}
	if j.subset != nil {
		sn.Subset = j.subset[:sn.Size:sn.Size]
	}
	return sn, nil
}

// snapshotEpoch copies what ep handed out: its taken samples, less those
// planned and those gone (a sample gone from the dataset is never handed
// out again: whether it was is of no use to a resumed run). A cluster
// job's taken samples also hold those pending in a claim and those had
// elsewhere: its snapshot is this node's view only (Snapshot.Cluster).
func (s *Sampler) snapshotEpoch(j *job, ep *epoch) EpochSnapshot {
	words := make([]uint64, (ep.set.n+63)/64)
	copy(words, ep.set.bits)
	if r := ep.set.n % 64; r != 0 {
		words[len(words)-1] &= 1<<uint(r) - 1
	}
	clear := func(e int32) {
		if l, ok := j.local(e); ok && l < ep.set.n {
			words[l>>6] &^= 1 << uint(l&63)
		}
	}
	for e := range ep.planned {
		clear(e)
	}
	count := 0
	for w, word := range words {
		for x := word; x != 0 && s.opt.Gone != nil; x &= x - 1 {
			if l := w*64 + bits.TrailingZeros64(x); s.gone(j.global(l)) {
				words[w] &^= 1 << uint(l&63)
			}
		}
		count += bits.OnesCount64(words[w])
	}
	es := EpochSnapshot{Num: ep.num, Handed: words, Count: count, Got: slices.Clone(ep.got), Resumed: ep.resumed}
	if ep.here != nil {
		es.Here = slices.Clone(ep.here)
		es.Planned = make([]uint64, len(words))
		for e := range ep.planned {
			if l, ok := j.local(e); ok && l < ep.set.n {
				es.Planned[l>>6] |= 1 << uint(l&63)
			}
		}
	}
	return es
}

// Resume makes a job that has not read yet continue the epochs of an
// interrupted run: the job starts at eps[0].Num with the samples eps[0]
// handed out already taken, and applies eps[1], if given (it must be
// eps[0].Num+1), when it creates that epoch. What the job drew ahead is
// dropped. ErrStarted if a rank of the job has read; ErrBadConfig for a
// bad eps. A cluster job's epochs are the cluster's: its caller marks
// the samples handed out there too (every node of the job resumes).
func (s *Sampler) Resume(name string, eps []ResumeEpoch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reap(s.opt.Now())
	j, err := s.lookup(name)
	if err != nil {
		return err
	}
	for _, r := range j.ranks {
		if r.started {
			return fmt.Errorf("%w: job %q", ErrStarted, name)
		}
	}
	if len(eps) == 0 || len(eps) > 2 {
		return fmt.Errorf("%w: job %q: resume with %d epochs: want 1 or 2", ErrBadConfig, name, len(eps))
	}
	for i, ep := range eps {
		if ep.Num < 1 || i > 0 && ep.Num != eps[0].Num+1 {
			return fmt.Errorf("%w: job %q: resume epochs %d: want n, or n and n+1, n ≥ 1", ErrBadConfig, name, ep.Num)
		}
		// Bits past the subset: the state is of a larger subset.
		for w := j.size / 64; w < len(ep.Handed); w++ {
			mask := ^uint64(0)
			if w == j.size/64 {
				mask = ^uint64(0) << uint(j.size%64)
			}
			if ep.Handed[w]&mask != 0 {
				return fmt.Errorf("%w: job %q: resume epoch %d names samples past the subset's %d", ErrBadConfig, name, ep.Num, j.size)
			}
		}
	}
	// The job starts over from the resumed epoch: what it drew ahead goes
	// back, and its epochs are made again.
	s.rewant(j, func() { j.eps = nil })
	for _, r := range j.ranks {
		r.plan, r.ended, r.capped = r.plan[:0], false, nil
	}
	j.latest, j.spare = nil, nil
	j.resume = slices.Clone(eps)
	j.st.Resumed = 0
	ep := s.newEpoch(j)
	for _, r := range j.ranks {
		r.ep = ep
	}
	s.invalidateDSA()
	return nil
}

// eachLocal calls fn with every bit set in words below n.
func eachLocal(words []uint64, n int, fn func(int)) {
	for w, word := range words {
		for ; word != 0; word &= word - 1 {
			if l := w*64 + bits.TrailingZeros64(word); l < n {
				fn(l)
			}
		}
	}
}

// resumeInto takes in ep, a new epoch, the samples the interrupted run
// handed out in it (Resume), and forgets the resume epochs up to it.
func (s *Sampler) resumeInto(j *job, ep *epoch) {
	for len(j.resume) > 0 && j.resume[0].Num < ep.num {
		j.resume = j.resume[1:]
	}
	if len(j.resume) == 0 || j.resume[0].Num != ep.num {
		return
	}
	handed, later := j.resume[0].Handed, j.resume[0].Later
	j.st.Skipped += j.resume[0].Vanished
	j.resume = j.resume[1:]
	if len(j.resume) == 0 {
		j.resume = nil
	}
	eachLocal(later, ep.set.n, func(l int) {
		if !ep.set.has(l) {
			ep.set.take(l)
			ep.excluded++ // as a sample gone is: taken, never drawn
		}
	})
	for w, word := range handed {
		for word != 0 {
			l := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			if l >= ep.set.n {
				return
			}
			if !ep.set.has(l) { // not gone already (exclude)
				ep.set.take(l)
				ep.resumed++
			}
		}
	}
	if ep.resumed > 0 {
		// Draws past the torch positions of a sequential job's ranks
		// take what is left (ranks.go: drawOwn), as after a loss.
		ep.lossy = true
		j.st.Resumed += ep.resumed
	}
}
