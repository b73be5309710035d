package sampler

import (
	"errors"
	"slices"
)

// Cluster-wide epochs: a DDP job whose ranks read on several nodes
// (JobConfig.Claimer; the jobs package's claimer is the Redis Cluster's
// claim script, internal/cluster/epochs.go). Each node keeps its own epoch state of
// the job, as for a local job, and the claimer holds the one seen set per
// epoch that the nodes share. Differences from a local job:
//
//   - A draw is a claim. A rank's plan is filled by proposing candidates,
//     free samples of this node's seen set, and keeping those the claimer
//     grants (those no rank on any node had this epoch, in the proposed
//     order, up to the rank's quota). An ODS job proposes, among random
//     free samples and the free samples of the shared buffer, those resident
//     or buffered on this node first: the cluster grants in that order, so
//     each node's ranks prefer its local data. Candidates are taken in the
//     local set while the claim is out (pending), so two ranks of this node
//     never propose one sample; those examined and not granted were had by
//     a rank elsewhere: they stay taken (away) and are never proposed again;
//     those not examined go back.
//   - The claim runs without the sampler's lock (NextRank drops it around
//     the claimer's call: one round trip, bounded by the cluster's
//     timeout). State that changed meanwhile (the job reconfigured, the
//     epoch complete) is checked when the answer is applied.
//   - A rank pads only once it has nothing left to propose and no claim is
//     out: every sample of the epoch was then examined, so the cluster's
//     seen set is full and the rank's count is final (sequential: its
//     torch indices r + i·W ran past the subset).
//   - Ranks are this node's only once they read here. A rank that never
//     read here is remote: quota 0 in this node's epochs (they complete
//     when the local ranks are served), never lost, its share never
//     redistributed. A local rank that is lost leaves its unread share out
//     of the epoch (counted as dropped): the other ranks' counts stay at
//     their quota on every node. Redistributing a lost rank's share
//     across nodes is not done.
//   - No substitution and no DSA: a planned sample is the rank's in the
//     cluster, and one given back would be lost to the epoch.
//
// When a claim fails (the cluster unreachable or failing), the rest of
// that epoch is drawn locally, as a local job's (disjointness with the
// other nodes is lost for that remainder; samples already known to be
// elsewhere stay out), and counted (ClaimFallbacks). A claimer error
// wrapping ErrRankAhead is not a failure: the rank would start an epoch
// two ahead of the slowest rank on some node, and waits as a local rank
// does.

// Claimer is the cluster-wide seen set of a job's epochs. Its methods are
// called without the sampler's lock, from concurrent reads of the job's
// ranks; each call must be bounded in time.
type Claimer interface {
	// Claim offers q.Cands, subset-local sample numbers (0..M-1: the job's
	// subset in index order) in the rank's order of preference, for epoch
	// q.Epoch (1-based), and grants, in that order, those no rank had this
	// epoch, until q.Want are granted or the rank's count in the epoch
	// (the samples granted to it, plus q.Padded) reaches its quota:
	// q.Share, plus its part of what ranks lost in the epoch left (Lost).
	// The answer's Examined is how many of the candidates it looked at:
	// those examined and not granted were had by other ranks, the rest
	// were not looked at. An error wrapping ErrRankAhead means the rank
	// must wait; any other error, that the claim failed and granted
	// nothing.
	Claim(q ClaimRequest) (ClaimAnswer, error)
	// Ended tells that rank read the end of epoch (it got its quota).
	Ended(epoch, rank int)
	// Lost tells that rank, of this node, was lost in epoch: returned are
	// the samples it was granted and never handed (they go back to the
	// epoch's unseen set), and what it had yet to get of its quota is
	// shared out over the live ranks of every node.
	Lost(epoch, rank int, returned []int32)
}

// ClaimRequest is a claim of a rank's samples (Claimer.Claim).
type ClaimRequest struct {
	Epoch, Rank int
	// Share is the rank's quota with no rank lost; Padded, the padding it
	// was handed in the epoch on this node (it counts towards the quota).
	Share, Padded int
	Want          int
	Cands         []int32
	// Probe: the rank got its quota on this node and asks whether it
	// grew. If not, its count is final: the cluster records it as done,
	// and shares what ranks lost later leave over the others.
	Probe bool
}

// ClusterQuota is a rank's quota in an epoch of a cluster job, as the
// claimer computes it (internal/cluster/epochs.go's claim script does, in Lua):
// share, plus its part of what the epoch's lost ranks left (share less
// each one's final count, lost: rank → final count) and the done ranks
// did not take (their final counts past share, done: rank → final
// count): an even part over the world's ranks neither lost nor done, the
// remainder to the lowest of them. A lost or done rank's quota is its
// final count. A rank's quota never shrinks as ranks are lost or done.
func ClusterQuota(share, world, rank int, lost, done map[int]int) int {
	if g, ok := lost[rank]; ok {
		return g
	}
	if g, ok := done[rank]; ok {
		return g
	}
	left, below := 0, 0
	for r, g := range lost {
		left += max(0, share-g)
		if r < rank {
			below++
		}
	}
	for r, g := range done {
		left -= max(0, g-share)
		if r < rank {
			below++
		}
	}
	live := world - len(lost) - len(done)
	if live <= 0 || left <= 0 {
		return share
	}
	q := share + left/live
	if rank-below < left%live {
		q++
	}
	return q
}

// ClaimAnswer is a claim's answer.
type ClaimAnswer struct {
	Granted  []int32
	Examined int
	// Quota is the rank's quota in the epoch: the share, plus its part of
	// what lost ranks left (0: the share).
	Quota int
	// Losses counts the ranks lost in the epoch so far, on every node:
	// when it grows, samples this node was told were elsewhere may have
	// come back (a lost rank's returned ones).
	Losses int
}

// lostReport is a rank lost in an epoch of a cluster job, to tell its
// claimer once the sampler's lock is released (Reap).
type lostReport struct {
	k        Claimer
	epoch    int
	rank     int
	returned []int32
}

// claimReq is a claim out: candidates taken in ep's set, pending.
type claimReq struct {
	j     *job
	r     *rank
	ep    *epoch
	share int // the rank's base quota (ep.share)
	pad   int // its padding in ep
	probe bool
	want  int
	cands []int32 // local indices
}

// remote reports whether r is a rank of a cluster job that never read on
// this node.
func (j *job) remote(r *rank) bool { return j.cfg.Claimer != nil && !r.started }

// arrive makes r, a rank of a cluster job that never read here, a local
// one: it gets its share of the epochs in flight from its own on (or of
// the oldest in flight, or a new one, when this node's ranks completed
// its epoch meanwhile).
func (s *Sampler) arrive(j *job, r *rank) {
	if !j.inFlight(r.ep) {
		r.ended = false
		if len(j.eps) > 0 {
			r.ep = j.eps[0]
		} else {
			r.ep = s.newEpoch(j)
		}
	}
	for ep := r.ep; ep != nil; ep = ep.next {
		if j.inFlight(ep) && ep.got[r.id] == 0 {
			ep.quota[r.id] = ep.share
		}
	}
}

// claimCap bounds the candidates of one claim.
const claimCap = 4096

// prepareClaim takes the candidates of r's next claim in its epoch's set,
// or returns nil when r has nothing to claim now. first: the read's first
// claim fills r's whole window; later ones (a claim granted fewer than
// asked) only what the read needs. A rank that got its quota claims once
// more before its epoch ends (a probe): ranks lost on other nodes may have
// raised its quota; an epoch is complete only once every rank's count is
// final so (ep.final).
func (s *Sampler) prepareClaim(j *job, r *rank, first bool) *claimReq {
	ep := r.ep
	if r.claiming || ep.fallback || r.lost || r.ended || !j.inFlight(ep) {
		return nil
	}
	var want int
	probe := false
	switch {
	case r.done():
		if ep.final[r.id] || ep.quota[r.id] == 0 {
			return nil
		}
		want = j.cfg.BatchSize // the probe
		probe = true
	case r.capped == ep || r.need() <= 0:
		return nil
	case first:
		want = min(s.window(j)-len(r.plan), r.need())
	default:
		want = min(j.cfg.BatchSize, ep.quota[r.id]-ep.got[r.id]) - len(r.plan)
	}
	if want <= 0 {
		return nil
	}
	n := min(claimCap, want*len(j.ranks)+64)
	cands := s.candidates(j, r, n)
	if len(cands) == 0 && !r.done() {
		return nil // a probe goes even with nothing to propose: it learns the quota
	}
	ep.pending += len(cands)
	r.claiming = true
	pad := 0
	if ep.pads != nil {
		pad = ep.pads[r.id]
	}
	return &claimReq{j: j, r: r, ep: ep, share: ep.share, pad: pad, want: want, cands: cands, probe: probe}
}

// candidates takes up to n free samples of r's epoch in its set and
// returns them (local indices) in order of preference.
func (s *Sampler) candidates(j *job, r *rank, n int) []int32 {
	ep := r.ep
	out := make([]int32, 0, min(n, ep.set.free))
	take := func(l int) {
		ep.set.take(l)
		out = append(out, int32(l))
	}
	if j.cfg.Kind == KindSequential {
		// torch's order: rank r's i-th sample is the subset's r + i·W-th.
		w := len(j.ranks)
		for i := ep.got[r.id] + len(r.plan); len(out) < n; i++ {
			c := r.id + i*w
			if c >= ep.set.n {
				break
			}
			if !ep.set.has(c) {
				take(c)
			}
		}
		if r.done() || ep.losses > 0 {
			// A probe, or a rank taking over a lost one's share: what
			// is left, in index order.
			for len(out) < n && ep.set.free > 0 {
				take(ep.set.kth(0))
			}
		}
		return out
	}
	if j.cfg.Kind == KindODS {
		// What the shared buffer holds, then random draws; local first.
		for _, e := range s.buf {
			if len(out) >= n/2 {
				break
			}
			if l, ok := j.in(ep, e); ok && !ep.set.has(l) {
				take(l)
			}
		}
	}
	for len(out) < n && ep.set.free > 0 {
		take(ep.set.kth(ep.rng.IntN(ep.set.free)))
	}
	if j.cfg.Kind == KindODS {
		slices.SortStableFunc(out, func(a, b int32) int {
			return s.farness(j.global(int(a))) - s.farness(j.global(int(b)))
		})
	}
	return out
}

// farness orders candidates: 0 resident in a tier, 1 buffered or being
// fetched, 2 kept by another node (PeerResidency), 3 none of those.
func (s *Sampler) farness(e int32) int {
	switch {
	case s.res.Resident(int(e)):
		return 0
	case s.state(e) != stNone:
		return 1
	case s.peerHeld(int(e)):
		return 2
	}
	return 3
}

// applyClaim applies a claim's answer: the rank's quota follows the
// cluster's, granted samples go to the rank's plan, examined ones not
// granted stay taken (away), the rest go back. err: ErrRankAhead is
// returned (the rank waits); another error makes the epoch fall back to
// local draws.
func (s *Sampler) applyClaim(q *claimReq, ans ClaimAnswer, err error) error {
	j, r, ep := q.j, q.r, q.ep
	r.claiming = false
	if s.jobs[j.name] != j || !j.inFlight(ep) {
		// The job was reconfigured or dropped, or the epoch completed,
		// meanwhile: its set may serve another epoch now.
		return nil
	}
	ep.pending -= len(q.cands)
	if err != nil {
		for _, l := range q.cands {
			ep.set.untake(int(l))
		}
		if errors.Is(err, ErrRankAhead) {
			return ErrRankAhead
		}
		if !ep.fallback {
			ep.fallback = true
			for i := range ep.final {
				ep.final[i] = true // local draws: the counts are this node's
			}
			j.st.ClaimFallbacks++
			s.stats.ClaimFallbacks++
		}
		return nil
	}
	granted, examined := ans.Granted, max(0, min(ans.Examined, len(q.cands)))
	mine := r.ep == ep && !r.lost && !r.ended
	raised := mine && ans.Quota > ep.quota[r.id]
	grew := ans.Losses > ep.losses
	if raised {
		// Ranks lost on some node left samples: this rank takes its part.
		j.st.TakenOver += ans.Quota - ep.quota[r.id]
		ep.quota[r.id] = ans.Quota
		if r.capped == ep {
			r.capped = nil
		}
	}
	switch {
	case !mine:
	case r.done():
		// A probe: with its quota as it was and nothing come back, the
		// rank's count is final.
		ep.final[r.id] = !raised && !grew
	case examined == 0 && len(q.cands) > 0:
		r.capped = ep
	}
	ok := make(map[int32]bool, len(granted))
	for _, l := range granted {
		ok[l] = true
	}
	for _, l := range q.cands[:examined] {
		e := j.global(int(l))
		if ok[l] && mine && r.need() > 0 {
			ep.planned[e] = int32(r.id)
			r.plan = append(r.plan, e)
			j.st.Claimed++
			continue
		}
		// Had elsewhere (or granted to a rank that went meanwhile:
		// nobody here reads it this epoch).
		ep.away++
		if !ok[l] {
			j.st.ClaimedAway++
		}
		s.unwant(j, e)
	}
	for _, l := range q.cands[examined:] {
		ep.set.untake(int(l))
	}
	if grew {
		ep.losses, ep.reopen = ans.Losses, true
	}
	if ep.reopen && ep.pending == 0 {
		s.reopen(j, ep)
	}
	return nil
}

// reopen frees again, in ep's set, the samples this node took for had
// elsewhere: a rank lost on some node returned those it had not been
// handed, and proposing them again is how this node finds which. (Those
// really had elsewhere are refused again.) Only with no claim out: a
// pending candidate is taken but not away.
func (s *Sampler) reopen(j *job, ep *epoch) {
	ep.reopen = false
	// The buffer's entries of the samples freed are wanted again.
	s.rewant(j, func() {
		for l := range ep.set.n {
			if !ep.set.has(l) || ep.here[l>>6]&(1<<uint(l&63)) != 0 {
				continue
			}
			e := j.global(l)
			if _, p := ep.planned[e]; p || s.gone(e) {
				continue
			}
			ep.set.untake(l)
			ep.away--
		}
	})
}

// abandonPlan: r, a rank of a cluster job, is lost; the samples it
// planned were granted to it in the cluster: they stay taken here (away)
// and go back to the cluster's unseen set through the claimer (Lost), so
// that a live rank of any node may claim them.
func (s *Sampler) abandonPlan(j *job, r *rank) []int32 {
	ep := r.ep
	returned := make([]int32, 0, len(r.plan))
	for _, e := range r.plan {
		delete(ep.planned, e)
		ep.away++
		s.unwant(j, e)
		l, _ := j.local(e)
		returned = append(returned, int32(l))
	}
	r.plan = r.plan[:0]
	return returned
}

// mayPad reports whether r, with nothing planned and samples still due,
// is padded now. A cluster job's rank is padded only when it has nothing
// left to propose and no claim is out (see above).
func (s *Sampler) mayPad(j *job, r *rank) bool {
	ep := r.ep
	if j.cfg.Claimer == nil || ep.fallback {
		return true
	}
	if r.capped == ep {
		return true
	}
	if r.claiming || ep.pending > 0 {
		return false
	}
	if j.cfg.Kind == KindSequential && ep.losses == 0 {
		w := len(j.ranks)
		for i := ep.got[r.id] + len(r.plan); ; i++ {
			c := r.id + i*w
			if c >= ep.set.n {
				return true
			}
			if !ep.set.has(c) {
				return false
			}
		}
	}
	return ep.set.free == 0
}
