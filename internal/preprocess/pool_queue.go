package preprocess

// The pool's small parts: the temp queue of keys, and the timeout
// estimator (pool.go has the design).

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// keyQueue is a FIFO of keys that reuses its memory: popping by
// reslicing would move the slice's start forward until every push
// reallocates.
type keyQueue struct {
	keys []string
	head int
}

func (q *keyQueue) len() int { return len(q.keys) - q.head }

func (q *keyQueue) push(k string) {
	if q.head > 0 && q.head == len(q.keys) {
		q.keys, q.head = q.keys[:0], 0
	} else if q.head > 32 && q.head > len(q.keys)/2 {
		n := copy(q.keys, q.keys[q.head:])
		clear(q.keys[n:])
		q.keys, q.head = q.keys[:n], 0
	}
	q.keys = append(q.keys, k)
}

func (q *keyQueue) pop() string {
	k := q.keys[q.head]
	q.keys[q.head] = ""
	q.head++
	return k
}

// estimator keeps recent sample times and the timeout derived from them.
type estimator struct {
	opts PoolOptions
	mu   sync.Mutex
	ring []time.Duration
	slow []bool
	n    int // samples recorded
	cur  atomic.Int64
}

func newEstimator(opts PoolOptions) *estimator {
	e := &estimator{opts: opts}
	e.cur.Store(int64(opts.Timeout))
	return e
}

// timeout is the current per-sample timeout (0: none yet).
func (e *estimator) timeout() time.Duration { return time.Duration(e.cur.Load()) }

func (e *estimator) add(d time.Duration, slow bool) {
	if e.opts.Timeout > 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.ring) < e.opts.Window {
		e.ring = append(e.ring, d)
		e.slow = append(e.slow, slow)
	} else {
		e.ring[e.n%e.opts.Window] = d
		e.slow[e.n%e.opts.Window] = slow
	}
	e.n++
	if e.n < e.opts.Warmup || (e.n > e.opts.Warmup && e.n%8 != 0) {
		return
	}
	nslow := 0
	for _, s := range e.slow {
		if s {
			nslow++
		}
	}
	pct := e.opts.Percentile
	if float64(nslow) > e.opts.MaxSlowFraction*float64(len(e.slow)) {
		pct = e.opts.FallbackPercentile
	}
	e.cur.Store(int64(percentile(e.ring, pct)))
}

// percentile returns the p-quantile of ds (nearest rank).
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}
