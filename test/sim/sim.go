// Package sim is a discrete-event simulator of concurrent training jobs
// reading a dataset through epochfs's sampler: jobs at given speeds, a
// fraction of the dataset resident in a tier (filled once, never evicted:
// Monarch's and MINIO's policy), a shared buffer of a given number of slots
// managed by the sampler (lookahead prefetch, release once every live job
// consumed an entry, eviction for entries more jobs want), and a source of a
// given bandwidth. It uses the real sampler.Sampler, so it measures the code
// that the daemon runs.
//
// A read is a hit when it costs no source fetch of its own: the sample is
// resident, in the buffer, or being fetched into it. Hit rate = 1 − source
// fetches / reads (prefetches count as fetches).
package sim

import (
	"container/heap"
	"container/list"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/epochfs/epochfs/internal/sampler"
)

// Policy is how jobs sample and what is cached.
type Policy string

const (
	// ODS: sampler=ods jobs, resident tier + shared buffer.
	ODS Policy = "ods"
	// Random: sampler=random jobs (independent orders), resident tier +
	// the same shared buffer with lookahead (Joader's ISA).
	Random Policy = "random"
	// MINIO: sampler=random jobs, the resident tier only (filled once, no
	// eviction, no buffer): hit rate ≈ the resident fraction.
	MINIO Policy = "minio"
	// LRU: sampler=random jobs, no tier: a shared LRU cache of
	// ResidentFraction × Samples (a page cache; PyTorch's default loaders).
	LRU Policy = "lru"
)

// Job is one simulated training job.
type Job struct {
	Speed  float64 // samples/s the job consumes when not waiting (default 1000)
	Subset []int   // nil: all samples
}

// Config is one simulation.
type Config struct {
	Samples          int
	Jobs             []Job
	Policy           Policy
	ResidentFraction float64 // of the dataset, chosen uniformly at random
	BufferSlots      int     // shared buffer (ODS, Random)
	SourceRate       float64 // samples/s the source delivers; 0: unlimited
	PrefetchDepth    int     // prefetches in flight at most (default BufferSlots)
	Lookahead        int     // batches per job (sampler.Options.Lookahead)
	BatchSize        int     // default 64
	Epochs           int     // per job (default 3)
	Seed             uint64
	NoDSA            bool
	NoSubstitution   bool
}

// JobResult is one job's outcome.
type JobResult struct {
	Reads    int
	Epochs   int
	Coverage float64 // min over its epochs of distinct samples served / subset size
	Exact    bool    // every epoch was a permutation of the subset
	Wait     float64 // seconds spent waiting for the source
	Finish   float64 // seconds at which it finished its epochs
}

// Result is a simulation's outcome.
type Result struct {
	Config        Config
	Reads         int
	SourceFetches int // demand reads + prefetches
	Prefetches    int
	HitRate       float64 // 1 − SourceFetches/Reads
	// FetchesPerEpoch is SourceFetches / Epochs: the source traffic of one
	// epoch of every job together, in samples.
	FetchesPerEpoch float64
	// NonResident is the number of non-resident samples in the jobs' union.
	NonResident int
	Jobs        []JobResult
	Buffer      sampler.Stats
	Makespan    float64
}

type fetchDone struct {
	t float64
	e int
}
type fetchHeap []fetchDone

func (h fetchHeap) Len() int           { return len(h) }
func (h fetchHeap) Less(a, b int) bool { return h[a].t < h[b].t }
func (h fetchHeap) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *fetchHeap) Push(x any)        { *h = append(*h, x.(fetchDone)) }
func (h *fetchHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type lru struct {
	cap int
	l   *list.List
	m   map[int]*list.Element
}

func (c *lru) has(e int) bool { _, ok := c.m[e]; return ok }
func (c *lru) touch(e int) {
	if c.cap == 0 {
		return
	}
	if el, ok := c.m[e]; ok {
		c.l.MoveToFront(el)
		return
	}
	c.m[e] = c.l.PushFront(e)
	if c.l.Len() > c.cap {
		old := c.l.Back()
		c.l.Remove(old)
		delete(c.m, old.Value.(int))
	}
}

// Run simulates cfg.
//
// Long: the simulator's event loop: every event kind of the workload in one switch.
func Run(cfg Config) (Result, error) {
	if cfg.Samples <= 0 || len(cfg.Jobs) == 0 {
		return Result{}, fmt.Errorf("sim: need samples and jobs")
	}
	if cfg.ResidentFraction < 0 || cfg.ResidentFraction > 1 {
		return Result{}, fmt.Errorf("sim: resident fraction %g outside 0..1", cfg.ResidentFraction)
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 64
	}
	if cfg.Epochs == 0 {
		cfg.Epochs = 3
	}
	if cfg.Lookahead == 0 {
		cfg.Lookahead = sampler.DefaultLookahead
	}
	slots := cfg.BufferSlots
	if cfg.Policy == MINIO || cfg.Policy == LRU {
		slots = 0
	}
	depth := cfg.PrefetchDepth
	if depth == 0 {
		depth = slots
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 77))
	resident := make([]bool, cfg.Samples)
	cache := &lru{l: list.New(), m: map[int]*list.Element{}}
	if cfg.Policy == LRU {
		cache.cap = int(math.Round(cfg.ResidentFraction * float64(cfg.Samples)))
	} else {
		for _, i := range r.Perm(cfg.Samples)[:int(math.Round(cfg.ResidentFraction*float64(cfg.Samples)))] {
			resident[i] = true
		}
	}
	isResident := func(i int) bool { return resident[i] || cache.has(i) }
	kind := sampler.KindRandom
	if cfg.Policy == ODS {
		kind = sampler.KindODS
	}
	var now float64
	s, err := sampler.New(sampler.Options{
		Samples:        cfg.Samples,
		Residency:      sampler.ResidencyFunc(isResident),
		BufferSlots:    slots,
		Lookahead:      cfg.Lookahead,
		Lease:          -1,
		Now:            func() time.Time { return time.Unix(0, int64(now*1e9)) },
		Seed:           cfg.Seed,
		NoDSA:          cfg.NoDSA,
		NoSubstitution: cfg.NoSubstitution,
	})
	if err != nil {
		return Result{}, err
	}
	res := Result{Config: cfg, Jobs: make([]JobResult, len(cfg.Jobs))}
	union := map[int]bool{}
	type jstate struct {
		name  string
		speed float64
		next  float64
		size  int
		cur   map[int]bool
		order []int
		inSub map[int]bool
		done  bool
	}
	js := make([]*jstate, len(cfg.Jobs))
	for i, j := range cfg.Jobs {
		st := &jstate{name: fmt.Sprint("job", i), speed: j.Speed, cur: map[int]bool{}}
		if st.speed == 0 {
			st.speed = 1000
		}
		jc := sampler.JobConfig{BatchSize: cfg.BatchSize, Seed: cfg.Seed + uint64(i), Kind: kind, Subset: j.Subset}
		if err := s.RegisterJob(st.name, jc); err != nil {
			return Result{}, err
		}
		if j.Subset == nil {
			st.size = cfg.Samples
			for e := range cfg.Samples {
				union[e] = true
			}
		} else {
			st.inSub = map[int]bool{}
			for _, e := range j.Subset {
				st.inSub[e] = true
				union[e] = true
			}
			st.size = len(st.inSub)
		}
		res.Jobs[i].Coverage = 1
		res.Jobs[i].Exact = true
		js[i] = st
	}
	for e := range union {
		if !resident[e] {
			res.NonResident++
		}
	}

	srcFree := 0.0
	fetch := func(t float64) float64 {
		res.SourceFetches++
		if cfg.SourceRate <= 0 {
			return t
		}
		done := math.Max(t, srcFree) + 1/cfg.SourceRate
		srcFree = done
		return done
	}
	avail := map[int]float64{} // buffered or in flight: when the bytes are there
	var inflight fetchHeap
	drain := func() {
		for _, e := range s.Releases(nil) {
			delete(avail, e)
		}
	}
	complete := func(upTo float64) {
		for len(inflight) > 0 && inflight[0].t <= upTo {
			f := heap.Pop(&inflight).(fetchDone)
			now = f.t
			if !s.Installed(f.e) {
				delete(avail, f.e)
			}
			drain()
		}
	}
	for {
		var j *jstate
		ji := -1
		for i, st := range js {
			if !st.done && (j == nil || st.next < j.next) {
				j, ji = st, i
			}
		}
		if j == nil {
			break
		}
		complete(j.next)
		now = j.next
		if room := depth - len(inflight); room > 0 {
			for _, e := range s.Prefetch(room) {
				done := fetch(now)
				res.Prefetches++
				avail[e] = done
				heap.Push(&inflight, fetchDone{done, e})
			}
		}
		batch, end, err := s.Next(j.name)
		if err != nil {
			return Result{}, err
		}
		jr := &res.Jobs[ji]
		if end {
			jr.Epochs++
			cov := float64(len(j.cur)) / float64(j.size)
			jr.Coverage = math.Min(jr.Coverage, cov)
			if len(j.order) != j.size || len(j.cur) != j.size {
				jr.Exact = false
			}
			j.cur, j.order = map[int]bool{}, nil
			if jr.Epochs == cfg.Epochs {
				j.done = true
				jr.Finish = now
				if err := s.EndJob(j.name); err != nil {
					return Result{}, err
				}
				drain()
			}
			continue
		}
		ready := now
		for _, e := range batch {
			res.Reads++
			jr.Reads++
			if j.cur[e] || (j.inSub != nil && !j.inSub[e]) {
				jr.Exact = false
			}
			j.cur[e] = true
			j.order = append(j.order, e)
			switch t, ok := avail[e]; {
			case isResident(e):
				cache.touch(e)
			case ok:
				ready = math.Max(ready, t)
			default:
				done := fetch(now)
				ready = math.Max(ready, done)
				cache.touch(e)
				if s.Installed(e) {
					avail[e] = done
				}
			}
		}
		drain()
		jr.Wait += ready - now
		j.next = ready + float64(len(batch))/j.speed
	}
	complete(math.Inf(1))
	for _, jr := range res.Jobs {
		res.Makespan = math.Max(res.Makespan, jr.Finish)
	}
	res.HitRate = 1 - float64(res.SourceFetches)/float64(res.Reads)
	res.FetchesPerEpoch = float64(res.SourceFetches) / float64(cfg.Epochs)
	res.Buffer = s.Stats()
	return res, nil
}

// Range returns the indices a..b-1 (Joader's [a, b]).
func Range(a, b int) []int {
	s := make([]int, 0, b-a)
	for i := a; i < b; i++ {
		s = append(s, i)
	}
	return s
}

// RandomSubset returns k of 0..n-1 chosen uniformly (Joader's sample([0, n], k)).
func RandomSubset(r *rand.Rand, n, k int) []int {
	p := r.Perm(n)[:k]
	slices.Sort(p)
	return p
}
