package preprocess

import (
	"context"
	"fmt"
	"strconv"
	"sync"
)

// The decoded and augmented caches (Seneca §2 and §5, Table 1: encoded →
// decoded → augmented). Both have byte budgets set by the caller (the DSI
// model's split). Decoded entries stay once admitted: when the budget is
// full, new entries are simply not admitted. An augmented entry carries
// the number of jobs that will consume it and is evicted when the last
// one has, so augmented data is never reused across epochs.
//
// Lock order: Store.mu, then a cache's mu.

// DecodedCache holds decoded forms (decode + static steps).
type DecodedCache struct {
	mu      sync.Mutex
	budget  int64
	used    int64
	entries map[string]*Image
}

// NewDecodedCache returns a cache that holds up to budget bytes.
func NewDecodedCache(budget int64) *DecodedCache {
	return &DecodedCache{budget: budget, entries: map[string]*Image{}}
}

// Get returns the decoded form of key. The image is shared: do not
// modify it.
func (c *DecodedCache) Get(key string) (*Image, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	img, ok := c.entries[key]
	return img, ok
}

// Put admits img if the budget has room and reports whether it did.
func (c *DecodedCache) Put(key string, img *Image) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; ok {
		return true
	}
	if c.used+img.Bytes() > c.budget {
		return false
	}
	c.entries[key] = img
	c.used += img.Bytes()
	return true
}

// Used returns the bytes held and the number of entries.
func (c *DecodedCache) Used() (bytes int64, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, len(c.entries)
}

// AugmentedCache holds augmented forms, each until the given number of
// consumers has taken it.
type AugmentedCache struct {
	mu      sync.Mutex
	budget  int64
	used    int64
	entries map[string]*augEntry
}

type augEntry struct {
	t    *Tensor
	refs int
}

// NewAugmentedCache returns a cache that holds up to budget bytes.
func NewAugmentedCache(budget int64) *AugmentedCache {
	return &AugmentedCache{budget: budget, entries: map[string]*augEntry{}}
}

// Put admits t for consumers more takes if the budget has room.
func (c *AugmentedCache) Put(key string, t *Tensor, consumers int) bool {
	if consumers <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; ok {
		return false
	}
	if c.used+t.Bytes() > c.budget {
		return false
	}
	c.entries[key] = &augEntry{t: t, refs: consumers}
	c.used += t.Bytes()
	return true
}

// Consume takes key once: it returns the tensor and evicts it when this
// was the last consumer.
func (c *AugmentedCache) Consume(key string) (*Tensor, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	e.refs--
	if e.refs <= 0 {
		delete(c.entries, key)
		c.used -= e.t.Bytes()
	}
	return e.t, true
}

// Has reports whether key is cached (for a sampler preferring cached
// samples).
func (c *AugmentedCache) Has(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.entries[key]
	return ok
}

// Used returns the bytes held and the number of entries.
func (c *AugmentedCache) Used() (bytes int64, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, len(c.entries)
}

// StoreOptions configures a Store.
type StoreOptions struct {
	// Load returns the encoded bytes of a sample.
	Load func(ctx context.Context, key string) ([]byte, error)
	// DecodedBytes and AugmentedBytes are the cache budgets.
	DecodedBytes, AugmentedBytes int64
	// Seed seeds every sample's random source.
	Seed uint64
}

// Store serves the decoded and augmented forms of samples through the
// caches, computing each at most once however many callers ask at the
// same time (restic's inProgress map; JuiceFS's singleflight).
type Store struct {
	p    *Pipeline
	opts StoreOptions
	Dec  *DecodedCache
	Aug  *AugmentedCache

	mu      sync.Mutex
	flights map[string]*flight
	gen     map[string]uint64 // augmentations made per sample
	// Computations counts decodes and augmentations actually run (a
	// test hook for "one computation per sample").
	decodes, augments int64
}

type flight struct {
	done    chan struct{}
	img     *Image
	t       *Tensor
	err     error
	waiters int
}

// NewStore returns a Store over p.
func NewStore(p *Pipeline, opts StoreOptions) (*Store, error) {
	if opts.Load == nil || opts.DecodedBytes < 0 || opts.AugmentedBytes < 0 {
		return nil, fmt.Errorf("preprocess: store: %w: need Load and budgets >= 0", ErrBadOptions)
	}
	return &Store{
		p: p, opts: opts,
		Dec:     NewDecodedCache(opts.DecodedBytes),
		Aug:     NewAugmentedCache(opts.AugmentedBytes),
		flights: map[string]*flight{},
		gen:     map[string]uint64{},
	}, nil
}

// Computations returns how many decodes and augmentations ran.
func (s *Store) Computations() (decodes, augments int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.decodes, s.augments
}

// join returns the flight for id, starting it (leader = true) if none.
func (s *Store) join(id string) (f *flight, leader bool) {
	if f, ok := s.flights[id]; ok {
		f.waiters++
		return f, false
	}
	f = &flight{done: make(chan struct{}), waiters: 1}
	s.flights[id] = f
	return f, true
}

func (s *Store) wait(ctx context.Context, f *flight) error {
	select {
	case <-f.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Decoded returns the decoded form of key, from the cache or computed
// (once for concurrent callers) and admitted to the cache if it fits.
func (s *Store) Decoded(ctx context.Context, key string) (*Image, error) {
	if img, ok := s.Dec.Get(key); ok {
		return img, nil
	}
	s.mu.Lock()
	f, leader := s.join("d/" + key)
	if leader {
		s.decodes++
	}
	s.mu.Unlock()
	if !leader {
		if err := s.wait(ctx, f); err != nil {
			return nil, fmt.Errorf("preprocess: decoded %s: %w", key, err)
		}
		return f.img, f.err
	}
	f.img, f.err = s.computeDecoded(ctx, key)
	if f.err == nil {
		s.Dec.Put(key, f.img)
	}
	s.mu.Lock()
	delete(s.flights, "d/"+key)
	s.mu.Unlock()
	close(f.done)
	return f.img, f.err
}

func (s *Store) computeDecoded(ctx context.Context, key string) (*Image, error) {
	data, err := s.opts.Load(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("preprocess: load %s: %w", key, err)
	}
	st := &State{Key: key, Data: data}
	if err := RunSteps(ctx, s.p.DecodedSteps(), st); err != nil {
		return nil, fmt.Errorf("preprocess: %s: %w", key, err)
	}
	return st.Decoded, nil
}

// Augmented returns key's augmented form for one consumer out of jobs.
// The first caller computes it (from the decoded cache when it holds the
// sample); callers arriving meanwhile share that computation; what the
// jobs have not all consumed yet stays in the augmented cache until they
// have. Each new computation for a key draws a fresh augmentation.
func (s *Store) Augmented(ctx context.Context, key string, jobs int) (*Tensor, error) {
	if jobs < 1 {
		return nil, fmt.Errorf("preprocess: augmented %s: jobs %d: %w: want >= 1", key, jobs, ErrBadOptions)
	}
	s.mu.Lock()
	if t, ok := s.Aug.Consume(key); ok {
		s.mu.Unlock()
		return t, nil
	}
	f, leader := s.join("a/" + key)
	var g uint64
	if leader {
		s.augments++
		g = s.gen[key]
		s.gen[key] = g + 1
	}
	s.mu.Unlock()
	if !leader {
		if err := s.wait(ctx, f); err != nil {
			return nil, fmt.Errorf("preprocess: augmented %s: %w", key, err)
		}
		return f.t, f.err
	}
	f.t, f.err = s.computeAugmented(ctx, key, g)
	s.mu.Lock()
	delete(s.flights, "a/"+key)
	if f.err == nil {
		// The leader and the waiters have each consumed it.
		s.Aug.Put(key, f.t, jobs-f.waiters)
	}
	s.mu.Unlock()
	close(f.done)
	return f.t, f.err
}

func (s *Store) computeAugmented(ctx context.Context, key string, gen uint64) (*Tensor, error) {
	rng := SampleRNG(s.opts.Seed, key+"#"+strconv.FormatUint(gen, 10))
	if img, ok := s.Dec.Get(key); ok {
		st := &State{Key: key, Img: img, Decoded: img, RNG: rng}
		if err := RunSteps(ctx, s.p.AugmentSteps(), st); err != nil {
			return nil, fmt.Errorf("preprocess: %s: %w", key, err)
		}
		return st.Out, nil
	}
	data, err := s.opts.Load(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("preprocess: load %s: %w", key, err)
	}
	st := &State{Key: key, Data: data, RNG: rng, Keep: s.opts.DecodedBytes > 0}
	if err := RunSteps(ctx, s.p.EncodedSteps(), st); err != nil {
		return nil, fmt.Errorf("preprocess: %s: %w", key, err)
	}
	if st.Decoded != nil {
		s.Dec.Put(key, st.Decoded)
	}
	return st.Out, nil
}
