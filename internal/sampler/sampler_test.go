package sampler

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestDrawSetKthMatchesNaiveSelect(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 63, 64, 65, 511, 512, 513, 3000} {
		d := newDrawSet(n)
		taken := make([]bool, n)
		for step := 0; step < 4*n; step++ {
			i := r.IntN(n)
			if taken[i] {
				d.untake(i)
			} else {
				d.take(i)
			}
			taken[i] = !taken[i]
			var free []int
			for k, tk := range taken {
				if !tk {
					free = append(free, k)
				}
			}
			if d.free != len(free) {
				t.Fatalf("n=%d: free %d, want %d", n, d.free, len(free))
			}
			if len(free) > 0 {
				k := r.IntN(len(free))
				if got := d.kth(k); got != free[k] {
					t.Fatalf("n=%d: kth(%d) = %d, want %d", n, k, got, free[k])
				}
			}
		}
		d.reset()
		if d.free != n || d.kth(n-1) != n-1 {
			t.Fatalf("n=%d: reset left free=%d", n, d.free)
		}
	}
}

// epochOrders runs one job alone for k epochs and returns its orders.
func epochOrders(t *testing.T, s *Sampler, name string, k int) [][]int {
	t.Helper()
	var orders [][]int
	var cur []int
	for len(orders) < k {
		b, end, err := s.Next(name)
		if err != nil {
			t.Fatal(err)
		}
		if end {
			orders = append(orders, cur)
			cur = nil
			continue
		}
		cur = append(cur, b...)
	}
	return orders
}

func TestOrderDiffersAcrossEpochsAndJobs(t *testing.T) {
	for _, kind := range []Kind{KindODS, KindRandom} {
		s, _ := New(Options{Samples: 500, BufferSlots: 50})
		for _, name := range []string{"a", "b"} {
			if err := s.RegisterJob(name, JobConfig{BatchSize: 32, Kind: kind}); err != nil {
				t.Fatal(err)
			}
		}
		all := make([]int, 500)
		for i := range all {
			all[i] = i
		}
		a := epochOrders(t, s, "a", 3)
		b := epochOrders(t, s, "b", 1)
		for i, o := range append(slices.Clone(a), b...) {
			if !isPermutation(o, all) {
				t.Fatalf("%s: order %d is not a permutation", kind, i)
			}
		}
		if slices.Equal(a[0], a[1]) || slices.Equal(a[1], a[2]) || slices.Equal(a[0], b[0]) {
			t.Fatalf("%s: orders repeat across epochs or jobs", kind)
		}
		// Not merely a rotation: the first 50 positions share few samples.
		if common := overlap(a[0][:50], a[1][:50]); common > 20 {
			t.Fatalf("%s: epochs 1 and 2 share %d of their first 50 samples", kind, common)
		}
	}
}

func overlap(a, b []int) int {
	c := 0
	for _, x := range a {
		if slices.Contains(b, x) {
			c++
		}
	}
	return c
}

func TestSameSeedAndNameGiveTheSameRandomOrder(t *testing.T) {
	var orders [][]int
	for range 2 {
		s, _ := New(Options{Samples: 300})
		if err := s.RegisterJob("j", JobConfig{BatchSize: 7, Seed: 42, Kind: KindRandom}); err != nil {
			t.Fatal(err)
		}
		orders = append(orders, epochOrders(t, s, "j", 2)...)
	}
	if !slices.Equal(orders[0], orders[2]) || !slices.Equal(orders[1], orders[3]) {
		t.Fatal("a random job's order is not reproducible from its seed and name")
	}
}

func TestSequentialIsSubsetOrder(t *testing.T) {
	s, _ := New(Options{Samples: 100, BufferSlots: 10})
	sub := []int{90, 3, 50, 3, 7}
	if err := s.RegisterJob("j", JobConfig{BatchSize: 2, Kind: KindSequential, Subset: sub}); err != nil {
		t.Fatal(err)
	}
	for _, o := range epochOrders(t, s, "j", 2) {
		if !slices.Equal(o, []int{3, 7, 50, 90}) {
			t.Fatalf("sequential order %v", o)
		}
	}
}

func TestEndOfEpochIsReportedOnceThenTheNextEpochStarts(t *testing.T) {
	s, _ := New(Options{Samples: 5})
	if err := s.RegisterJob("j", JobConfig{BatchSize: 2}); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	var ends []bool
	for range 8 {
		b, end, err := s.Next("j")
		if err != nil {
			t.Fatal(err)
		}
		sizes, ends = append(sizes, len(b)), append(ends, end)
	}
	if !slices.Equal(sizes, []int{2, 2, 1, 0, 2, 2, 1, 0}) ||
		!slices.Equal(ends, []bool{false, false, false, true, false, false, false, true}) {
		t.Fatalf("batch sizes %v, ends %v", sizes, ends)
	}
	st, _ := s.Status("j")
	if st.Epoch != 2 || st.Position != 5 {
		t.Fatalf("status epoch %d position %d", st.Epoch, st.Position)
	}
}

// miniSim runs jobs over a sampler with instant fetches: every step, the
// buffer prefetches what it may, then one job (chosen by speed) reads a batch,
// and a demand read of a sample nobody holds is offered to the buffer. It
// returns each job's completed epoch orders and the number of source fetches.
func miniSim(t *testing.T, s *Sampler, resident func(int) bool, names []string, speeds []int, epochs int) (map[string][][]int, int) {
	t.Helper()
	orders := map[string][][]int{}
	cur := map[string][]int{}
	held := map[int]bool{}
	fetches := 0
	r := rand.New(rand.NewPCG(9, 9))
	var pick []string
	for i, n := range names {
		for range speeds[i] {
			pick = append(pick, n)
		}
	}
	done := func() bool {
		for _, n := range names {
			if len(orders[n]) < epochs {
				return false
			}
		}
		return true
	}
	for !done() {
		for _, e := range s.Prefetch(1 << 20) {
			fetches++
			if s.Installed(e) {
				held[e] = true
			}
		}
		n := pick[r.IntN(len(pick))]
		if len(orders[n]) >= epochs {
			continue
		}
		b, end, err := s.Next(n)
		if err != nil {
			t.Fatal(err)
		}
		if end {
			orders[n] = append(orders[n], cur[n])
			cur[n] = nil
		}
		for _, e := range b {
			cur[n] = append(cur[n], e)
			if !resident(e) && !held[e] {
				fetches++
				if s.Installed(e) {
					held[e] = true
				}
			}
		}
		for _, e := range s.Releases(nil) {
			delete(held, e)
		}
	}
	return orders, fetches
}

// The test that resident samples are not pushed to the front: over every
// epoch of three ODS jobs at different speeds that share a buffer, the mean
// relative position of the resident samples is 0.5 within 0.02 (the
// standard error is about 0.004), and as many of them fall in the first fifth
// as uniformity predicts (0.2 within 0.02). The buffer does its job meanwhile:
// substitutions happen and fewer than 1.3 × (1 − f) × N fetches are made per
// round of epochs, against ≈ 3 × (1 − f) × N without sharing.
func TestResidentSamplesAreNotPushedToTheFront(t *testing.T) {
	const n, epochs = 2000, 4
	r := rand.New(rand.NewPCG(5, 5))
	resident := make([]bool, n)
	for _, i := range r.Perm(n)[:n/5] {
		resident[i] = true
	}
	s, _ := New(Options{Samples: n, BufferSlots: 300, Lookahead: 2,
		Residency: ResidencyFunc(func(i int) bool { return resident[i] })})
	names := []string{"a", "b", "c"}
	for _, name := range names {
		if err := s.RegisterJob(name, JobConfig{BatchSize: 16}); err != nil {
			t.Fatal(err)
		}
	}
	orders, fetches := miniSim(t, s, func(i int) bool { return resident[i] }, names, []int{3, 2, 2}, epochs)
	sum, count, front := 0.0, 0, 0
	for _, name := range names {
		for _, o := range orders[name] {
			su, c := meanPosition(o, func(i int) bool { return resident[i] })
			sum, count = sum+su, count+c
			for _, e := range o[:n/5] {
				if resident[e] {
					front++
				}
			}
		}
	}
	mean := sum / float64(count)
	frontFrac := float64(front) / float64(count)
	t.Logf("resident samples: mean position %.4f, fraction in the first fifth %.4f (%d positions); fetches %d = %.2f × (1−f)N per round of epochs",
		mean, frontFrac, count, fetches, float64(fetches)/float64(epochs)/(0.8*n))
	if math.Abs(mean-0.5) > 0.02 {
		t.Errorf("mean position of resident samples %.4f, want 0.5 ± 0.02", mean)
	}
	if math.Abs(frontFrac-0.2) > 0.02 {
		t.Errorf("fraction of resident samples in the first fifth %.4f, want 0.2 ± 0.02", frontFrac)
	}
	if st := s.Stats(); st.Substituted == 0 {
		t.Error("no substitutions: the test did not exercise ODS")
	}
	if perRound := float64(fetches) / epochs; perRound > 1.3*0.8*n {
		t.Errorf("%.0f source fetches per round of epochs, want ≤ 1.3 × (1−f)N = %.0f", perRound, 1.3*0.8*n)
	}
}

// The statistic above can fail: an order with the resident samples first has
// a mean position near f/2.
func TestMeanPositionDetectsResidentFirstOrder(t *testing.T) {
	n := 1000
	resident := func(i int) bool { return i%5 == 0 }
	var order []int
	for i := 0; i < n; i += 5 {
		order = append(order, i)
	}
	for i := 0; i < n; i++ {
		if !resident(i) {
			order = append(order, i)
		}
	}
	sum, c := meanPosition(order, resident)
	if mean := sum / float64(c); math.Abs(mean-0.5) <= 0.02 {
		t.Fatalf("a resident-first order has mean position %.3f: the test could not fail", mean)
	}
}

func TestODSSubstitutesBufferedSamplesAndDisplacedDrawsStayUnseen(t *testing.T) {
	s, _ := New(Options{Samples: 100, BufferSlots: 10, Lookahead: 1})
	for _, name := range []string{"a", "b"} {
		if err := s.RegisterJob(name, JobConfig{BatchSize: 10}); err != nil {
			t.Fatal(err)
		}
	}
	// a reads a batch; its samples are kept for b.
	ba, _, _ := s.Next("a")
	for _, e := range ba {
		if !s.Installed(e) {
			t.Fatalf("sample %d not kept though b wants it", e)
		}
	}
	// b's next batch is a's batch, except for draws that a has planned too
	// (a fetches those anyway): every other draw is replaced by a buffered
	// sample.
	bb, _, _ := s.Next("b")
	aNext, _, _ := s.Next("a") // Lookahead 1: a's plan was its next batch
	var fromA []int
	for _, e := range bb {
		switch {
		case slices.Contains(ba, e):
			fromA = append(fromA, e)
		case !slices.Contains(aNext, e):
			t.Fatalf("b got %d, neither buffered nor planned by a", e)
		}
	}
	st, _ := s.Status("b")
	if len(fromA) < 5 || st.Substitutions == 0 || st.BufferReads != len(fromA) {
		t.Fatalf("b: %d of a's samples, %d substitutions, %d buffer reads", len(fromA), st.Substitutions, st.BufferReads)
	}
	// The entries consumed by both live jobs are released.
	if rel := s.Releases(nil); !isPermutation(rel, fromA) {
		t.Fatalf("released %v, want %v", rel, fromA)
	}
	// b still gets all 100 samples this epoch.
	o := epochOrders(t, s, "b", 1)[0]
	all := make([]int, 100)
	for i := range all {
		all[i] = i
	}
	if !isPermutation(append(bb, o...), all) {
		t.Fatal("b's epoch is not a permutation after substitutions")
	}
}

func TestBufferEvictsForAnEntryMoreJobsWant(t *testing.T) {
	s, _ := New(Options{Samples: 50, BufferSlots: 1, Lookahead: 1})
	for _, name := range []string{"a", "b", "c"} {
		if err := s.RegisterJob(name, JobConfig{BatchSize: 1, Kind: KindSequential}); err != nil {
			t.Fatal(err)
		}
	}
	next := func(name string, want int) {
		t.Helper()
		if b, _, _ := s.Next(name); !slices.Equal(b, []int{want}) {
			t.Fatalf("%s read %v, want [%d]", name, b, want)
		}
	}
	next("a", 0)
	if !s.Installed(0) { // b and c want 0
		t.Fatal("entry wanted by 2 jobs not kept")
	}
	next("a", 1)
	if s.Installed(1) { // b and c want 1: no more than 0
		t.Fatal("entry wanted by 2 jobs evicted an entry wanted by 2 jobs")
	}
	next("b", 0) // now only c wants 0
	if !s.Installed(1) {
		t.Fatal("entry wanted by 2 jobs did not evict an entry wanted by 1")
	}
	if rel := s.Releases(nil); !slices.Equal(rel, []int{0}) {
		t.Fatalf("released %v, want [0]", rel)
	}
	if st := s.Stats(); st.Evicted != 1 || st.Buffered != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestPrefetchNamesUpcomingNonResidentSamplesMostWantedFirst(t *testing.T) {
	resident := func(i int) bool { return i < 50 }
	s, _ := New(Options{Samples: 100, BufferSlots: 1000, Lookahead: 3, Residency: ResidencyFunc(resident)})
	if err := s.RegisterJob("a", JobConfig{BatchSize: 4, Kind: KindRandom}); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterJob("b", JobConfig{BatchSize: 4, Kind: KindRandom, Subset: []int{60, 61, 62, 63}}); err != nil {
		t.Fatal(err)
	}
	first, _, _ := s.Next("a")
	got := s.Prefetch(1000)
	// Truthful: a's next three batches and all of b's samples, non-resident only.
	var upcoming []int
	for range 3 {
		b, _, _ := s.Next("a")
		upcoming = append(upcoming, b...)
	}
	bb, _, _ := s.Next("b")
	_ = first
	want := map[int]bool{}
	for _, e := range append(upcoming, bb...) {
		if !resident(e) {
			want[e] = true
		}
	}
	if len(got) != len(want) {
		t.Fatalf("prefetch %v, upcoming non-resident %v", got, want)
	}
	for _, e := range got {
		if !want[e] {
			t.Fatalf("prefetched %d, which is not upcoming", e)
		}
	}
	// The samples both jobs want come first.
	k := 0
	for _, e := range got {
		if e >= 60 && e <= 63 && !slices.Contains(first, e) {
			k++
		}
	}
	for i := range k {
		if got[i] < 60 || got[i] > 63 {
			t.Fatalf("prefetch order %v: samples wanted by two jobs are not first", got)
		}
	}
}

func TestLeaseDropsAJobAndReleasesItsReferences(t *testing.T) {
	clk := newClock()
	s, _ := New(Options{Samples: 20, BufferSlots: 20, Now: clk.Now, Lease: time.Minute})
	for _, name := range []string{"live", "dead"} {
		if err := s.RegisterJob(name, JobConfig{BatchSize: 5}); err != nil {
			t.Fatal(err)
		}
	}
	b, _, _ := s.Next("live")
	for _, e := range b {
		if !s.Installed(e) { // "dead" wants them
			t.Fatal("not kept")
		}
	}
	clk.Advance(50 * time.Second)
	if err := s.Touch("live", 0); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	if dropped := s.Reap(); !slices.Equal(dropped, []string{"dead"}) {
		t.Fatalf("reaped %v", dropped)
	}
	if rel := s.Releases(nil); !isPermutation(rel, b) {
		t.Fatalf("released %v, want %v", rel, b)
	}
	if _, _, err := s.Next("dead"); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("next of a dropped job: %v", err)
	}
	if _, err := s.Status("nobody"); !errors.Is(err, ErrNoJob) {
		t.Fatalf("status of an unknown job: %v", err)
	}
	if err := s.RegisterJob("dead", JobConfig{BatchSize: 5}); err != nil {
		t.Fatalf("re-register: %v", err)
	}
	if st := s.Stats(); st.Buffered != 0 {
		t.Fatalf("buffer still holds %d entries", st.Buffered)
	}
}

func TestRegisterJobRejectsBadConfigs(t *testing.T) {
	s, _ := New(Options{Samples: 10})
	for _, c := range []struct {
		name string
		cfg  JobConfig
	}{
		{"", JobConfig{BatchSize: 1}},
		{"a", JobConfig{BatchSize: 0}},
		{"a", JobConfig{BatchSize: -3}},
		{"a", JobConfig{BatchSize: 1, Subset: []int{}}},
		{"a", JobConfig{BatchSize: 1, Subset: []int{10}}},
		{"a", JobConfig{BatchSize: 1, Subset: []int{-1}}},
		{"a", JobConfig{BatchSize: 1, Kind: 7}},
	} {
		if err := s.RegisterJob(c.name, c.cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("RegisterJob(%q, %+v) = %v, want ErrBadConfig", c.name, c.cfg, err)
		}
	}
	if err := s.RegisterJob("a", JobConfig{BatchSize: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterJob("a", JobConfig{BatchSize: 1}); !errors.Is(err, ErrJobExists) {
		t.Fatalf("duplicate: %v", err)
	}
	for i := 1; i < MaxJobs; i++ {
		if err := s.RegisterJob(fmt.Sprint(i), JobConfig{BatchSize: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RegisterJob("one-too-many", JobConfig{BatchSize: 1}); !errors.Is(err, ErrTooManyJobs) {
		t.Fatalf("job %d: %v", MaxJobs+1, err)
	}
	if _, err := New(Options{Samples: -1}); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("New(-1): %v", err)
	}
}

// The memory of Seneca's example, measured on the real structures:
// 1.28 M samples, 8 jobs.
func TestMemoryFor1280kSamplesAnd8Jobs(t *testing.T) {
	const n = 1_280_000
	s, _ := New(Options{Samples: n, BufferSlots: 1024})
	for j := range 8 {
		if err := s.RegisterJob(fmt.Sprint("job", j), JobConfig{BatchSize: 256}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Next(fmt.Sprint("job", j)); err != nil {
			t.Fatal(err)
		}
	}
	// The byte a sample of the buffer's status is kept from the first
	// sample buffered on.
	if m := s.MemoryUsage(); m.Status != 0 || m.ODS != 8*(n/64)*8 {
		t.Fatalf("before any sample is buffered: status %d B, ODS metadata %d B, want 0 and 8 × 1 bit a sample", m.Status, m.ODS)
	}
	if got := s.Prefetch(16); len(got) == 0 {
		t.Fatal("Prefetch buffered no sample")
	}
	m := s.MemoryUsage()
	t.Logf("1.28 M samples × 8 jobs: ODS metadata %d B (seen bits %d + status %d) = %.2f MB; draw index %d B; plans/buffer index %d B; total %.2f MB",
		m.ODS, m.SeenBits, m.Status, float64(m.ODS)/1e6, m.DrawIndex, m.Plans, float64(m.Total)/1e6)
	if want := 8*(n/64)*8 + n; m.ODS != want {
		t.Fatalf("ODS metadata %d B, want 8 × 1 bit + 1 byte per sample = %d", m.ODS, want)
	}
	if m.DrawIndex > n/8 || m.DSA != 0 {
		t.Fatalf("draw index %d B, DSA %d B", m.DrawIndex, m.DSA)
	}
}

func TestConcurrentUse(t *testing.T) {
	s, _ := New(Options{Samples: 3000, BufferSlots: 100,
		Residency: ResidencyFunc(func(i int) bool { return i%4 == 0 })})
	var wg sync.WaitGroup
	for g := range 4 {
		name := fmt.Sprint("job", g)
		cfg := JobConfig{BatchSize: 32}
		if g == 3 {
			cfg.Subset = make([]int, 2000)
			for i := range cfg.Subset {
				cfg.Subset[i] = i + 1000
			}
		}
		if err := s.RegisterJob(name, cfg); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen := map[int]bool{}
			for {
				b, end, err := s.Next(name)
				if err != nil {
					t.Error(err)
					return
				}
				if end {
					break
				}
				for _, e := range b {
					if seen[e] {
						t.Errorf("%s: %d twice", name, e)
					}
					seen[e] = true
					s.Installed(e)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 300 {
			for _, e := range s.Prefetch(16) {
				s.Installed(e)
			}
			s.Releases(nil)
			s.Stats()
			s.MemoryUsage()
		}
	}()
	wg.Wait()
	if err := s.check(); err != nil {
		t.Fatal(err)
	}
}

func TestWantedOnlyWhileAnotherLiveJobStillNeedsTheSample(t *testing.T) {
	resident := func(i int) bool { return i == 9 }
	s, _ := New(Options{Samples: 10, BufferSlots: 4, Lookahead: 1, Residency: ResidencyFunc(resident)})
	if s.Wanted(0) {
		t.Fatal("with no job, a demand read would fill the buffer")
	}
	for _, name := range []string{"a", "b"} {
		if err := s.RegisterJob(name, JobConfig{BatchSize: 1, Kind: KindSequential}); err != nil {
			t.Fatal(err)
		}
	}
	if s.Wanted(9) {
		t.Fatal("a resident sample is wanted in the buffer")
	}
	if b, _, _ := s.Next("a"); !slices.Equal(b, []int{0}) {
		t.Fatalf("a read %v, want [0]", b)
	}
	if !s.Wanted(0) {
		t.Fatal("sample 0 not wanted though b has not read it")
	}
	if b, _, _ := s.Next("b"); !slices.Equal(b, []int{0}) {
		t.Fatalf("b read %v, want [0]", b)
	}
	if s.Wanted(0) {
		t.Fatal("sample 0 wanted after every live job was handed it")
	}
	if err := s.EndJob("b"); err != nil {
		t.Fatal(err)
	}
	if _, _, _ = s.Next("a"); s.Wanted(1) {
		t.Fatal("sample 1 wanted with a single job that was handed it")
	}
	if s.Wanted(-1) || s.Wanted(10) {
		t.Fatal("out-of-range sample wanted")
	}
}
