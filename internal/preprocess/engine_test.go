package preprocess

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// engineData is n small JPEGs (photo crops) and a corrupt one at index n.
type engineData struct {
	jpegs [][]byte
	loads atomic.Int64
}

func newEngineData(t testing.TB, n int) *engineData {
	d := &engineData{}
	for i := 0; i < n; i++ {
		d.jpegs = append(d.jpegs, cropJPEG(t, i, 96+i%5*8, 80+i%3*8, uint64(i)))
	}
	d.jpegs = append(d.jpegs, []byte("\xff\xd8\xff garbage, not a JPEG"))
	return d
}

func (d *engineData) name(s int) string { return fmt.Sprintf("img%04d.jpg", s) }

func newTestEngine(t testing.TB, d *engineData, dec, aug int64) *Engine {
	t.Helper()
	e, err := NewEngine(EngineOptions{
		Load: func(ctx context.Context, s int) ([]byte, error) {
			d.loads.Add(1)
			return d.jpegs[s], nil
		},
		Name: d.name, DecodedBytes: dec, AugmentedBytes: aug, Seed: 11,
		Pool: PoolOptions{Workers: 2, Timeout: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

var engineOpts = Options{Static: []string{"resize:64"}, Augment: []string{"random_resized_crop:32", "hflip:0.5"}}

type taken struct {
	s   int
	gen uint64
}

// epoch has consumer c take every sample once, in a random order, and
// returns what it got.
func epoch(t *testing.T, v *View, c, n int, rng *rand.Rand) []taken {
	t.Helper()
	var out []taken
	for _, s := range rng.Perm(n) {
		tt, info, err := v.Take(context.Background(), c, s)
		if err != nil {
			t.Errorf("consumer %d take %d: %v", c, s, err)
			continue
		}
		if tt == nil || len(tt.U8) != 32*32*3 {
			t.Errorf("consumer %d take %d: tensor %v", c, s, tt)
		}
		out = append(out, taken{s, info.Gen})
	}
	return out
}

func TestEngineProducesEachSampleOnceForThreeConcurrentJobs(t *testing.T) {
	const n = 40
	d := newEngineData(t, n)
	e := newTestEngine(t, d, 0, 64<<20)
	v, err := e.View(engineOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	for c := range 3 {
		v.Join(c)
	}
	var wg sync.WaitGroup
	got := make([][]taken, 3)
	for c := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[c] = epoch(t, v, c, n, rand.New(rand.NewPCG(uint64(c), 1)))
		}()
	}
	wg.Wait()
	st := e.Stats()
	if st.Augments != n {
		t.Errorf("%d augmentations for %d samples and 3 jobs, want %d", st.Augments, n, n)
	}
	if st.AugmentedEntries != 0 || st.AugmentedBytes != 0 {
		t.Errorf("after every job took every sample: %d entries, %d bytes cached", st.AugmentedEntries, st.AugmentedBytes)
	}
	for c := range 3 {
		if len(got[c]) != n {
			t.Errorf("consumer %d got %d samples", c, len(got[c]))
		}
	}
}

func TestEngineNeverGivesAJobTheSameAugmentationTwice(t *testing.T) {
	const n = 24
	d := newEngineData(t, n)
	e := newTestEngine(t, d, 1<<20, 64<<20)
	v, err := e.View(engineOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	for c := range 3 {
		v.Join(c)
	}
	seen := make([]map[taken]bool, 3)
	for c := range seen {
		seen[c] = map[taken]bool{}
	}
	rng := rand.New(rand.NewPCG(3, 3))
	// Uneven speeds: consumer 0 runs three epochs while 2 runs one.
	for round := 0; round < 3; round++ {
		for c := range 3 {
			if c > 0 && round%c != 0 {
				continue
			}
			for _, tk := range epoch(t, v, c, n, rng) {
				if seen[c][tk] {
					t.Fatalf("consumer %d got sample %d generation %d twice", c, tk.s, tk.gen)
				}
				seen[c][tk] = true
			}
			if st := e.Stats(); st.AugmentedBytes > st.AugmentedBudget || st.DecodedBytes > st.DecodedBudget {
				t.Fatalf("over budget: %+v", st)
			}
		}
	}
	// Consumer 1 leaves: what only it still wanted is dropped.
	v.Leave(1)
	v.Leave(2)
	for range 2 {
		epoch(t, v, 0, n, rng)
	}
	if st := e.Stats(); st.AugmentedEntries != 0 {
		t.Errorf("%d entries cached with one consumer left that took them all", st.AugmentedEntries)
	}
}

func TestEngineBudgetsHoldUnderPrefetch(t *testing.T) {
	const n = 60
	d := newEngineData(t, n)
	tensor := int64(32 * 32 * 3)
	e := newTestEngine(t, d, 10*64*64*3, 8*tensor)
	v, _ := e.View(engineOpts)
	defer v.Release()
	v.Join(0)
	v.Join(1)
	stop := make(chan struct{})
	var over atomic.Value
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if st := e.Stats(); st.AugmentedBytes > st.AugmentedBudget || st.DecodedBytes > st.DecodedBudget {
				over.Store(st)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	for s := 0; s < n; s++ {
		v.Want(0, s)
		v.Want(1, s)
	}
	for c := 0; c < 2; c++ {
		for s := 0; s < n; s++ {
			if _, _, err := v.Take(context.Background(), c, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	if st := over.Load(); st != nil {
		t.Fatalf("a budget was exceeded: %+v", st)
	}
	st := e.Stats()
	// Resized to 64 on the short side: 12-16 KB each.
	if st.DecodedEntries < 5 || st.DecodedBytes < st.DecodedBudget-16<<10 {
		t.Errorf("decoded cache: %d entries, %d bytes of %d: not filled", st.DecodedEntries, st.DecodedBytes, st.DecodedBudget)
	}
	if st.Augments > 2*n {
		t.Errorf("%d augmentations for %d samples and 2 jobs", st.Augments, n)
	}
}

func TestEnginePrefetchIsTakenFromTheCache(t *testing.T) {
	d := newEngineData(t, 8)
	e := newTestEngine(t, d, 0, 64<<20)
	var finished atomic.Int64
	e.OnFinish(func() { finished.Add(1) })
	v, _ := e.View(engineOpts)
	defer v.Release()
	v.Join(0)
	for s := 0; s < 8; s++ {
		if !v.Want(0, s) {
			t.Fatalf("want %d refused", s)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for s := 0; s < 8; s++ {
		for v.Status(0, s) != StatusCached {
			if time.Now().After(deadline) {
				t.Fatalf("sample %d: status %d, never cached", s, v.Status(0, s))
			}
			time.Sleep(time.Millisecond)
		}
	}
	for s := 0; s < 8; s++ {
		_, info, err := v.Take(context.Background(), 0, s)
		if err != nil || !info.Cached {
			t.Fatalf("take %d after its prefetch: %+v, %v", s, info, err)
		}
	}
	if st := e.Stats(); st.Augments != 8 || st.AugmentedHits != 8 || st.AugmentedEntries != 0 {
		t.Fatalf("stats %+v", st)
	}
	// OnFinish runs after the result is in: wait for the last call.
	for finished.Load() < 8 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := finished.Load(); n != 8 {
		t.Errorf("OnFinish called %d times for 8 productions", n)
	}
}

func TestEngineGenerationZeroEqualsThePipelineRunWithTheSeed(t *testing.T) {
	d := newEngineData(t, 6)
	e := newTestEngine(t, d, 0, 0) // no caches: straight from the encoded bytes
	v, _ := e.View(engineOpts)
	defer v.Release()
	v.Join(0)
	p, err := New(engineOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for s := 0; s < 6; s++ {
		got, info, err := v.Take(context.Background(), 0, s)
		if err != nil || info.Gen != 0 {
			t.Fatalf("take %d: %+v %v", s, info, err)
		}
		want, err := p.Run(d.jpegs[s], SampleRNG(11, d.name(s)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.U8, want.U8) {
			t.Fatalf("sample %d: generation 0 differs from Run with SampleRNG(seed, name)", s)
		}
		// The next generation is the run with seed+1.
		got, info, _ = v.Take(context.Background(), 0, s)
		want, _ = p.Run(d.jpegs[s], SampleRNG(12, d.name(s)))
		if info.Gen != 1 || !bytes.Equal(got.U8, want.U8) {
			t.Fatalf("sample %d: generation %d differs from Run with seed+1", s, info.Gen)
		}
	}
}

func TestEngineCorruptSampleFailsOnceAndIsNotRetried(t *testing.T) {
	d := newEngineData(t, 3)
	e := newTestEngine(t, d, 1<<20, 1<<20)
	v, _ := e.View(engineOpts)
	defer v.Release()
	v.Join(0)
	bad := 3
	for i := 0; i < 3; i++ {
		_, _, err := v.Take(context.Background(), 0, bad)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("take %d of a corrupt sample: %v", i, err)
		}
	}
	if _, err := v.Decoded(context.Background(), bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("decoded view of a corrupt sample: %v", err)
	}
	if v.Status(0, bad) != StatusFailed {
		t.Error("status of a corrupt sample")
	}
	if n := d.loads.Load(); n != 1 {
		t.Errorf("the corrupt sample was loaded %d times", n)
	}
	if st := e.Stats(); st.Failed != 1 {
		t.Errorf("Failed = %d", st.Failed)
	}
	// The others are fine.
	for s := 0; s < 3; s++ {
		if _, _, err := v.Take(context.Background(), 0, s); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEngineDecodedViewIsCachedAndSharedByEqualStaticSteps(t *testing.T) {
	d := newEngineData(t, 4)
	e := newTestEngine(t, d, 1<<20, 1<<20)
	a, _ := e.View(engineOpts)
	defer a.Release()
	o := engineOpts
	o.Augment = []string{"random_resized_crop:48"}
	b, _ := e.View(o)
	defer b.Release()
	if a == b {
		t.Fatal("different augment steps share a view")
	}
	p, _ := New(engineOpts)
	defer p.Close()
	for s := 0; s < 4; s++ {
		img, err := a.Decoded(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := p.Decode(d.jpegs[s])
		if !bytes.Equal(img.Pix, want.Pix) || img.W != want.W {
			t.Fatalf("decoded %d differs from Pipeline.Decode", s)
		}
		if !b.DecodedCached(s) {
			t.Fatalf("sample %d decoded through one view is not cached for the other", s)
		}
	}
	loads := d.loads.Load()
	for s := 0; s < 4; s++ {
		b.Decoded(context.Background(), s)
	}
	if d.loads.Load() != loads {
		t.Error("a cached decoded form was decoded again")
	}
	if same, _ := e.View(engineOpts); same != a {
		t.Error("equal pipelines got two views")
	} else {
		same.Release()
	}
}
