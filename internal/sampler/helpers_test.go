package sampler

import (
	"fmt"
	"math"
	"slices"
	"time"
)

type fakeClock struct{ t time.Time }

func newClock() *fakeClock                   { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }
func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

// check verifies the sampler's internal invariants; it returns the first
// violation.
func (s *Sampler) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range s.order {
		if len(j.eps) > 2 {
			return fmt.Errorf("job %s: %d epochs in flight", j.name, len(j.eps))
		}
		for i, ep := range j.eps {
			if ep.complete() {
				return fmt.Errorf("job %s: epoch %d complete and in flight", j.name, ep.num)
			}
			if i > 0 && ep.num != j.eps[i-1].num+1 {
				return fmt.Errorf("job %s: epochs %d and %d in flight", j.name, j.eps[i-1].num, ep.num)
			}
			if ep.distinct+ep.skipped+ep.excluded+ep.resumed+len(ep.planned)+ep.pending+ep.away+ep.set.free != ep.set.n {
				return fmt.Errorf("job %s epoch %d: handed out %d + skipped %d + excluded %d + resumed %d + planned %d + pending %d + away %d + free %d != %d",
					j.name, ep.num, ep.distinct, ep.skipped, ep.excluded, ep.resumed, len(ep.planned), ep.pending, ep.away, ep.set.free, ep.set.n)
			}
			plans := 0
			for _, r := range j.ranks {
				if r.ep == ep {
					plans += len(r.plan)
				}
			}
			if plans != len(ep.planned) {
				return fmt.Errorf("job %s epoch %d: planned set %d != plans %d", j.name, ep.num, len(ep.planned), plans)
			}
			free := 0
			for l := 0; l < ep.set.n; l++ {
				if !ep.set.has(l) {
					free++
				}
			}
			if free != ep.set.free {
				return fmt.Errorf("job %s epoch %d: free count %d, bits say %d", j.name, ep.num, ep.set.free, free)
			}
		}
		for _, r := range j.ranks {
			ep := r.ep
			if ep.got[r.id]+len(r.plan) > ep.quota[r.id] {
				return fmt.Errorf("job %s rank %d: got %d + planned %d > quota %d", j.name, r.id, ep.got[r.id], len(r.plan), ep.quota[r.id])
			}
			if len(r.plan) > 0 && (r.lost || !j.inFlight(ep)) {
				return fmt.Errorf("job %s rank %d: a plan of %d while lost (%v) or out of flight", j.name, r.id, len(r.plan), r.lost)
			}
			for _, e := range r.plan {
				l, ok := j.local(e)
				if !ok || !ep.set.has(l) {
					return fmt.Errorf("job %s rank %d: planned %d not taken or not in subset", j.name, r.id, e)
				}
				if owner, ok := ep.planned[e]; !ok || int(owner) != r.id {
					return fmt.Errorf("job %s rank %d: plan entry %d planned for %d (%v)", j.name, r.id, e, owner, ok)
				}
			}
		}
	}
	if len(s.buf) > s.opt.BufferSlots {
		return fmt.Errorf("buffer holds %d > %d slots", len(s.buf), s.opt.BufferSlots)
	}
	for p, e := range s.buf {
		if s.bufPos[e] != p || s.state(e) == stNone {
			return fmt.Errorf("buffer entry %d: pos %d/%d state %d", e, s.bufPos[e], p, s.state(e))
		}
		if w := s.wantCount(e); s.ref(e) != min(w, maxRef) {
			return fmt.Errorf("buffer entry %d: refcount %d, %d jobs want it", e, s.ref(e), w)
		}
		if s.state(e) == stBuffered && s.ref(e) == 0 {
			return fmt.Errorf("buffer entry %d installed with refcount 0", e)
		}
	}
	inBuf := 0
	for e := range s.status {
		if s.status[e]&stateMask != stNone {
			inBuf++
		}
	}
	if inBuf != len(s.buf) {
		return fmt.Errorf("%d samples have a buffer state, buffer lists %d", inBuf, len(s.buf))
	}
	if d := s.dsa; d != nil {
		for e := int32(0); int(e) < s.n; e++ {
			var m uint64
			for _, j := range d.group {
				if j.free(j.eps[0], e) {
					m |= 1 << uint(j.slot)
				}
			}
			if d.mask(e) != m {
				return fmt.Errorf("dsa: sample %d in bucket %b, needed by %b", e, d.mask(e), m)
			}
		}
	}
	return nil
}

// meanPosition is the mean of pos/(n-1) over the marked samples of an
// epoch's order.
func meanPosition(order []int, marked func(int) bool) (sum float64, count int) {
	for p, e := range order {
		if marked(e) {
			sum += float64(p) / float64(len(order)-1)
			count++
		}
	}
	return sum, count
}

// chiSquareCritical is the upper quantile of the chi-square distribution with
// df degrees of freedom at the normal quantile z (Wilson–Hilferty).
func chiSquareCritical(df int, z float64) float64 {
	k := float64(df)
	a := 2 / (9 * k)
	return k * math.Pow(1-a+z*math.Sqrt(a), 3)
}

// chiSquare of observed counts against a uniform expectation.
func chiSquare(counts []int) float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	exp := float64(total) / float64(len(counts))
	x := 0.0
	for _, c := range counts {
		d := float64(c) - exp
		x += d * d / exp
	}
	return x
}

func isPermutation(order []int, subset []int) bool {
	a, b := slices.Clone(order), slices.Clone(subset)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
