package sampler

// Memory is the sampler's metadata, in bytes, computed from its live data
// structures.
type Memory struct {
	// SeenBits: the jobs' seen vectors, 1 bit per sample of each subset
	// (rounded up to 64-bit words) per epoch in flight, plus one kept for
	// the next epoch once one completed.
	SeenBits int
	// Status: the per-sample status + reference count, 1 byte per sample.
	Status int
	// ODS is SeenBits + Status: Seneca's "ODS metadata" (§5.2).
	ODS int
	// DrawIndex: the Fenwick trees that make a uniform draw from the unseen
	// set O(log n) (4 bytes per 512 samples per job).
	DrawIndex int
	// Subsets: explicit subsets, 4 bytes per sample (0 for "all").
	Subsets int
	// DSA: the dependent sampling tree while DSA is active (10 bytes per
	// sample), else 0.
	DSA int
	// Plans: the lookahead windows, per-rank state and the buffer index
	// (small).
	Plans int
	// Total is the sum.
	Total int
}

// MemoryUsage measures the metadata held now.
func (s *Sampler) MemoryUsage() Memory {
	s.mu.Lock()
	defer s.mu.Unlock()
	var m Memory
	m.Status = len(s.status)
	for _, j := range s.order {
		sets := []*drawSet{j.spare}
		for _, ep := range j.eps {
			sets = append(sets, ep.set)
			m.Plans += 16*len(ep.planned) + 8*len(ep.quota) + 4*len(ep.first)
		}
		for _, d := range sets {
			if d != nil {
				m.SeenBits += 8 * len(d.bits)
				m.DrawIndex += 4 * len(d.tree)
			}
		}
		m.Subsets += 4 * len(j.subset)
		for _, r := range j.ranks {
			m.Plans += 4*cap(r.plan) + 96
		}
	}
	m.Plans += 4*cap(s.buf) + 16*len(s.bufPos)
	if d := s.dsa; d != nil {
		m.DSA = 2*len(d.bucketOf) + 4*len(d.pos)
		for _, b := range d.buckets {
			m.DSA += 4 * cap(b.elems)
		}
	}
	m.ODS = m.SeenBits + m.Status
	m.Total = m.ODS + m.DrawIndex + m.Subsets + m.DSA + m.Plans
	return m
}
