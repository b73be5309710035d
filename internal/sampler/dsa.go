package sampler

import (
	"slices"
	"sort"
)

// MaxDSAJobs bounds the jobs that draw through DSA together (bucket ids are
// 16 bits); ODS jobs beyond it draw on their own.
const MaxDSAJobs = 16

// dsaIndex is Joader's dependent sampling tree, kept as a partition of the
// samples by "need set": the set of DSA jobs for which the sample is still
// free (in the subset, neither served nor planned this epoch). A vertex of
// the paper's tree is the union of the buckets whose need set contains a job
// set; the compensation step (an element taken by one job moves to the child
// vertex of the jobs that still need it) is the move of a sample from bucket
// M to bucket M \ {job}. Memory: 10 bytes per sample (bucket id, position,
// bucket slot), paid only while DSA is active.
type dsaIndex struct {
	group    []*job
	inGroup  uint64 // slots of the group's jobs
	bucketOf []uint16
	pos      []int32
	buckets  []dsaBucket // [0] unused
	byMask   map[uint64]uint16
}

type dsaBucket struct {
	mask  uint64
	elems []int32
}

// invalidateDSA drops the index; the next draw of an ODS job rebuilds it if
// DSA applies (after joins, leaves and epoch starts).
func (s *Sampler) invalidateDSA() {
	s.dsa = nil
	s.dsaKnown = false
}

// dsaActive reports whether ODS jobs draw through DSA: at least two live ODS
// jobs whose subsets are not all the same (identical subsets share through
// the buffer: DSA would give them nearly the same order). A job with two
// epochs in flight (a rank ahead of the others) draws on its own until the
// older one completes.
func (s *Sampler) dsaActive() bool {
	if s.dsaKnown {
		return s.dsa != nil
	}
	s.dsaKnown = true
	if s.opt.NoDSA {
		return false
	}
	var group []*job
	for _, j := range s.order {
		if j.cfg.Kind == KindODS && j.cfg.Claimer == nil && len(j.eps) == 1 && len(group) < MaxDSAJobs {
			group = append(group, j)
		}
	}
	differ := false
	for _, j := range group[min(1, len(group)):] {
		if !slices.Equal(j.subset, group[0].subset) {
			differ = true
			break
		}
	}
	if len(group) < 2 || !differ {
		return false
	}
	d := &dsaIndex{
		group: group, bucketOf: make([]uint16, s.n), pos: make([]int32, s.n),
		buckets: make([]dsaBucket, 1), byMask: map[uint64]uint16{},
	}
	for _, j := range group {
		d.inGroup |= 1 << uint(j.slot)
	}
	for e := int32(0); int(e) < s.n; e++ {
		var m uint64
		for _, j := range group {
			if j.free(j.eps[0], e) {
				m |= 1 << uint(j.slot)
			}
		}
		d.move(e, m)
	}
	s.dsa = d
	return true
}

func (d *dsaIndex) mask(e int32) uint64 {
	if b := d.bucketOf[e]; b != 0 {
		return d.buckets[b].mask
	}
	return 0
}

// move puts e in the bucket of need set m (none when m is 0).
func (d *dsaIndex) move(e int32, m uint64) {
	if b := d.bucketOf[e]; b != 0 {
		bk := &d.buckets[b]
		p := d.pos[e]
		last := bk.elems[len(bk.elems)-1]
		bk.elems[p] = last
		d.pos[last] = p
		bk.elems = bk.elems[:len(bk.elems)-1]
		d.bucketOf[e] = 0
	}
	if m == 0 {
		return
	}
	b, ok := d.byMask[m]
	if !ok {
		b = uint16(len(d.buckets))
		d.buckets = append(d.buckets, dsaBucket{mask: m})
		d.byMask[m] = b
	}
	d.bucketOf[e] = b
	d.pos[e] = int32(len(d.buckets[b].elems))
	d.buckets[b].elems = append(d.buckets[b].elems, e)
}

// has reports whether j draws through DSA.
func (d *dsaIndex) has(j *job) bool {
	return d.inGroup&(1<<uint(j.slot)) != 0 && slices.Contains(d.group, j)
}

// remove: job j took e (compensation: e stays needed by the others).
func (d *dsaIndex) remove(j *job, e int32) {
	if bit := uint64(1) << uint(j.slot); d.inGroup&bit != 0 {
		d.move(e, d.mask(e)&^bit)
	}
}

// restore: job j gave e back (a displaced ODS draw).
func (d *dsaIndex) restore(j *job, e int32) {
	if bit := uint64(1) << uint(j.slot); d.inGroup&bit != 0 {
		d.move(e, d.mask(e)|bit)
	}
}

// pick returns a uniformly random sample among the buckets whose need set
// satisfies in, or -1 if there is none.
func (s *Sampler) dsaPick(in func(m uint64) bool) int32 {
	d := s.dsa
	total := 0
	for _, b := range d.buckets[1:] {
		if len(b.elems) > 0 && in(b.mask) {
			total += len(b.elems)
		}
	}
	if total == 0 {
		return -1
	}
	r := s.rng.IntN(total)
	for _, b := range d.buckets[1:] {
		if len(b.elems) > 0 && in(b.mask) {
			if r < len(b.elems) {
				return b.elems[r]
			}
			r -= len(b.elems)
		}
	}
	return -1
}

func (s *Sampler) dsaCount(in func(m uint64) bool) int {
	total := 0
	for _, b := range s.dsa.buckets[1:] {
		if in(b.mask) {
			total += len(b.elems)
		}
	}
	return total
}

// dsaFill draws rounds of Algorithm 1 until r's plan holds want samples.
// A round involves every DSA job that still has free samples and a rank
// that has read, still needs draws and whose plan is under twice its
// window (Joader's partial sampling: a job far ahead of the others does not
// wait, a job far behind is not drawn for); that rank gets the job's draw.
func (s *Sampler) dsaFill(j *job, r *rank, want int) {
	for len(r.plan) < want && r.need() > 0 && j.eps[0].set.free > 0 {
		var p []*job
		for _, k := range s.dsa.group {
			if k == j {
				k.drawFor = r
				p = append(p, k)
			} else if kr := s.dsaRank(k); kr != nil {
				k.drawFor = kr
				p = append(p, k)
			}
		}
		s.dsaRound(p)
	}
}

// dsaRank is the rank of DSA job k that a round draws for: one that has
// read, still needs draws in k's epoch and has the shortest plan, under
// twice its window; nil if none.
func (s *Sampler) dsaRank(k *job) *rank {
	if k.eps[0].set.free == 0 {
		return nil
	}
	var best *rank
	limit := 2 * s.window(k)
	for _, r := range k.ranks {
		if r.started && r.drawing() && r.ep == k.eps[0] && len(r.plan) < limit && (best == nil || len(r.plan) < len(best.plan)) {
			best = r
		}
	}
	return best
}

// dsaRound is one round of the selecting procedure (Algorithm 1) followed by
// the sampling procedure (Algorithm 2): every job in p draws one sample,
// uniformly from its free set, and the jobs that select the same
// intersection share their draw.
//
// Loop k of Algorithm 1 considers the jobs J still undecided, sorted by free
// set size; I = (∩ R_j) − S where S, the union of the earlier loops'
// intersections, is exactly the samples needed by every job of the previous
// loop's J (the job sets shrink). The first job selects I with probability
// |I| / |R_1 − S|, each next one, if its predecessor did, with
// |R_{i-1} − S| / |R_i − S| (the paper's line 13 sets c to |D|; the proof,
// eq. 11–12, uses |D| − |S|, which we use). If nobody selects I, the first
// job draws from R_1 − S − I on its own. Every job's draw is then uniform
// over its free set (Lemma 1–2), and jobs share as often as eq. 10 allows.
func (s *Sampler) dsaRound(p []*job) {
	free := func(k *job) int { return k.eps[0].set.free }
	sort.SliceStable(p, func(a, b int) bool {
		if free(p[a]) != free(p[b]) {
			return free(p[a]) < free(p[b])
		}
		return p[a].slot < p[b].slot
	})
	var prev uint64
	hasPrev := false
	inS := func(m uint64) bool { return hasPrev && m&prev == prev }
	for len(p) > 0 {
		var jm uint64
		for _, k := range p {
			jm |= 1 << uint(k.slot)
		}
		sizeS := s.dsaCount(inS)
		inI := func(m uint64) bool { return m&jm == jm && !inS(m) }
		c := s.dsaCount(inI)
		g := 0
		for _, k := range p {
			rs := free(k) - sizeS
			if rs <= 0 || s.rng.Float64()*float64(rs) >= float64(c) {
				break
			}
			g++
			c = rs
		}
		if g > 0 {
			e := s.dsaPick(inI)
			s.dsaAssign(e, p[:g])
			p = p[g:]
		} else {
			k := p[0]
			bit := uint64(1) << uint(k.slot)
			e := s.dsaPick(func(m uint64) bool { return m&bit != 0 && !inS(m) && m&jm != jm })
			s.dsaAssign(e, p[:1])
			p = p[1:]
		}
		prev, hasPrev = jm, true
	}
}

// dsaAssign gives e to the rank each job of to draws for.
func (s *Sampler) dsaAssign(e int32, to []*job) {
	if e < 0 {
		// Cannot happen with consistent counts; draw on their own instead.
		for _, k := range to {
			s.drawOwn(k, k.drawFor)
		}
		return
	}
	for _, k := range to {
		r := k.drawFor
		s.take(k, r.ep, r, e)
		r.plan = append(r.plan, e)
		if len(to) > 1 {
			k.st.SharedDraws++
		}
	}
}
