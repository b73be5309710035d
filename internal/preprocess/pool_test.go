package preprocess

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// stepLog counts executions of (sample, step) pairs.
type stepLog struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *stepLog) step(key string, i int, body func(ctx context.Context) error) Step {
	return func(ctx context.Context, s *State) error {
		l.mu.Lock()
		if l.n == nil {
			l.n = map[string]int{}
		}
		l.n[fmt.Sprintf("%s/%d", key, i)]++
		l.mu.Unlock()
		return body(ctx)
	}
}

func sleepStep(d time.Duration) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func drain(t *testing.T, p *Pool, n int) []Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard, not a timing assert
	defer cancel()
	var out []Result
	for range n {
		r, err := p.Next(ctx)
		if err != nil {
			t.Fatalf("after %d results: %v", len(out), err)
		}
		out = append(out, r)
	}
	return out
}

// Under a mix of 1 ms and 500 ms samples, with a fixed and with an
// estimated timeout, every sample comes out exactly once and every step
// of every sample runs exactly once (a timed-out sample is never
// recomputed).
func TestPoolEverySampleExactlyOnceEveryStepOnce(t *testing.T) {
	for _, timeout := range []time.Duration{50 * time.Millisecond, 0} {
		t.Run(fmt.Sprint("timeout=", timeout), func(t *testing.T) {
			p, err := NewPool(PoolOptions{Workers: 2, SlowWorkers: 3, Capacity: 16, Timeout: timeout, Warmup: 8})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			var log stepLog
			const n = 80
			want := map[string]int{}
			go func() {
				for i := range n {
					key := fmt.Sprintf("s%03d", i)
					d := time.Millisecond
					if i%10 == 9 {
						d = 500 * time.Millisecond
					}
					steps := []Step{
						log.step(key, 0, sleepStep(time.Millisecond)),
						log.step(key, 1, sleepStep(d)),
						log.step(key, 2, sleepStep(time.Millisecond)),
					}
					if err := p.Submit(context.Background(), Task{Key: key, Steps: steps}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			for i := range n {
				want[fmt.Sprintf("s%03d", i)] = 0
			}
			for _, r := range drain(t, p, n) {
				if r.Err != nil {
					t.Errorf("%s: %v", r.Key, r.Err)
				}
				if _, ok := want[r.Key]; !ok {
					t.Errorf("unknown key %q", r.Key)
				}
				want[r.Key]++
			}
			for k, c := range want {
				if c != 1 {
					t.Errorf("sample %s delivered %d times", k, c)
				}
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			if len(log.n) != 3*n {
				t.Errorf("%d (sample, step) pairs ran, want %d", len(log.n), 3*n)
			}
			for k, c := range log.n {
				if c != 1 {
					t.Errorf("step %s ran %d times", k, c)
				}
			}
			st := p.Stats()
			t.Logf("stats %+v", st)
			if st.Slow < n/10 {
				t.Errorf("%d samples classified slow, want at least the %d 500-ms ones", st.Slow, n/10)
			}
			if st.Done != n || st.Fast+st.Slow != n {
				t.Errorf("stats %+v: want %d done", st, n)
			}
		})
	}
}

// A sample stuck in a step does not delay fast ones: with the stuck
// samples blocked on a channel (no clock involved), every fast sample
// comes out while they are still stuck, then they finish in the
// background and are marked slow.
func TestPoolStuckSampleDoesNotDelayFastOnes(t *testing.T) {
	p, err := NewPool(PoolOptions{Workers: 2, SlowWorkers: 2, Capacity: 64, Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	release := make(chan struct{})
	var log stepLog
	stuck := func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ctx := context.Background()
	for i := range 2 {
		key := fmt.Sprintf("stuck%d", i)
		if err := p.Submit(ctx, Task{Key: key, Steps: []Step{log.step(key, 0, stuck), log.step(key, 1, sleepStep(0))}}); err != nil {
			t.Fatal(err)
		}
	}
	const fast = 50
	for i := range fast {
		key := fmt.Sprintf("fast%02d", i)
		if err := p.Submit(ctx, Task{Key: key, Steps: []Step{log.step(key, 0, sleepStep(0))}}); err != nil {
			t.Fatal(err)
		}
	}
	got := drain(t, p, fast)
	for _, r := range got {
		if r.Key[:4] != "fast" {
			t.Fatalf("got %s before the stuck samples were released", r.Key)
		}
	}
	if p.IsReady("stuck0") || p.IsReady("stuck1") {
		t.Fatal("a stuck sample is ready before its release")
	}
	// Both are held inside their step until their timers run: released
	// before the second timer ran, the second would end fast.
	for deadline := time.Now().Add(10 * time.Second); p.Stats().DetachedInStep < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: the stuck samples were not moved to the background", p.Stats())
		}
	}
	close(release)
	for _, key := range []string{"stuck0", "stuck1"} {
		r, err := p.Take(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Slow || r.Err != nil {
			t.Errorf("%s: slow=%v err=%v, want slow and no error", key, r.Slow, r.Err)
		}
	}
	// Both stuck samples held both fast workers, so the fast ones could
	// only flow once at least one was detached inside its step; the test
	// released them once both were.
	if st := p.Stats(); st.DetachedInStep < 1 || st.DetachedInStep+st.MovedAtBoundary != 2 {
		t.Errorf("stats %+v: want both stuck samples moved to the background, at least one inside its step", st)
	}
	for k, c := range log.n {
		if c != 1 {
			t.Errorf("step %s ran %d times", k, c)
		}
	}
}

// A sample over its timeout between steps moves to the temp queue and a
// background worker continues it from the next step.
func TestPoolMovesTimedOutSampleAtStepBoundary(t *testing.T) {
	p, err := NewPool(PoolOptions{Workers: 1, SlowWorkers: 1, Capacity: 8, Timeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var mu sync.Mutex
	var order []string
	mark := func(name string) Step {
		return func(ctx context.Context, s *State) error {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			return nil
		}
	}
	// Fill the detach slot so the timer cannot detach in a step.
	p.detachOK <- struct{}{}
	if err := p.Submit(context.Background(), Task{Key: "a", Steps: []Step{mark("a0"), mark("a1"), mark("a2")}}); err != nil {
		t.Fatal(err)
	}
	r := drain(t, p, 1)[0]
	if !r.Slow || r.Err != nil {
		t.Fatalf("slow=%v err=%v", r.Slow, r.Err)
	}
	if fmt.Sprint(order) != "[a0 a1 a2]" {
		t.Errorf("steps ran as %v, want each once in order", order)
	}
	if st := p.Stats(); st.MovedAtBoundary != 1 {
		t.Errorf("stats %+v: want 1 moved at a step boundary", st)
	}
	<-p.detachOK
}

// The estimated timeout is the 75th percentile of recent sample times,
// and the 90th while too many samples were classified slow.
func TestPoolTimeoutIsPercentileOfMeasuredTimes(t *testing.T) {
	// The estimate is refreshed every 8 samples: use a window of 96.
	e := newEstimator(PoolOptions{Percentile: 0.75, FallbackPercentile: 0.9, MaxSlowFraction: 0.35, Warmup: 8, Window: 96})
	if e.timeout() != 0 {
		t.Fatalf("timeout %v before any sample, want none", e.timeout())
	}
	rng := rand.New(rand.NewPCG(1, 1))
	perm := rng.Perm(96)
	for _, i := range perm {
		e.add(time.Duration(i+1)*time.Millisecond, i+1 > 72)
	}
	// Nearest rank: ceil(0.75*96) = 72nd smallest of 1..96 ms.
	if got := e.timeout(); got != 72*time.Millisecond {
		t.Errorf("timeout %v, want the 75th percentile 72ms", got)
	}
	for _, i := range perm {
		e.add(time.Duration(i+1)*time.Millisecond, i+1 > 48) // half classified slow
	}
	// ceil(0.9*96) = 87.
	if got := e.timeout(); got != 87*time.Millisecond {
		t.Errorf("timeout %v with half the samples slow, want the 90th percentile 87ms", got)
	}
}

// Submit blocks once Capacity samples are outstanding; Ready lists
// finished samples; Take hands out a given one; errors are per sample.
func TestPoolBoundedReadyTakeAndErrors(t *testing.T) {
	p, err := NewPool(PoolOptions{Workers: 1, SlowWorkers: 1, Capacity: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	boom := errors.New("boom")
	ok := func(ctx context.Context, s *State) error { s.Value = s.Key; return nil }
	bad := func(ctx context.Context, s *State) error { return boom }
	if err := p.Submit(ctx, Task{Key: "a", Steps: []Step{ok}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Submit(ctx, Task{Key: "b", Steps: []Step{bad}}); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err = p.Submit(short, Task{Key: "c", Steps: []Step{ok}})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third submit with capacity 2: %v, want it to block until its deadline", err)
	}
	rb, err := p.Take(ctx, "b")
	if err != nil || !errors.Is(rb.Err, boom) {
		t.Fatalf("take b: %v, result error %v", err, rb.Err)
	}
	for !p.IsReady("a") {
		time.Sleep(time.Millisecond)
	}
	if r := p.Ready(); fmt.Sprint(r) != "[a]" {
		t.Errorf("Ready() = %v, want [a]", r)
	}
	ra, err := p.Take(ctx, "a")
	if err != nil || ra.State.Value != "a" {
		t.Fatalf("take a: %v %+v", err, ra)
	}
	if _, err := p.Take(ctx, "zz"); !errors.Is(err, ErrBadOptions) {
		t.Errorf("take of an unknown key: %v", err)
	}
}

// Close cancels running steps and stops every worker; Submit and Next
// then fail with ErrClosed.
func TestPoolCloseCancels(t *testing.T) {
	p, err := NewPool(PoolOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 4)
	wait := func(ctx context.Context, s *State) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	for i := range 2 {
		if err := p.Submit(context.Background(), Task{Key: fmt.Sprint(i), Steps: []Step{wait}}); err != nil {
			t.Fatal(err)
		}
	}
	<-started
	<-started
	p.Close()
	if err := p.Submit(context.Background(), Task{Key: "x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("submit after close: %v", err)
	}
	if _, err := p.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("next after close: %v", err)
	}
}
