package sampler

// Caches beyond the shared buffer (Seneca §5.2 with all three of its
// caches): the mount's views hold samples decoded and augmented, and a job
// that reads its batches as views (JobConfig.Views) is cheapest served from
// them. When such a job's batch is drawn, ODS first replaces its draws that
// no cache holds for it by samples a cache does hold (augmented first: the
// Caches implementation orders them) that no rank of the job has had this
// epoch, then, for the draws left, by buffered samples as for any job.
// Displaced draws go back to the epoch's unseen set, as for the buffer, so
// every sample is still read exactly once per epoch.

// Caches tells ODS what the views hold for a job. It is called with the
// sampler's lock held, per batch: it must be cheap and must not call the
// Sampler.
type Caches interface {
	// Cached reports whether a form of sample e is held for job (it costs
	// the job no preprocessing, or less than one).
	Cached(job string, e int) bool
	// Candidates appends to dst up to max samples held for job, best
	// first, and returns it.
	Candidates(job string, dst []int, max int) []int
}

// substituteCached is the views' part of substitute: it replaces the first
// k of r's plan that no cache holds for j, by cached samples j may still
// have this epoch, and reports how many it replaced.
func (s *Sampler) substituteCached(j *job, r *rank, k int) int {
	if s.opt.Caches == nil || !j.cfg.Views {
		return 0
	}
	ep := r.ep
	var pos []int
	for p := 0; p < k && p < len(r.plan); p++ {
		if !s.opt.Caches.Cached(j.name, int(r.plan[p])) && s.plannedOnlyBy(j, ep, r.plan[p]) {
			pos = append(pos, p)
		}
	}
	if len(pos) == 0 {
		return 0
	}
	// Ask for more than needed: some are taken this epoch already.
	cands := s.opt.Caches.Candidates(j.name, s.scratch[:0], 4*len(pos)+16)
	s.scratch = cands[:0]
	n := 0
	for _, c := range cands {
		if n == len(pos) {
			break
		}
		e := int32(c)
		if c < 0 || c >= s.n || !j.free(ep, e) {
			continue
		}
		p := pos[n]
		s.untake(j, ep, r.plan[p])
		s.take(j, ep, r, e)
		r.plan[p] = e
		n++
	}
	j.st.CacheSubstitutions += n
	j.st.Substitutions += n
	s.stats.Substituted += n
	s.stats.CacheSubstituted += n
	return n
}

// plannedOnlyBy reports whether e, planned in epoch ep of j, is planned
// nowhere else (a DSA draw shared with another job, or a draw of the job's
// other epoch in flight, is kept).
func (s *Sampler) plannedOnlyBy(j *job, ep *epoch, e int32) bool {
	for _, o := range s.order {
		for _, oe := range o.eps {
			if oe == ep {
				continue
			}
			if _, ok := oe.planned[e]; ok {
				return false
			}
		}
	}
	return true
}

// Plan returns the samples rank rank of job name has drawn and not yet
// read: its lookahead window, in the order it will read them. A producer
// (the views) works ahead on them.
func (s *Sampler) Plan(name string, rank int, dst []int) ([]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, r, err := s.lookupRank(name, rank)
	if err != nil {
		return dst, err
	}
	for _, e := range r.plan {
		dst = append(dst, int(e))
	}
	return dst, nil
}

// SetViews turns a job's preference for the views' caches on or off
// (JobConfig.Views): the jobs layer turns it on at the job's first read of
// a view.
func (s *Sampler) SetViews(name string, on bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.lookup(name)
	if err != nil {
		return err
	}
	j.cfg.Views = on
	return nil
}
