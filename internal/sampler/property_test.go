package sampler

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// source of choices for a workload: a PRNG in the property test, the fuzzer's
// bytes in FuzzWorkload.
type chooser interface {
	IntN(n int) int
	Done() bool
}

type rngChooser struct {
	r     *rand.Rand
	steps int
}

func (c *rngChooser) IntN(n int) int { return c.r.IntN(n) }
func (c *rngChooser) Done() bool     { c.steps--; return c.steps < 0 }

type byteChooser struct {
	b []byte
	i int
}

func (c *byteChooser) IntN(n int) int {
	if c.i >= len(c.b) {
		return 0
	}
	v := int(c.b[c.i])
	c.i++
	if n > 256 && c.i < len(c.b) {
		v = v<<8 | int(c.b[c.i])
		c.i++
	}
	return v % n
}
func (c *byteChooser) Done() bool { return c.i >= len(c.b) }

type modelJob struct {
	subset []int // nil: all
	inSub  map[int]bool
	cur    []int
	seen   map[int]bool
	orders [][]int // completed epochs
	speed  int
}

// workload drives a Sampler with random joins, leaves, reads at different
// speeds, prefetches, installs, failures, releases and lease expiries, and
// checks after every step that every job gets every sample of its subset
// exactly once per epoch and that the internal invariants hold.
type workload struct {
	t        testing.TB
	c        chooser
	clk      *fakeClock
	s        *Sampler
	n        int
	resident []bool
	jobs     map[string]*modelJob
	names    int
	inflight []int
	held     map[int]bool
	epochs   int
	lease    time.Duration
	cached   map[int]bool // what a fake views cache holds (for every job)
}

// fakeCaches is a views cache of the workload's choosing.
type fakeCaches struct{ w *workload }

func (f fakeCaches) Cached(job string, e int) bool { return f.w.cached[e] }
func (f fakeCaches) Candidates(job string, dst []int, max int) []int {
	for e := range f.w.cached { // map order: random, as a real cache's may be
		if len(dst) >= max {
			break
		}
		dst = append(dst, e)
	}
	return dst
}

func newWorkload(t testing.TB, c chooser) *workload {
	w := &workload{t: t, c: c, clk: newClock(), jobs: map[string]*modelJob{}, held: map[int]bool{}, cached: map[int]bool{}}
	w.n = 1 + c.IntN(300)
	w.resident = make([]bool, w.n)
	frac := c.IntN(4) // 0, 25, 50, 75 %
	for i := range w.resident {
		w.resident[i] = c.IntN(4) < frac
	}
	w.lease = time.Minute
	var err error
	w.s, err = New(Options{
		Samples:        w.n,
		Residency:      ResidencyFunc(func(i int) bool { return w.resident[i] }),
		BufferSlots:    c.IntN(40),
		Lookahead:      1 + c.IntN(3),
		Lease:          w.lease,
		Now:            w.clk.Now,
		Seed:           uint64(c.IntN(1000)),
		NoDSA:          c.IntN(4) == 0,
		NoSubstitution: c.IntN(8) == 0,
		Caches:         fakeCaches{w},
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *workload) register() {
	name := fmt.Sprintf("job%d", w.names)
	w.names++
	cfg := JobConfig{BatchSize: 1 + w.c.IntN(17), Seed: uint64(w.c.IntN(5)), Kind: Kind(w.c.IntN(5) % 3), Views: w.c.IntN(2) == 0}
	switch w.c.IntN(3) {
	case 1: // a range
		a := w.c.IntN(w.n)
		b := a + 1 + w.c.IntN(w.n-a)
		for i := a; i < b; i++ {
			cfg.Subset = append(cfg.Subset, i)
		}
	case 2: // a random sample, with duplicates
		k := 1 + w.c.IntN(w.n)
		for range k {
			cfg.Subset = append(cfg.Subset, w.c.IntN(w.n))
		}
	}
	err := w.s.RegisterJob(name, cfg)
	if errors.Is(err, ErrTooManyJobs) {
		return
	}
	if err != nil {
		w.t.Fatalf("register %s: %v", name, err)
	}
	m := &modelJob{seen: map[int]bool{}, speed: 1 + w.c.IntN(4)}
	if cfg.Subset != nil {
		m.inSub = map[int]bool{}
		for _, i := range cfg.Subset {
			if !m.inSub[i] {
				m.inSub[i] = true
				m.subset = append(m.subset, i)
			}
		}
		if len(m.subset) == w.n {
			m.subset, m.inSub = nil, nil
		}
	}
	w.jobs[name] = m
}

func (w *workload) size(m *modelJob) int {
	if m.subset == nil {
		return w.n
	}
	return len(m.subset)
}

func (w *workload) next(name string) {
	m := w.jobs[name]
	batch, end, err := w.s.Next(name)
	if err != nil {
		w.t.Fatalf("next %s: %v", name, err)
	}
	if end {
		if len(m.cur) != w.size(m) {
			w.t.Fatalf("job %s: epoch %d ended after %d of %d samples", name, len(m.orders)+1, len(m.cur), w.size(m))
		}
		m.orders = append(m.orders, m.cur)
		m.cur, m.seen = nil, map[int]bool{}
		w.epochs++
		return
	}
	if len(batch) == 0 {
		w.t.Fatalf("job %s: empty batch without end of epoch", name)
	}
	for _, e := range batch {
		if e < 0 || e >= w.n || (m.inSub != nil && !m.inSub[e]) {
			w.t.Fatalf("job %s: sample %d not in its subset", name, e)
		}
		if m.seen[e] {
			w.t.Fatalf("job %s: sample %d twice in epoch %d", name, e, len(m.orders)+1)
		}
		m.seen[e] = true
		m.cur = append(m.cur, e)
		if !w.resident[e] && !w.held[e] && !slices.Contains(w.inflight, e) && w.c.IntN(2) == 0 {
			// A demand read from the source offers the bytes to the buffer.
			if w.s.Installed(e) {
				w.held[e] = true
			}
		}
	}
}

func (w *workload) step() {
	names := append(make([]string, 0, len(w.jobs)), w.s.Jobs()...)
	switch op := w.c.IntN(20); {
	case op == 0 || len(names) == 0:
		w.register()
	case op == 1:
		name := names[w.c.IntN(len(names))]
		if err := w.s.EndJob(name); err != nil {
			w.t.Fatal(err)
		}
		delete(w.jobs, name)
	case op == 2:
		// Everyone but one job keeps reading; time passes past the lease.
		keep := names[w.c.IntN(len(names))]
		for range 2 {
			if err := w.s.Touch(keep, 0); err != nil {
				w.t.Fatal(err)
			}
			w.clk.Advance(w.lease / 2)
		}
		if err := w.s.Touch(keep, 0); err != nil {
			w.t.Fatal(err)
		}
		w.clk.Advance(w.lease - time.Second)
		w.s.Reap()
		if live := w.s.Jobs(); !slices.Equal(live, []string{keep}) {
			w.t.Fatalf("after the lease, live jobs %v, want [%s]", live, keep)
		}
		for _, n := range names {
			if n == keep {
				continue
			}
			delete(w.jobs, n)
			if _, _, err := w.s.Next(n); !errors.Is(err, ErrLeaseExpired) {
				w.t.Fatalf("next of expired job %s: %v, want ErrLeaseExpired", n, err)
			}
		}
	case op < 6:
		for _, e := range w.s.Prefetch(1 + w.c.IntN(8)) {
			if w.resident[e] || w.held[e] || slices.Contains(w.inflight, e) {
				w.t.Fatalf("prefetch of resident, held or in-flight sample %d", e)
			}
			w.inflight = append(w.inflight, e)
		}
	case op < 8 && len(w.inflight) > 0:
		k := w.c.IntN(len(w.inflight))
		e := w.inflight[k]
		w.inflight = slices.Delete(w.inflight, k, k+1)
		if w.c.IntN(6) == 0 {
			w.s.Failed(e)
		} else if w.s.Installed(e) {
			w.held[e] = true
		}
	case op == 8:
		// Residency grows (placement installs a file).
		w.resident[w.c.IntN(w.n)] = true
	case op == 9:
		// The views' caches fill and empty.
		for range 1 + w.c.IntN(6) {
			e := w.c.IntN(w.n)
			w.cached[e] = !w.cached[e]
		}
	default:
		// A job reads, faster jobs more often.
		var pick []string
		for _, n := range names {
			for range w.jobs[n].speed {
				pick = append(pick, n)
			}
		}
		w.next(pick[w.c.IntN(len(pick))])
	}
	for _, e := range w.s.Releases(nil) {
		if !w.held[e] {
			w.t.Fatalf("release of sample %d the buffer does not hold", e)
		}
		delete(w.held, e)
	}
	if err := w.s.check(); err != nil {
		w.t.Fatal(err)
	}
}

func TestEverySampleExactlyOncePerEpochUnderRandomWorkloads(t *testing.T) {
	runs := 300
	if testing.Short() || raceEnabled {
		runs = 80
	}
	epochs, cacheSubs := 0, 0
	for seed := range runs {
		c := &rngChooser{r: rand.New(rand.NewPCG(uint64(seed), 1)), steps: 1500}
		w := newWorkload(t, c)
		for !c.Done() {
			w.step()
		}
		epochs += w.epochs
		cacheSubs += w.s.Stats().CacheSubstituted
	}
	// ... and the views' caches must have been substituted from.
	if cacheSubs == 0 {
		t.Fatal("no draw was replaced by a cached sample")
	}
	// The property must have been exercised: many completed epochs.
	if epochs < runs {
		t.Fatalf("only %d epochs completed in %d runs", epochs, runs)
	}
	t.Logf("%d runs, %d completed epochs checked, %d draws replaced by cached samples", runs, epochs, cacheSubs)
}

func FuzzWorkload(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte("\x40\x02\x10\x05\x00\x00\x00\x00\x00\x00\x00\x09\x09\x09\x09\x09\x09\x09\x03\x04\x09\x09\x09\x09"))
	f.Add(make([]byte, 300))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &byteChooser{b: b}
		w := newWorkload(t, c)
		for steps := 0; !c.Done() && steps < 2000; steps++ {
			w.step()
		}
	})
}
