package preprocess

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/epochfs/epochfs/internal/status"
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
// then instead of on its next tick. f must not block. There is one: setting
// a second one panics (a wiring mistake, not a replacement).
func (e *Engine) OnFinish(f func()) {
	if !e.finished.CompareAndSwap(nil, &f) {
		panic("preprocess: OnFinish: a function is set already")
	}
}

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

// Status fills the engine's section of the mount's status: its caches
// and its work.
func (e *Engine) Status(d *status.Doc) {
	es := e.Stats()
	d.Int("decoded_cache_budget", es.DecodedBudget)
	d.Int("decoded_cache_bytes", es.DecodedBytes)
	d.Int("decoded_cache_entries", int64(es.DecodedEntries))
	d.Int("decoded_cache_hits", es.DecodedHits)
	d.Int("augmented_cache_budget", es.AugmentedBudget)
	d.Int("augmented_cache_bytes", es.AugmentedBytes)
	d.Int("augmented_cache_entries", int64(es.AugmentedEntries))
	d.Int("augmented_cache_hits", es.AugmentedHits)
	d.Int("augmented_cache_evictions", es.AugmentedEvicted)
	d.Int("preprocess_decodes", es.Decodes)
	d.Int("preprocess_augments", es.Augments)
	d.Int("preprocess_failed", es.Failed)
	d.Int("preprocess_in_flight", int64(es.InFlight))
}
