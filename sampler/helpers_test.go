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
		if j.served+len(j.plan)+j.set.free != j.set.n {
			return fmt.Errorf("job %s: served %d + planned %d + free %d != %d", j.name, j.served, len(j.plan), j.set.free, j.set.n)
		}
		if len(j.planned) != len(j.plan) {
			return fmt.Errorf("job %s: planned set %d != plan %d", j.name, len(j.planned), len(j.plan))
		}
		for _, e := range j.plan {
			l, ok := j.local(e)
			if !ok || !j.set.has(l) {
				return fmt.Errorf("job %s: planned %d not taken or not in subset", j.name, e)
			}
			if _, ok := j.planned[e]; !ok {
				return fmt.Errorf("job %s: plan entry %d missing from planned set", j.name, e)
			}
		}
		free := 0
		for l := 0; l < j.set.n; l++ {
			if !j.set.has(l) {
				free++
			}
		}
		if free != j.set.free {
			return fmt.Errorf("job %s: free count %d, bits say %d", j.name, j.set.free, free)
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
				if j.free(e) {
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
