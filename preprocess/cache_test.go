package preprocess

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func TestDecodedCacheKeepsEntriesWithinBudget(t *testing.T) {
	c := NewDecodedCache(3 * 300) // room for three 10×10 images
	for i, key := range []string{"a", "b", "c", "d"} {
		ok := c.Put(key, NewImage(10, 10))
		if want := i < 3; ok != want {
			t.Errorf("put %s: admitted=%v, want %v", key, ok, want)
		}
	}
	for _, key := range []string{"a", "b", "c"} {
		if _, ok := c.Get(key); !ok {
			t.Errorf("%s was evicted; decoded entries stay", key)
		}
	}
	if used, n := c.Used(); used != 900 || n != 3 {
		t.Errorf("used %d bytes in %d entries, want 900 in 3", used, n)
	}
}

func TestAugmentedEntryEvictedAfterEveryJobConsumedIt(t *testing.T) {
	c := NewAugmentedCache(1000)
	tt := &Tensor{DType: Uint8, Shape: []int{10, 10, 3}, U8: make([]byte, 300)}
	if !c.Put("a", tt, 3) {
		t.Fatal("not admitted")
	}
	if c.Put("b", &Tensor{DType: Uint8, U8: make([]byte, 800)}, 1) {
		t.Error("admitted past the budget")
	}
	for i := range 3 {
		got, ok := c.Consume("a")
		if !ok || got != tt {
			t.Fatalf("consume %d: ok=%v", i, ok)
		}
	}
	if _, ok := c.Consume("a"); ok || c.Has("a") {
		t.Error("entry still there after its 3 consumers")
	}
	if used, n := c.Used(); used != 0 || n != 0 {
		t.Errorf("used %d bytes in %d entries after eviction", used, n)
	}
}

func newTestStore(t *testing.T, data []byte, decBytes, augBytes int64) (*Store, *atomic.Int64) {
	t.Helper()
	p, err := New(Options{Static: []string{"resize:64"}, Augment: []string{"random_resized_crop:32", "hflip:0.5"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	var loads atomic.Int64
	s, err := NewStore(p, StoreOptions{
		Load: func(ctx context.Context, key string) ([]byte, error) {
			loads.Add(1)
			if key == "missing" {
				return nil, errors.New("no such sample")
			}
			return data, nil
		},
		DecodedBytes: decBytes, AugmentedBytes: augBytes, Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, &loads
}

// However many jobs ask for a sample at once, it is loaded, decoded and
// augmented once; every job gets the same augmentation; the entry is gone
// once all of them consumed it, and the next round draws a new one.
func TestStoreOneComputationPerSampleForConcurrentJobs(t *testing.T) {
	s, loads := newTestStore(t, cropJPEG(t, 0, 200, 150, 1), 1<<20, 1<<20)
	const jobs = 8
	var wg sync.WaitGroup
	out := make([]*Tensor, jobs)
	start := make(chan struct{})
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tt, err := s.Augmented(context.Background(), "x", jobs)
			if err != nil {
				t.Error(err)
			}
			out[i] = tt
		}()
	}
	close(start)
	wg.Wait()
	if _, aug := s.Computations(); aug != 1 {
		t.Errorf("%d augmentations for %d concurrent jobs, want 1", aug, jobs)
	}
	if loads.Load() != 1 {
		t.Errorf("%d loads, want 1", loads.Load())
	}
	for i := range out {
		if out[i] != out[0] {
			t.Fatalf("job %d got a different augmentation", i)
		}
	}
	if s.Aug.Has("x") {
		t.Error("augmented entry still cached after every job consumed it")
	}
	if _, ok := s.Dec.Get("x"); !ok {
		t.Error("decoded form not cached")
	}
	// Next round: computed again from the decoded cache (no load).
	t2, err := s.Augmented(context.Background(), "x", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, aug := s.Computations(); aug != 2 || loads.Load() != 1 {
		t.Errorf("second round: %d augmentations, %d loads; want 2 and 1", aug, loads.Load())
	}
	if t2 == out[0] {
		t.Error("second round reused the first round's augmentation")
	}
}

// Jobs arriving one after another take the cached augmentation until
// each has had it.
func TestStoreSequentialJobsShareOneAugmentation(t *testing.T) {
	s, _ := newTestStore(t, cropJPEG(t, 1, 200, 150, 1), 0, 1<<20)
	first, err := s.Augmented(context.Background(), "x", 3)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := s.Augmented(context.Background(), "x", 3)
		if err != nil || got != first {
			t.Fatalf("later job: err=%v same=%v", err, got == first)
		}
	}
	if s.Aug.Has("x") {
		t.Error("entry still cached after 3 of 3 jobs")
	}
	if _, n := s.Dec.Used(); n != 0 {
		t.Error("decoded cache with a zero budget holds an entry")
	}
	if _, err := s.Augmented(context.Background(), "missing", 1); err == nil {
		t.Error("a sample that fails to load gave no error")
	}
}
