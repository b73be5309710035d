package source

// The bandwidth cap of source reads.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Limiter is the bandwidth cap of source reads: a token bucket over bytes,
// charged after each read with the bytes it returned. A read of a small
// file through a large copy buffer costs what it read, not the buffer's
// size (charging the buffer capped 100 KB files at 1 MB/s to one file a
// second). A read waits only until the reads before it are paid for (the
// bucket is not in debt); it does not know its size in advance. Over any
// window the bytes read are at most the burst, plus the rate times the
// window, plus the reads already admitted at its start (one buffer per
// reader); in the long run the rate is the cap whatever the read sizes.
// A zero rate means no limit.
//
// The limiter also sees every read's duration (Done): an observer set
// with SetObserver gets it, e.g. a latency histogram.
type Limiter struct {
	rate  float64 // bytes per second
	burst float64

	mu     sync.Mutex
	tokens float64 // negative: the debt of reads already done
	last   time.Time

	observe atomic.Pointer[func(n int, took time.Duration)]
}

// NewLimiter returns a limiter of rate bytes/s with a burst of 1/4 s of
// traffic (at least 1 MiB).
func NewLimiter(rate float64) *Limiter {
	if rate <= 0 {
		return &Limiter{}
	}
	burst := rate / 4
	if burst < 1<<20 {
		burst = 1 << 20
	}
	return &Limiter{rate: rate, burst: burst, tokens: burst, last: time.Now()}
}

// refill adds the tokens earned since the last call; l.mu is held.
func (l *Limiter) refill(now time.Time) {
	l.tokens += now.Sub(l.last).Seconds() * l.rate
	if l.tokens > l.burst {
		l.tokens = l.burst
	}
	l.last = now
}

// Wait blocks until the bytes of earlier reads are paid for, or ctx ends.
func (l *Limiter) Wait(ctx context.Context) error {
	if l.rate <= 0 {
		return nil
	}
	for {
		l.mu.Lock()
		l.refill(time.Now())
		debt := -l.tokens
		l.mu.Unlock()
		if debt <= 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		tm := time.NewTimer(time.Duration(debt / l.rate * float64(time.Second)))
		select {
		case <-tm.C:
			// Other readers may have run up a new debt meanwhile: look again.
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		}
	}
}

// Done charges a read of n bytes that took took, and reports it to the
// observer.
func (l *Limiter) Done(n int, took time.Duration) {
	if fn := l.observe.Load(); fn != nil {
		(*fn)(n, took)
	}
	if l.rate <= 0 || n <= 0 {
		return
	}
	l.mu.Lock()
	l.refill(time.Now())
	l.tokens -= float64(n)
	l.mu.Unlock()
}

// SetObserver has fn called after every read with its bytes and duration
// (nil: none). fn runs on the reader's goroutine: keep it cheap.
func (l *Limiter) SetObserver(fn func(n int, took time.Duration)) {
	if fn == nil {
		l.observe.Store(nil)
		return
	}
	l.observe.Store(&fn)
}

// Limiter is the source's bandwidth cap, which also times its reads.
func (s *Source) Limiter() *Limiter { return s.limit }
