package preprocess

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The worker pool implements MinatoLoader's load balancer (§4.2,
// Algorithm 1) without its two defects: a timed-out sample is never
// computed twice, and a sample stuck inside one long step does not hold
// a fast worker.
//
// Fast workers take submitted samples and run their steps. Each sample
// has a timeout (the 75th percentile of measured sample times,
// re-estimated as samples finish; the 90th while more than
// MaxSlowFraction of recent samples were slow). When it expires:
//
//   - at a step boundary, the fast worker puts the sample, with the index
//     of the next step, on the bounded temp queue and goes back to fast
//     samples; background workers continue it from that step;
//   - inside a step, if a background slot is free, the sample's goroutine
//     becomes a background worker for that sample (it finishes the step
//     and the rest) and a new fast worker takes its place at once; with no
//     free slot it moves to the temp queue at its next step boundary.
//
// Finished samples wait in a ready set until Next or Take hands them out:
// fast ones first, then slow ones. Ready lists them so a sampler can
// prefer samples that are ready. Submit blocks while Capacity samples are
// submitted and not yet handed out, so every queue is bounded.
//
// Lock order: Pool.mu, then estimator.mu (never the reverse).

// Task is one sample for the pool: its key, its state, and the steps to
// run over it in order.
type Task struct {
	Key   string
	State *State
	Steps []Step
}

// Result is a finished sample.
type Result struct {
	Key   string
	State *State
	Err   error
	// Slow reports that the sample exceeded its timeout and finished in
	// the background.
	Slow bool
	// Compute is the time spent in the sample's steps.
	Compute time.Duration
}

// PoolOptions configures a Pool.
type PoolOptions struct {
	// Workers is the number of fast workers; 0 means GOMAXPROCS.
	Workers int
	// SlowWorkers is the number of background workers draining the temp
	// queue, and separately the number of samples that may be detached
	// inside a step at once; 0 means max(1, Workers/2).
	SlowWorkers int
	// Capacity bounds samples submitted and not yet handed out; 0 means
	// 4 × (Workers + SlowWorkers).
	Capacity int
	// Timeout fixes the per-sample timeout; 0 estimates it from measured
	// times, and no sample times out before Warmup samples have finished.
	Timeout time.Duration
	// Percentile (default 0.75) and FallbackPercentile (default 0.90) of
	// recent sample times give the timeout; the fallback applies while
	// more than MaxSlowFraction (default 0.35) of recent samples were
	// slow.
	Percentile, FallbackPercentile, MaxSlowFraction float64
	// Warmup (default 16) samples are measured before the first timeout;
	// Window (default 512) recent samples feed the estimate.
	Warmup, Window int
}

// PoolStats counts what the pool did.
type PoolStats struct {
	Submitted, Done, Fast, Slow, Failed int64
	// MovedAtBoundary and DetachedInStep count the two ways a sample
	// went to the background.
	MovedAtBoundary, DetachedInStep int64
	Timeout                         time.Duration
	Ready, InFlight                 int
}

type job struct {
	task    Task
	next    int // index of the next step to run
	compute time.Duration
	slow    bool
	err     error // set on delivery
	// start and timeout of the run in a fast worker, published to the
	// worker's timer with the job (fastTimer.cur).
	start   time.Time
	timeout time.Duration
	// phase: running in a fast worker, detached by the timer, or claimed
	// by the fast worker (finished or moved at a boundary).
	phase atomic.Int32
}

const (
	phaseFast int32 = iota
	phaseDetached
	phaseClaimed
)

// Pool runs Tasks with MinatoLoader's fast/slow split.
type Pool struct {
	opts   PoolOptions
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	est    *estimator

	in       chan *job
	temp     chan *job
	slots    chan struct{} // capacity: one per outstanding sample
	detachOK chan struct{} // in-step detach slots

	mu      sync.Mutex
	pending map[string]bool // submitted, not handed out
	ready   map[string]*job // finished, not handed out
	fastQ   keyQueue
	slowQ   keyQueue
	// changed is closed and replaced when ready changes, if a waiter
	// took it (watched): a pool whose consumer keeps up makes no
	// channel per sample.
	changed chan struct{}
	watched bool
	closed  bool

	submitted, done, fast, slow, failed, moved, detached atomic.Int64
}

// NewPool starts a pool. Close stops it.
func NewPool(opts PoolOptions) (*Pool, error) {
	if opts.Workers < 0 || opts.SlowWorkers < 0 || opts.Capacity < 0 || opts.Timeout < 0 ||
		opts.Warmup < 0 || opts.Window < 0 {
		return nil, fmt.Errorf("preprocess: pool options %+v: %w: negative value", opts, ErrBadOptions)
	}
	if opts.Workers == 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	if opts.SlowWorkers == 0 {
		opts.SlowWorkers = max(1, opts.Workers/2)
	}
	if opts.Capacity == 0 {
		opts.Capacity = 4 * (opts.Workers + opts.SlowWorkers)
	}
	if opts.Percentile == 0 {
		opts.Percentile = 0.75
	}
	if opts.FallbackPercentile == 0 {
		opts.FallbackPercentile = 0.90
	}
	if opts.MaxSlowFraction == 0 {
		opts.MaxSlowFraction = 0.35
	}
	for _, f := range []float64{opts.Percentile, opts.FallbackPercentile, opts.MaxSlowFraction} {
		if !(f > 0 && f <= 1) {
			return nil, fmt.Errorf("preprocess: pool percentile or fraction %v: %w: want 0 < x <= 1", f, ErrBadOptions)
		}
	}
	if opts.Warmup == 0 {
		opts.Warmup = 16
	}
	if opts.Window == 0 {
		opts.Window = 512
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{
		opts: opts, ctx: ctx, cancel: cancel,
		est:      newEstimator(opts),
		in:       make(chan *job, opts.Capacity),
		temp:     make(chan *job, opts.Capacity),
		slots:    make(chan struct{}, opts.Capacity),
		detachOK: make(chan struct{}, opts.SlowWorkers),
		pending:  map[string]bool{},
		ready:    map[string]*job{},
		changed:  make(chan struct{}),
	}
	for range opts.Workers {
		p.startFast()
	}
	for range opts.SlowWorkers {
		p.wg.Add(1)
		go p.background()
	}
	return p, nil
}

// Options returns the options in effect (defaults filled in).
func (p *Pool) Options() PoolOptions { return p.opts }

// Submit queues a task. It blocks while Capacity samples are outstanding
// and fails if the key is already outstanding, ctx ends or the pool is
// closed.
func (p *Pool) Submit(ctx context.Context, t Task) error {
	if t.State == nil {
		t.State = &State{Key: t.Key}
	}
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("preprocess: submit %s: %w", t.Key, ctx.Err())
	case <-p.ctx.Done():
		return fmt.Errorf("preprocess: submit %s: %w", t.Key, ErrClosed)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.slots
		return fmt.Errorf("preprocess: submit %s: %w", t.Key, ErrClosed)
	}
	if p.pending[t.Key] {
		p.mu.Unlock()
		<-p.slots
		return fmt.Errorf("preprocess: submit %s: %w: already submitted", t.Key, ErrBadOptions)
	}
	p.pending[t.Key] = true
	p.mu.Unlock()
	p.submitted.Add(1)
	// Cannot block: at most Capacity jobs exist.
	p.in <- &job{task: t}
	return nil
}

// Next returns a ready result, fast samples first, waiting for one if
// none is ready.
func (p *Pool) Next(ctx context.Context) (Result, error) {
	return p.wait(ctx, "")
}

// Take returns the result for key, waiting for it.
func (p *Pool) Take(ctx context.Context, key string) (Result, error) {
	return p.wait(ctx, key)
}

func (p *Pool) wait(ctx context.Context, key string) (Result, error) {
	for {
		p.mu.Lock()
		if j := p.takeLocked(key); j != nil {
			p.mu.Unlock()
			<-p.slots
			return Result{Key: j.task.Key, State: j.task.State, Err: j.err, Slow: j.slow, Compute: j.compute}, nil
		}
		if key != "" && !p.pending[key] {
			p.mu.Unlock()
			return Result{}, fmt.Errorf("preprocess: take %s: %w: not submitted", key, ErrBadOptions)
		}
		if key == "" && len(p.pending) == 0 && p.closed {
			p.mu.Unlock()
			return Result{}, fmt.Errorf("preprocess: next: %w", ErrClosed)
		}
		ch, closed := p.changed, p.closed
		p.watched = true
		p.mu.Unlock()
		if closed {
			return Result{}, fmt.Errorf("preprocess: next: %w", ErrClosed)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return Result{}, fmt.Errorf("preprocess: next: %w", ctx.Err())
		}
	}
}

func (p *Pool) takeLocked(key string) *job {
	if key == "" {
		for _, q := range [...]*keyQueue{&p.fastQ, &p.slowQ} {
			for q.len() > 0 {
				k := q.pop()
				if j, ok := p.ready[k]; ok {
					delete(p.ready, k)
					delete(p.pending, k)
					return j
				}
			}
		}
		return nil
	}
	j, ok := p.ready[key]
	if !ok {
		return nil
	}
	delete(p.ready, key)
	delete(p.pending, key)
	// Its queue entry is skipped when reached.
	return j
}

// Ready returns the keys of finished samples not yet handed out, fast
// ones first.
func (p *Pool) Ready() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make([]string, 0, len(p.ready))
	for _, q := range [...]*keyQueue{&p.fastQ, &p.slowQ} {
		for _, k := range q.keys[q.head:] {
			if _, ok := p.ready[k]; ok {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// IsReady reports whether key has finished and not been handed out.
func (p *Pool) IsReady(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.ready[key]
	return ok
}

// Stats returns counters and the current timeout.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	ready, inflight := len(p.ready), len(p.pending)-len(p.ready)
	p.mu.Unlock()
	return PoolStats{
		Submitted: p.submitted.Load(), Done: p.done.Load(), Fast: p.fast.Load(), Slow: p.slow.Load(),
		Failed: p.failed.Load(), MovedAtBoundary: p.moved.Load(), DetachedInStep: p.detached.Load(),
		Timeout: p.est.timeout(), Ready: ready, InFlight: inflight,
	}
}

// Close cancels running steps (through their context), stops the
// workers and waits for them. Results not handed out are dropped.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return nil
}

func (p *Pool) startFast() {
	p.wg.Add(1)
	go p.fastWorker()
}

// fastTimer is a fast worker's one timer, which serves every sample the
// worker runs (a timer per sample would be an allocation per sample): cur
// is the sample in progress, and a firing that finds a sample which has
// not yet run for its timeout (a stale firing meant for the previous one)
// does nothing.
type fastTimer struct {
	cur   atomic.Pointer[job]
	timer *time.Timer
}

func (p *Pool) fastWorker() {
	defer p.wg.Done()
	w := &fastTimer{}
	w.timer = time.AfterFunc(time.Hour, func() {
		if j := w.cur.Load(); j != nil && time.Since(j.start) >= j.timeout {
			p.tryDetach(j)
		}
	})
	w.timer.Stop()
	defer w.timer.Stop()
	for {
		select {
		case j := <-p.in:
			if detached := p.runFast(w, j); detached {
				// This goroutine finished its sample as a background
				// worker; a replacement took its fast slot.
				return
			}
		case <-p.ctx.Done():
			return
		}
	}
}

// runFast runs j in a fast worker. It returns true if the sample was
// detached while in a step (this goroutine then finished it as a
// background worker and must exit).
func (p *Pool) runFast(w *fastTimer, j *job) bool {
	timeout := p.est.timeout()
	start := time.Now()
	if timeout > 0 {
		j.start, j.timeout = start, timeout
		w.cur.Store(j)
		w.timer.Reset(timeout)
		defer func() {
			w.timer.Stop()
			w.cur.Store(nil)
		}()
	}
	steps := j.task.Steps
	for j.next < len(steps) {
		if j.phase.Load() == phaseDetached {
			break
		}
		if err := p.ctx.Err(); err != nil {
			return false
		}
		t0 := time.Now()
		err := steps[j.next](p.ctx, j.task.State)
		j.compute += time.Since(t0)
		j.next++
		if err != nil {
			if j.phase.CompareAndSwap(phaseFast, phaseClaimed) {
				p.deliver(j, err)
				return false
			}
			<-p.detachOK
			p.deliver(j, err)
			return true
		}
		if j.next < len(steps) && timeout > 0 && time.Since(start) > timeout &&
			j.phase.CompareAndSwap(phaseFast, phaseClaimed) {
			// Algorithm 1, line 11: to the temp queue with the index of
			// the next step. Capacity bounds the number of jobs, so this
			// never blocks.
			j.slow = true
			p.moved.Add(1)
			select {
			case p.temp <- j:
			case <-p.ctx.Done():
			}
			return false
		}
	}
	if j.phase.CompareAndSwap(phaseFast, phaseClaimed) {
		p.deliver(j, nil)
		return false
	}
	// Detached: finish the remaining steps here, in the background slot
	// the timer took for us.
	defer func() { <-p.detachOK }()
	p.finish(j)
	return true
}

// tryDetach runs when a sample's timeout expires while it is in a fast
// worker.
func (p *Pool) tryDetach(j *job) {
	select {
	case p.detachOK <- struct{}{}:
	default:
		return // no slot: the sample moves at its next step boundary
	}
	if !j.phase.CompareAndSwap(phaseFast, phaseDetached) {
		<-p.detachOK
		return
	}
	p.detached.Add(1)
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if !closed {
		p.startFast()
	}
}

func (p *Pool) background() {
	defer p.wg.Done()
	for {
		select {
		case j := <-p.temp:
			p.finish(j)
		case <-p.ctx.Done():
			return
		}
	}
}

// finish runs j's remaining steps without a timeout (Algorithm 1, lines
// 13-17) and delivers it.
func (p *Pool) finish(j *job) {
	steps := j.task.Steps
	for j.next < len(steps) {
		if p.ctx.Err() != nil {
			return
		}
		t0 := time.Now()
		err := steps[j.next](p.ctx, j.task.State)
		j.compute += time.Since(t0)
		j.next++
		if err != nil {
			p.deliver(j, err)
			return
		}
	}
	p.deliver(j, nil)
}

func (p *Pool) deliver(j *job, err error) {
	if err != nil && p.ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return // shutting down
	}
	// A sample detached by the timer is slow; its goroutine sees the
	// phase through the atomic, so read it here rather than a field the
	// timer would write.
	slow := j.slow || j.phase.Load() == phaseDetached
	p.done.Add(1)
	if err != nil {
		p.failed.Add(1)
	} else {
		p.est.add(j.compute, slow)
	}
	if slow {
		p.slow.Add(1)
	} else {
		p.fast.Add(1)
	}
	j.err, j.slow = err, slow
	key := j.task.Key
	p.mu.Lock()
	p.ready[key] = j
	if slow {
		p.slowQ.push(key)
	} else {
		p.fastQ.push(key)
	}
	if p.watched {
		close(p.changed)
		p.changed, p.watched = make(chan struct{}), false
	}
	p.mu.Unlock()
}
