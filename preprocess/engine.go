package preprocess

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The Engine is what a mount's preprocessed views run on: every pipeline
// the mount's jobs use, the decoded and augmented caches with the byte
// budgets the DSI model chose, and one MinatoLoader pool (pool.go) that
// produces samples ahead of the jobs.
//
// Sharing (Seneca §5, TensorSocket §3). Jobs with equal pipelines share a
// View; jobs whose pipelines have equal static steps share decoded forms.
// A View's consumers (jobs, numbered 0..63 by the caller) take augmented
// tensors of samples: a tensor is one generation of a sample's
// augmentation, and every consumer takes a given generation at most once.
// A generation is cached while some live consumer has not taken it, and
// dropped once every live consumer has (or left), so one computation
// serves every job and no job ever gets the same tensor twice, in any
// epoch. A consumer that wants a sample whose cached generations it has
// all taken gets a new generation. The decoded cache is filled once and
// kept (no eviction); both caches admit entries only within their
// budgets.
//
// Determinism. Generation g of a sample draws its augmentation from
// SampleRNG(Seed+g, Name(sample)): generation 0 equals `epochfs preprocess
// --seed Seed` of the same file, generation g equals --seed Seed+g, when
// it is produced from the encoded bytes. One produced from a cached decoded
// form (and one produced to fill the decoded cache) starts from the image
// decoded at full size, as torchvision does, where `epochfs preprocess`
// may decode a RandomResizedCrop's region at a reduced DCT scale: the same
// crop and flip, pixels within DCT rounding.
//
// Production. Want queues a sample for a consumer ahead of its read (the
// job's lookahead); the pool works on at most its capacity at once, and a
// prefetch is admitted only while the augmented budget can hold its
// result, so memory stays within the budgets plus the pool's capacity of
// samples in flight. Status tells a caller assembling a batch whether a
// sample is ready, in production, or slow (past the pool's timeout:
// MinatoLoader puts such a sample in a later batch instead of waiting).
// A sample is produced once per generation however many consumers wait
// for it; a sample that fails (a corrupt image) is remembered and fails
// again at once, never recomputed.
//
// Lock order: Engine.mu, then the pool's locks (Submit is never called
// with Engine.mu held).

// ErrEngineClosed means the engine was closed.
var ErrEngineClosed = errors.New("preprocess: engine closed")

// MaxConsumers is the number of consumers a View tells apart.
const MaxConsumers = 64

// EngineOptions configure an Engine.
type EngineOptions struct {
	// Load returns a sample's encoded bytes (the mount reads its tiers
	// or the source).
	Load func(ctx context.Context, sample int) ([]byte, error)
	// Name is the sample's file name; an augmentation's random draws
	// depend on the seed, the generation and the name only.
	Name func(sample int) string
	// DecodedBytes and AugmentedBytes are the caches' budgets.
	DecodedBytes, AugmentedBytes int64
	// Seed seeds generation 0 of every sample's augmentation.
	Seed uint64
	// Pool configures the worker pool.
	Pool PoolOptions
}

// EngineStats count what the engine did.
type EngineStats struct {
	DecodedBudget, DecodedBytes     int64
	DecodedEntries                  int
	DecodedHits                     int64
	AugmentedBudget, AugmentedBytes int64 // bytes include prefetches reserved in flight
	AugmentedEntries                int
	AugmentedHits, AugmentedEvicted int64
	Decodes, Augments               int64 // computations run
	Failed                          int64 // samples that failed to preprocess
	InFlight                        int
	Views                           int
	Pool                            PoolStats
}

// Engine runs the views of one mount.
type Engine struct {
	o    EngineOptions
	pool *Pool
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	views   map[string]*View
	statics map[string]*staticPart
	prods   map[string]*prod       // in flight, by pool key
	oneOff  map[string]chan Result // decoded-view tasks, by pool key
	failed  map[string]error       // static key + sample → why it cannot be preprocessed
	decUsed int64
	augUsed int64
	st      EngineStats

	finished atomic.Pointer[func()] // called after each production (OnFinish)
}

// OnFinish sets f to be called, without the engine's locks, each time a
// production finishes: the producer of the prefetches refills the pool
// then instead of on its next tick. f must not block.
func (e *Engine) OnFinish(f func()) { e.finished.Store(&f) }

// staticPart is what pipelines with equal static steps share: the decoded
// cache's entries.
type staticPart struct {
	key  string
	dec  map[int]*Image
	refs int
}

// View is one pipeline of an Engine and its consumers.
type View struct {
	e      *Engine
	key    string
	p      *Pipeline
	static *staticPart
	refs   int

	// Guarded by Engine.mu.
	live    uint64                // consumers joined
	aug     map[int][]*augGen     // cached generations per sample
	nextGen map[int]uint64        // generations drawn per sample
	avg     int64                 // mean tensor bytes produced (prefetch reservations)
	want    map[int]map[int]*prod // sample → consumer → the prefetch made for it
}

type augGen struct {
	gen   uint64
	t     *Tensor
	taken uint64 // consumers that took it
}

// prod is one production in flight.
type prod struct {
	v        *View
	sample   int
	gen      uint64
	key      string
	start    time.Time
	reserved int64  // bytes of the augmented budget held for a prefetch
	takers   uint64 // consumers waiting to take the result
	forWant  uint64 // consumers it was prefetched for
	decodes  bool   // it starts from the encoded bytes
	done     chan struct{}
	t        *Tensor
	err      error
	slow     bool
}

// NewEngine starts an engine.
func NewEngine(o EngineOptions) (*Engine, error) {
	if o.Load == nil || o.Name == nil || o.DecodedBytes < 0 || o.AugmentedBytes < 0 {
		return nil, fmt.Errorf("preprocess: engine: %w: need Load, Name and budgets >= 0", ErrBadOptions)
	}
	pool, err := NewPool(o.Pool)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	e := &Engine{o: o, pool: pool, ctx: ctx, stop: stop,
		views: map[string]*View{}, statics: map[string]*staticPart{},
		prods: map[string]*prod{}, oneOff: map[string]chan Result{}, failed: map[string]error{}}
	e.st.DecodedBudget, e.st.AugmentedBudget = o.DecodedBytes, o.AugmentedBytes
	e.wg.Add(1)
	go e.drain()
	return e, nil
}

// Close stops the pool; productions in flight fail with ErrEngineClosed.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.stop()
	err := e.pool.Close()
	e.wg.Wait()
	e.mu.Lock()
	for _, pr := range e.prods {
		e.finishLocked(pr, nil, ErrEngineClosed, false)
	}
	for _, v := range e.views {
		v.p.Close()
	}
	e.mu.Unlock()
	return err
}

// PipelineKey is the identity of a pipeline: views with equal keys are
// one View. StaticKey is that of its decoded form.
func PipelineKey(o Options) (key, static string) {
	static = fmt.Sprintf("static=%s;maxpix=%d;dct=%v;std=%v;fastup=%v",
		strings.Join(o.Static, ","), o.MaxPixels, !o.NoDCTScaling, o.ForceStdlib, o.FastUpsample)
	var norm []string
	for _, row := range o.Normalize {
		for _, x := range row {
			norm = append(norm, strconv.FormatFloat(x, 'g', -1, 64))
		}
	}
	out := o.Output
	if out == "" {
		out = "uint8_hwc"
	}
	key = fmt.Sprintf("%s|augment=%s;out=%s;norm=%s", static, strings.Join(o.Augment, ","), out, strings.Join(norm, ","))
	return key, static
}

// View registers (or joins) the pipeline of o. Release it when done.
func (e *Engine) View(o Options) (*View, error) {
	key, skey := PipelineKey(o)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrEngineClosed
	}
	if v, ok := e.views[key]; ok {
		v.refs++
		e.mu.Unlock()
		return v, nil
	}
	e.mu.Unlock()
	p, err := New(o) // outside the lock: it loads the decoder
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, ok := e.views[key]; ok { // registered meanwhile
		v.refs++
		p.Close()
		return v, nil
	}
	sp := e.statics[skey]
	if sp == nil {
		sp = &staticPart{key: skey, dec: map[int]*Image{}}
		e.statics[skey] = sp
	}
	sp.refs++
	v := &View{e: e, key: key, p: p, static: sp, refs: 1,
		aug: map[int][]*augGen{}, nextGen: map[int]uint64{}, want: map[int]map[int]*prod{}}
	e.views[key] = v
	e.st.Views = len(e.views)
	return v, nil
}

// Engine is the engine the view belongs to.
func (v *View) Engine() *Engine { return v.e }

// Key is the view's pipeline key.
func (v *View) Key() string { return v.key }

// Pipeline is the view's pipeline.
func (v *View) Pipeline() *Pipeline { return v.p }

// Release gives up one reference; the last drops the view's cached
// augmentations (and the decoded forms no other view shares).
func (v *View) Release() {
	e := v.e
	e.mu.Lock()
	defer e.mu.Unlock()
	v.refs--
	if v.refs > 0 {
		return
	}
	for s := range v.aug {
		v.dropSampleLocked(s)
	}
	delete(e.views, v.key)
	e.st.Views = len(e.views)
	v.static.refs--
	if v.static.refs == 0 {
		for _, img := range v.static.dec {
			e.decUsed -= img.Bytes()
		}
		delete(e.statics, v.static.key)
	}
	go v.p.Close()
}

func bit(c int) uint64 { return 1 << uint(c) }

func checkConsumer(c int) {
	if c < 0 || c >= MaxConsumers {
		panic(fmt.Sprintf("preprocess: consumer %d out of range", c))
	}
}

// Join adds consumer c (a job) to the view.
func (v *View) Join(c int) {
	checkConsumer(c)
	v.e.mu.Lock()
	v.live |= bit(c)
	v.e.mu.Unlock()
}

// Leave removes consumer c: generations every remaining consumer has
// taken are dropped, and its prefetches stop counting as wanted.
func (v *View) Leave(c int) {
	checkConsumer(c)
	e := v.e
	e.mu.Lock()
	defer e.mu.Unlock()
	v.live &^= bit(c)
	for s, w := range v.want {
		if pr := w[c]; pr != nil {
			pr.forWant &^= bit(c)
			delete(w, c)
		}
		if len(w) == 0 {
			delete(v.want, s)
		}
	}
	for s, gens := range v.aug {
		keep := gens[:0]
		for _, g := range gens {
			if g.taken&v.live == v.live {
				e.augUsed -= g.t.Bytes()
				e.st.AugmentedEvicted++
				continue
			}
			g.taken &^= bit(c)
			keep = append(keep, g)
		}
		clear(gens[len(keep):])
		if len(keep) == 0 {
			delete(v.aug, s)
		} else {
			v.aug[s] = keep
		}
	}
}

func (v *View) dropSampleLocked(s int) {
	for _, g := range v.aug[s] {
		v.e.augUsed -= g.t.Bytes()
		v.e.st.AugmentedEvicted++
	}
	delete(v.aug, s)
}

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

// submit hands pr to the pool: blocking for room when wait; else, when the
// pool is full, the prefetch is dropped (and a Take that joined it
// meanwhile submits it again, waiting).
func (e *Engine) submit(pr *prod, wait bool) bool {
	v := pr.v
	s := pr.sample
	st := &State{Key: pr.key, RNG: SampleRNG(e.o.Seed+pr.gen, e.o.Name(s))}
	var steps []Step
	e.mu.Lock()
	dec, cached := v.static.dec[s]
	roomForDecoded := e.decUsed < e.o.DecodedBytes
	e.mu.Unlock()
	if cached {
		e.mu.Lock()
		e.st.DecodedHits++
		e.mu.Unlock()
		st.Img, st.Decoded = dec, dec
		steps = v.p.AugmentSteps()
	} else {
		pr.decodes = true
		st.Keep = roomForDecoded
		load := func(ctx context.Context, st *State) error {
			data, err := e.o.Load(ctx, s)
			if err != nil {
				return fmt.Errorf("preprocess: load sample %d: %w", s, err)
			}
			st.Data = data
			return nil
		}
		steps = append([]Step{load}, v.p.EncodedSteps()...)
	}
	task := Task{Key: pr.key, State: st, Steps: steps}
	if !wait {
		ok, err := e.pool.trySubmit(task)
		if ok || err == nil {
			if !ok {
				e.mu.Lock()
				takers := pr.takers
				if takers == 0 {
					e.dropLocked(pr)
				}
				e.mu.Unlock()
				if takers != 0 {
					return e.submit(pr, true)
				}
			}
			return ok
		}
		wait = true // an error: report it as a waiting submit would
	}
	if err := e.pool.Submit(e.ctx, task); err != nil {
		e.mu.Lock()
		if e.closed {
			err = ErrEngineClosed
		}
		e.finishLocked(pr, nil, err, false)
		e.mu.Unlock()
		return false
	}
	return true
}

// dropLocked forgets a prefetch the pool had no room for.
func (e *Engine) dropLocked(pr *prod) {
	delete(e.prods, pr.key)
	e.st.InFlight = len(e.prods)
	e.augUsed -= pr.reserved
	pr.reserved = 0
	v := pr.v
	for c, w := range v.want[pr.sample] {
		if w == pr {
			delete(v.want[pr.sample], c)
		}
	}
	if len(v.want[pr.sample]) == 0 {
		delete(v.want, pr.sample)
	}
	// The generation number is not reused: numbers only need to differ.
}

// trySubmit queues t if the pool has room now; ok is false (and err nil)
// when it has not.
func (p *Pool) trySubmit(t Task) (ok bool, err error) {
	select {
	case p.slots <- struct{}{}:
	default:
		return false, nil
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.slots
		return false, fmt.Errorf("preprocess: submit %s: %w", t.Key, ErrClosed)
	}
	if p.pending[t.Key] {
		p.mu.Unlock()
		<-p.slots
		return false, fmt.Errorf("preprocess: submit %s: %w: already submitted", t.Key, ErrBadOptions)
	}
	p.pending[t.Key] = true
	p.mu.Unlock()
	p.submitted.Add(1)
	p.in <- &job{task: t}
	return true, nil
}

// drain takes finished samples from the pool.
func (e *Engine) drain() {
	defer e.wg.Done()
	for {
		r, err := e.pool.Next(e.ctx)
		if err != nil {
			return
		}
		e.mu.Lock()
		if ch, ok := e.oneOff[r.Key]; ok {
			delete(e.oneOff, r.Key)
			e.mu.Unlock()
			ch <- r
			continue
		}
		pr := e.prods[r.Key]
		if pr == nil {
			e.mu.Unlock()
			continue
		}
		if r.Err == nil {
			e.st.Augments++
			if pr.decodes {
				e.st.Decodes++
			}
			if d := r.State.Decoded; d != nil {
				pr.v.admitDecodedLocked(pr.sample, d)
			}
		}
		e.finishLocked(pr, r.State.Out, r.Err, r.Slow)
		e.mu.Unlock()
		if f := e.finished.Load(); f != nil {
			(*f)()
		}
	}
}

func (v *View) admitDecodedLocked(s int, d *Image) {
	if _, ok := v.static.dec[s]; ok {
		return
	}
	if v.e.decUsed+d.Bytes() > v.e.o.DecodedBytes {
		return
	}
	v.static.dec[s] = d
	v.e.decUsed += d.Bytes()
}

// finishLocked delivers pr's result: to its takers, and into the cache
// for the live consumers that have not taken it, within the budget.
func (e *Engine) finishLocked(pr *prod, t *Tensor, err error, slow bool) {
	if _, ok := e.prods[pr.key]; !ok {
		return
	}
	delete(e.prods, pr.key)
	e.st.InFlight = len(e.prods)
	v := pr.v
	e.augUsed -= pr.reserved
	pr.reserved = 0
	for c, w := range v.want[pr.sample] {
		if w == pr {
			delete(v.want[pr.sample], c)
		}
	}
	if len(v.want[pr.sample]) == 0 {
		delete(v.want, pr.sample)
	}
	pr.t, pr.slow = t, slow
	if err != nil {
		pr.err = fmt.Errorf("preprocess: sample %d: %w", pr.sample, err)
		if !errors.Is(err, ErrEngineClosed) && !errors.Is(err, context.Canceled) && !errors.Is(err, ErrClosed) &&
			!errors.Is(err, context.DeadlineExceeded) {
			e.failed[v.failKey(pr.sample)] = pr.err
			e.st.Failed++
		}
		close(pr.done)
		return
	}
	n := t.Bytes()
	if v.avg == 0 {
		v.avg = n
	} else {
		v.avg = (v.avg*7 + n) / 8
	}
	rest := v.live &^ pr.takers
	if rest != 0 && e.augUsed+n <= e.o.AugmentedBytes {
		v.aug[pr.sample] = append(v.aug[pr.sample], &augGen{gen: pr.gen, t: t, taken: pr.takers})
		e.augUsed += n
	}
	close(pr.done)
}

// Decoded returns the decoded form of sample s (decode and static steps),
// from the cache or computed now on the pool (and cached within the
// budget).
func (v *View) Decoded(ctx context.Context, s int) (*Image, error) {
	e := v.e
	e.mu.Lock()
	if d, ok := v.static.dec[s]; ok {
		e.st.DecodedHits++
		e.mu.Unlock()
		return d, nil
	}
	if err, bad := e.failed[v.failKey(s)]; bad {
		e.mu.Unlock()
		return nil, err
	}
	e.mu.Unlock()
	// A one-off task of its own (not shared: decoded views are read
	// rarely, and their producer is the same code).
	key := "decode#" + v.static.key + "#" + strconv.Itoa(s) + "#" + strconv.FormatInt(time.Now().UnixNano(), 36)
	st := &State{Key: key, Keep: true}
	load := func(ctx context.Context, st *State) error {
		data, err := e.o.Load(ctx, s)
		if err != nil {
			return fmt.Errorf("preprocess: load sample %d: %w", s, err)
		}
		st.Data = data
		return nil
	}
	ch := make(chan Result, 1)
	e.mu.Lock()
	e.oneOff[key] = ch
	e.mu.Unlock()
	if err := e.pool.Submit(ctx, Task{Key: key, State: st, Steps: append([]Step{load}, v.p.DecodedSteps()...)}); err != nil {
		e.mu.Lock()
		delete(e.oneOff, key)
		e.mu.Unlock()
		return nil, err
	}
	var r Result
	select {
	case r = <-ch:
	case <-ctx.Done():
		// The drainer delivers into the buffered channel and moves on.
		return nil, fmt.Errorf("preprocess: decoded %d: %w", s, ctx.Err())
	}
	if r.Err != nil {
		e.mu.Lock()
		e.failed[v.failKey(s)] = r.Err
		e.st.Failed++
		e.mu.Unlock()
		return nil, r.Err
	}
	e.mu.Lock()
	e.st.Decodes++
	v.admitDecodedLocked(s, r.State.Decoded)
	e.mu.Unlock()
	return r.State.Decoded, nil
}

// Stats returns the engine's counters.
func (e *Engine) Stats() EngineStats {
	e.mu.Lock()
	st := e.st
	st.DecodedBytes, st.AugmentedBytes = e.decUsed, e.augUsed
	for _, sp := range e.statics {
		st.DecodedEntries += len(sp.dec)
	}
	for _, v := range e.views {
		for _, gens := range v.aug {
			st.AugmentedEntries += len(gens)
		}
	}
	e.mu.Unlock()
	st.Pool = e.pool.Stats()
	return st
}
