package preprocess

// What a View tells its consumers: where a sample stands, which samples
// are cached for them, and the sample taken (engine.go has the design).

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// SampleStatus is where a sample stands for a consumer.
type SampleStatus int

// Sample statuses.
const (
	StatusNone      SampleStatus = iota // nothing cached or in production for the consumer
	StatusCached                        // a generation the consumer has not taken is cached
	StatusProducing                     // in production (Want or another consumer's Take)
	StatusSlow                          // in production past the pool's timeout
	StatusFailed                        // the sample cannot be preprocessed
)

// Status tells where sample s stands for consumer c.
func (v *View) Status(c, s int) SampleStatus {
	checkConsumer(c)
	e := v.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, bad := e.failed[v.failKey(s)]; bad {
		return StatusFailed
	}
	if v.cachedForLocked(c, s) != nil {
		return StatusCached
	}
	if pr := v.prodForLocked(c, s); pr != nil {
		if t := e.pool.Stats().Timeout; t > 0 && time.Since(pr.start) > t {
			return StatusSlow
		}
		return StatusProducing
	}
	return StatusNone
}

func (v *View) failKey(s int) string { return v.static.key + "#" + strconv.Itoa(s) }

// cachedForLocked returns a cached generation of s that c has not taken.
func (v *View) cachedForLocked(c, s int) *augGen {
	for _, g := range v.aug[s] {
		if g.taken&bit(c) == 0 {
			return g
		}
	}
	return nil
}

// prodForLocked returns a production of s in flight that c may take: one
// prefetched for c, or one nobody took yet, or another's it has not
// joined... any whose generation c has not taken (a generation in flight
// has not been taken by anyone).
func (v *View) prodForLocked(c, s int) *prod {
	if pr := v.want[s][c]; pr != nil {
		return pr
	}
	for _, pr := range v.e.prods {
		if pr.v == v && pr.sample == s && pr.takers&bit(c) == 0 {
			return pr
		}
	}
	return nil
}

// Candidates appends to dst up to max samples with a cached generation
// consumer c has not taken, for ODS to substitute (in no particular
// order).
func (v *View) Candidates(c int, dst []int, max int) []int {
	checkConsumer(c)
	v.e.mu.Lock()
	defer v.e.mu.Unlock()
	out := dst
	for s, gens := range v.aug {
		for _, g := range gens {
			if g.taken&bit(c) == 0 {
				out = append(out, s)
				break
			}
		}
		if len(out) >= max {
			break
		}
	}
	return out
}

// Cached reports whether a generation of s that consumer c has not taken
// is cached (cheap: no pool statistics).
func (v *View) Cached(c, s int) bool {
	checkConsumer(c)
	v.e.mu.Lock()
	defer v.e.mu.Unlock()
	return v.cachedForLocked(c, s) != nil
}

// DecodedCandidates appends to dst up to max samples whose decoded form is
// cached.
func (v *View) DecodedCandidates(dst []int, max int) []int {
	v.e.mu.Lock()
	defer v.e.mu.Unlock()
	for s := range v.static.dec {
		if len(dst) >= max {
			break
		}
		dst = append(dst, s)
	}
	return dst
}

// DecodedCached reports whether the decoded form of s is cached.
func (v *View) DecodedCached(s int) bool {
	v.e.mu.Lock()
	defer v.e.mu.Unlock()
	_, ok := v.static.dec[s]
	return ok
}

// Want asks for sample s to be produced for consumer c ahead of its Take.
// It reports whether a generation for c is cached, in production, or was
// queued now; false when the augmented budget or the pool has no room
// (the Take then produces it).
func (v *View) Want(c, s int) bool {
	checkConsumer(c)
	e := v.e
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return false
	}
	if _, bad := e.failed[v.failKey(s)]; bad || v.cachedForLocked(c, s) != nil {
		e.mu.Unlock()
		return true
	}
	if pr := v.prodForLocked(c, s); pr != nil {
		pr.forWant |= bit(c)
		v.wantLocked(s, c, pr)
		e.mu.Unlock()
		return true
	}
	est := max(v.avg, 1)
	if e.augUsed+est > e.o.AugmentedBytes {
		e.mu.Unlock()
		return false
	}
	pr := v.newProdLocked(s)
	pr.reserved = est
	e.augUsed += est
	pr.forWant = bit(c)
	v.wantLocked(s, c, pr)
	e.mu.Unlock()
	return e.submit(pr, false)
}

func (v *View) wantLocked(s, c int, pr *prod) {
	w := v.want[s]
	if w == nil {
		w = map[int]*prod{}
		v.want[s] = w
	}
	w[c] = pr
}

func (v *View) newProdLocked(s int) *prod {
	g := v.nextGen[s]
	v.nextGen[s] = g + 1
	pr := &prod{v: v, sample: s, gen: g, start: time.Now(), done: make(chan struct{}),
		key: v.key + "#" + strconv.Itoa(s) + "#" + strconv.FormatUint(g, 10)}
	v.e.prods[pr.key] = pr
	v.e.st.InFlight = len(v.e.prods)
	return pr
}

// TakeInfo says how a Take was served.
type TakeInfo struct {
	Gen    uint64
	Cached bool // the generation was in the cache (produced ahead or for another consumer)
	Slow   bool // its production ran past the pool's timeout
}

// Take returns a generation of sample s that consumer c has not taken,
// waiting for its production if needed, and records that c took it.
func (v *View) Take(ctx context.Context, c, s int) (*Tensor, TakeInfo, error) {
	checkConsumer(c)
	e := v.e
	e.mu.Lock()
	if err, bad := e.failed[v.failKey(s)]; bad {
		e.mu.Unlock()
		return nil, TakeInfo{}, err
	}
	if g := v.cachedForLocked(c, s); g != nil {
		v.takeLocked(c, s, g)
		e.st.AugmentedHits++
		e.mu.Unlock()
		return g.t, TakeInfo{Gen: g.gen, Cached: true}, nil
	}
	pr := v.prodForLocked(c, s)
	started := false
	if pr == nil {
		if e.closed {
			e.mu.Unlock()
			return nil, TakeInfo{}, ErrEngineClosed
		}
		pr = v.newProdLocked(s)
		started = true
	}
	pr.takers |= bit(c)
	if w := v.want[s]; w != nil && w[c] == pr {
		delete(w, c)
		if len(w) == 0 {
			delete(v.want, s)
		}
	}
	e.mu.Unlock()
	if started && !e.submit(pr, true) {
		return nil, TakeInfo{}, pr.err
	}
	select {
	case <-pr.done:
	case <-ctx.Done():
		e.mu.Lock()
		pr.takers &^= bit(c)
		e.mu.Unlock()
		return nil, TakeInfo{}, fmt.Errorf("preprocess: take %d: %w", s, ctx.Err())
	}
	if pr.err != nil {
		return nil, TakeInfo{}, pr.err
	}
	return pr.t, TakeInfo{Gen: pr.gen, Slow: pr.slow}, nil
}

// takeLocked records that c took g of s and drops g once every live
// consumer has.
func (v *View) takeLocked(c, s int, g *augGen) {
	g.taken |= bit(c)
	if v.live&^g.taken != 0 {
		return // a live consumer has not taken it yet
	}
	gens := v.aug[s]
	i := slices.Index(gens, g)
	gens = slices.Delete(gens, i, i+1)
	if len(gens) == 0 {
		delete(v.aug, s)
	} else {
		v.aug[s] = gens
	}
	v.e.augUsed -= g.t.Bytes()
	v.e.st.AugmentedEvicted++
}
