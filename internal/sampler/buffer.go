package sampler

import (
	"slices"
	"sort"
)

// The per-sample status byte: the low 2 bits are the buffer state, the high
// 6 bits the reference count, valid while the state is not stNone: the
// number of live jobs whose subset holds the sample and that have not been
// served it this epoch (planned counts as not served). An entry whose count
// reaches 0 is released: every live job consumed it.
const (
	stNone      = 0 // not in the shared buffer
	stRequested = 1 // handed out by Prefetch or kept by Installed, fetch in flight
	stBuffered  = 2 // installed in the buffer
	stateMask   = 3
	maxRef      = 63
)

// Stats are the shared buffer's counters.
type Stats struct {
	Slots       int // Options.BufferSlots
	Buffered    int // installed entries
	Requested   int // entries being fetched
	Prefetched  int // samples handed out by Prefetch, total
	Kept        int // demand reads kept by Installed, total
	Released    int // entries released because every live job consumed them
	Evicted     int // entries released for room for an entry more jobs want
	Failed      int // prefetches reported failed
	Substituted int // draws replaced by buffered or cached samples, all jobs
	// CacheSubstituted: of them, by samples the views' caches hold.
	CacheSubstituted int
	RanksLost        int // ranks lost for their lease, all jobs, total
	// ClaimFallbacks: epochs of cluster jobs drawn locally after a claim
	// failed, all jobs, total.
	ClaimFallbacks int
}

// The status of every sample is kept from the first sample buffered on
// (bufAdd): until then every sample's is stNone with no reference, and a
// mount whose jobs never buffer holds no byte a file for it.
func (s *Sampler) state(e int32) uint8 {
	if s.status == nil {
		return stNone
	}
	return s.status[e] & stateMask
}

func (s *Sampler) ref(e int32) int {
	if s.status == nil {
		return 0
	}
	return int(s.status[e] >> 2)
}

func (s *Sampler) setRef(e int32, r int) {
	s.status[e] = s.status[e]&stateMask | uint8(min(r, maxRef))<<2
}

// wantCount is the number of live jobs that still want e this epoch.
func (s *Sampler) wantCount(e int32) int {
	c := 0
	for _, j := range s.order {
		if j.wants(e) {
			c++
		}
	}
	return c
}

func (s *Sampler) bufAdd(e int32, st uint8, ref int) {
	if s.status == nil {
		s.status = make([]uint8, s.n)
	}
	s.status[e] = st
	s.setRef(e, ref)
	s.bufPos[e] = len(s.buf)
	s.buf = append(s.buf, e)
}

// bufRemove forgets e; release says whether the buffer holds bytes to drop.
func (s *Sampler) bufRemove(e int32, release bool) {
	p := s.bufPos[e]
	last := s.buf[len(s.buf)-1]
	s.buf[p] = last
	s.bufPos[last] = p
	s.buf = s.buf[:len(s.buf)-1]
	delete(s.bufPos, e)
	s.status[e] = stNone
	if release {
		s.releases = append(s.releases, int(e))
	}
}

// serve accounts for rank r of job j reading e. A planned sample has left
// its epoch's plan already: if the job no longer wants it, its reference
// goes. Padding was not planned: the job had it already.
func (s *Sampler) serve(j *job, epoch int, planned bool, e int32) {
	// An epoch's reads by where the sample's bytes are kept: on this node,
	// on a peer (whether the buffer prefetched it or the reader reads it
	// from the peer), or only on the source.
	er := j.epochReads(epoch)
	switch {
	case s.res.Resident(int(e)):
		er.Local++
	case s.peerHeld(int(e)):
		er.Peer++
	default:
		er.Source++
	}
	switch st := s.state(e); {
	case st != stNone:
		j.st.BufferReads++
		if planned {
			s.unwant(j, e)
		}
	case s.res.Resident(int(e)):
		j.st.ResidentReads++
	case s.peerHeld(int(e)):
		j.st.PeerReads++
	default:
		j.st.SourceReads++
	}
}

// peerHeld reports whether another node keeps sample i (PeerResidency).
func (s *Sampler) peerHeld(i int) bool {
	pr, ok := s.res.(PeerResidency)
	return ok && pr.PeerHeld(i)
}

// epochReads is the count of epoch's reads, added (and the oldest
// dropped past MaxEpochReads) at the epoch's first read.
func (j *job) epochReads(epoch int) *EpochReads {
	rs := j.st.EpochReads
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Epoch == epoch {
			return &rs[i]
		}
	}
	rs = append(rs, EpochReads{Epoch: epoch})
	slices.SortFunc(rs, func(a, b EpochReads) int { return a.Epoch - b.Epoch })
	if len(rs) > MaxEpochReads {
		rs = slices.Delete(rs, 0, len(rs)-MaxEpochReads)
	}
	j.st.EpochReads = rs
	for i := range rs {
		if rs[i].Epoch == epoch {
			return &rs[i]
		}
	}
	return &EpochReads{} // older than every epoch kept: not counted
}

// unwant drops j's reference to the buffer entry e if j no longer wants
// it (it was handed out, or had elsewhere); at 0 the entry is released.
func (s *Sampler) unwant(j *job, e int32) {
	st := s.state(e)
	if st == stNone || j.wants(e) {
		return
	}
	r := s.ref(e) - 1
	s.setRef(e, max(r, 0))
	if r <= 0 && st == stBuffered {
		s.bufRemove(e, true)
		s.stats.Released++
	}
}

// substitutable reports whether the sample e planned in epoch ep of job j
// may be replaced: nobody holds or fetches it, it is not resident, and it
// is planned nowhere else (a DSA draw shared with another job, or a draw of
// the job's other epoch in flight, is kept: it is fetched anyway).
func (s *Sampler) substitutable(j *job, ep *epoch, e int32) bool {
	return s.state(e) == stNone && !s.res.Resident(int(e)) && s.plannedOnlyBy(j, ep, e)
}

// substitute replaces the substitutable samples among the first k of r's
// plan by buffered (or in-flight) samples that no rank of j has had in r's
// epoch, earliest positions first. Displaced draws return to the epoch's
// unseen set, so the epoch still covers them. Buffered candidates are taken
// in buffer order.
func (s *Sampler) substitute(j *job, r *rank, k int) {
	// A cluster job's planned samples are the rank's in the cluster: one
	// given back would be lost to the epoch (claims.go).
	if s.opt.NoSubstitution || len(r.plan) == 0 || j.cfg.Claimer != nil {
		return
	}
	s.substituteCached(j, r, k)
	if len(s.buf) == 0 {
		return
	}
	ep := r.ep
	var pos []int
	for p := 0; p < k && p < len(r.plan); p++ {
		if s.substitutable(j, ep, r.plan[p]) {
			pos = append(pos, p)
		}
	}
	if len(pos) == 0 {
		return
	}
	var subs []int32
	for _, e := range s.buf {
		if len(subs) == len(pos) {
			break
		}
		if j.free(ep, e) {
			subs = append(subs, e)
		}
	}
	for i, e := range subs {
		p := pos[i]
		s.untake(j, ep, r.plan[p])
		s.take(j, ep, r, e)
		r.plan[p] = e
		j.st.Substitutions++
		s.stats.Substituted++
	}
}

// Prefetch returns up to max samples that the buffer should fetch now, best
// first, and marks them as being fetched: the caller must report each one
// with Installed or Failed. Candidates are the non-resident samples in the
// live ranks' lookahead windows (ODS jobs first take what the buffer already
// holds), ordered by the number of live jobs that still want them, then by
// how soon they are read. When the buffer is full, an installed entry wanted
// by fewer jobs than a candidate is evicted for it (see Releases).
func (s *Sampler) Prefetch(max int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reap(s.opt.Now())
	if s.opt.BufferSlots == 0 || max <= 0 {
		return nil
	}
	type cand struct {
		e     int32
		want  int
		first int
	}
	var cands []cand
	idx := map[int32]int{}
	for _, j := range s.order {
		for _, r := range j.ranks {
			s.fillRank(j, r)
			if j.cfg.Kind == KindODS {
				s.substitute(j, r, len(r.plan))
			}
			for p, e := range r.plan {
				if s.state(e) != stNone || s.res.Resident(int(e)) || s.gone(e) {
					continue // a gone sample is skipped at its hand-out (ranks.go)
				}
				if c, ok := idx[e]; ok {
					cands[c].first = min(cands[c].first, p)
					continue
				}
				idx[e] = len(cands)
				cands = append(cands, cand{e: e, want: s.wantCount(e), first: p})
			}
		}
	}
	sort.Slice(cands, func(a, b int) bool {
		ca, cb := cands[a], cands[b]
		if ca.want != cb.want {
			return ca.want > cb.want
		}
		if ca.first != cb.first {
			return ca.first < cb.first
		}
		return ca.e < cb.e
	})
	var out []int
	for _, c := range cands {
		if len(out) == max {
			break
		}
		if !s.room(c.want) {
			break
		}
		s.bufAdd(c.e, stRequested, c.want)
		s.stats.Prefetched++
		out = append(out, int(c.e))
	}
	return out
}

// room makes room for one entry wanted by want jobs, evicting the installed
// entry with the lowest count if that count is lower. An entry in a job's
// lookahead window is never evicted: it is about to be read (Joader: data
// sampled earlier and not yet consumed cannot be evicted). It reports
// whether there is room.
func (s *Sampler) room(want int) bool {
	if len(s.buf) < s.opt.BufferSlots {
		return true
	}
	victim, vref := int32(-1), want
	for _, e := range s.buf {
		if s.state(e) == stBuffered && s.ref(e) < vref && !s.plannedByAny(e) {
			victim, vref = e, s.ref(e)
		}
	}
	if victim < 0 {
		return false
	}
	s.bufRemove(victim, true)
	s.stats.Evicted++
	return true
}

// Wanted reports whether buffering sample i's bytes would serve a live job:
// the buffer is on, i is not resident and some live job has not yet been
// handed i this epoch. A demand read asks it before fetching into the
// buffer, so that with no job (or only the reader's own) it reads around it.
func (s *Sampler) Wanted(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reap(s.opt.Now())
	if i < 0 || i >= s.n || s.opt.BufferSlots == 0 || s.res.Resident(i) {
		return false
	}
	return s.state(int32(i)) == stBuffered || s.wantCount(int32(i)) > 0
}

// Installed reports that the buffer now holds sample i's bytes, fetched for
// Prefetch or by a demand read from the source, and returns whether to keep
// them: true while some live job still wants i this epoch and there is room
// (possibly after evicting an entry fewer jobs want; see Releases). On false
// the caller drops the bytes; the sampler holds no reference.
func (s *Sampler) Installed(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reap(s.opt.Now())
	if i < 0 || i >= s.n {
		return false
	}
	e := int32(i)
	switch s.state(e) {
	case stBuffered:
		return true
	case stRequested:
		w := s.wantCount(e)
		if w == 0 || s.res.Resident(i) {
			s.bufRemove(e, false)
			s.stats.Released++
			return false
		}
		s.status[e] = stBuffered
		s.setRef(e, w)
		return true
	}
	if s.opt.BufferSlots == 0 || s.res.Resident(i) {
		return false
	}
	w := s.wantCount(e)
	if w == 0 || !s.room(w) {
		return false
	}
	s.bufAdd(e, stBuffered, w)
	s.stats.Kept++
	return true
}

// Failed reports that a prefetch of sample i failed; the sample is no longer
// counted as being fetched (readers fetch it on demand).
func (s *Sampler) Failed(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= 0 && i < s.n && s.state(int32(i)) == stRequested {
		s.bufRemove(int32(i), false)
		s.stats.Failed++
	}
}

// Releases appends to dst the installed samples the buffer should drop now
// (consumed by every live job, evicted for room, or left by ended and expired
// jobs) and forgets them.
func (s *Sampler) Releases(dst []int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reap(s.opt.Now())
	dst = append(dst, s.releases...)
	s.releases = s.releases[:0]
	return dst
}

// Buffered reports whether sample i is installed in (or being fetched into)
// the shared buffer as the sampler sees it.
func (s *Sampler) Buffered(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return i >= 0 && i < s.n && s.state(int32(i)) != stNone
}

// Stats returns the buffer's counters.
func (s *Sampler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Slots = s.opt.BufferSlots
	for _, e := range s.buf {
		if s.state(e) == stBuffered {
			st.Buffered++
		} else {
			st.Requested++
		}
	}
	return st
}

func (s *Sampler) plannedByAny(e int32) bool {
	for _, j := range s.order {
		for _, ep := range j.eps {
			if _, ok := ep.planned[e]; ok {
				return true
			}
		}
	}
	return false
}
