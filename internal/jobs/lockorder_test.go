package jobs

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/preprocess"
	"github.com/epochfs/epochfs/internal/views"
)

// writeJPEGs makes every file under src a small JPEG of its own colour.
func writeJPEGs(t testing.TB) func(src string) {
	return func(src string) {
		n := 0
		err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
			if err != nil || fi.IsDir() {
				return err
			}
			img := image.NewRGBA(image.Rect(0, 0, 48, 40))
			for y := range 40 {
				for x := range 48 {
					img.Set(x, y, color.RGBA{uint8(n * 9), uint8(x * 5), uint8(y * 6), 255})
				}
			}
			n++
			var b bytes.Buffer
			if err := jpeg.Encode(&b, img, nil); err != nil {
				return err
			}
			return os.WriteFile(p, b.Bytes(), 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// newViewsManager is a manager of n JPEGs whose jobs read views (decoded:
// resized and cropped; augmented: then a random crop) from an engine of
// two workers.
func newViewsManager(t testing.TB, n int) *Manager {
	t.Helper()
	var paths []string
	for i := range n {
		paths = append(paths, fmt.Sprintf("c%d/img%03d.jpg", i%2, i))
	}
	return newManagerOpts(t, paths, writeJPEGs(t), Options{}, func(p *placement.Placer) (*views.Set, *preprocess.Engine) {
		eng, err := preprocess.NewEngine(preprocess.EngineOptions{
			Load: p.ReadSample, Name: p.Catalog().SampleName,
			DecodedBytes: 1 << 20, AugmentedBytes: 1 << 20,
			Pool: preprocess.PoolOptions{Workers: 2},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		pipeline := preprocess.Options{Static: []string{"resize:36", "center_crop:32"}, Augment: []string{"random_resized_crop:28", "hflip:0.5"}}
		return views.NewSet(views.Options{Engine: eng, Pipeline: pipeline, Placer: p}), eng
	})
}

// rankReads is what the batch reads of one job's ranks returned.
type rankReads struct {
	mu   sync.Mutex
	seen map[string]int
	ends []int
}

// readRank reads batches of rank r of job ref until more says no more,
// counting them in got; an error goes to failed.
func readRank(ctx context.Context, m *Manager, ref Ref, r int, got *rankReads, more func() bool, failed chan<- error) {
	for more() {
		b, end, err := m.Batch(ctx, ref, r, nil)
		if err != nil {
			failed <- fmt.Errorf("%s rank %d: %w", ref.Name, r, err)
			return
		}
		got.mu.Lock()
		if end {
			got.ends[r]++
		} else {
			for _, p := range b.Paths {
				got.seen[p]++
			}
		}
		got.mu.Unlock()
		b.Release()
	}
}

// counts is the fewest and the most times a file was seen.
func (g *rankReads) counts() (lo, hi int) {
	lo = -1
	for _, n := range g.seen {
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return lo, hi
}

// TestEveryPathOfAViewsJobRunsAtOnceInTheLockOrder takes the locks of the
// cross-package order (docs/architecture.md, "Lock order") from every path
// at once, under -race in make ci: two readers of each rank's batch of two
// views jobs (the rank's turn, the carry, the sampler with ODS asking the
// views' caches, the engine), the jobs' state (the carries, read without
// waiting for a draw), their status and their ranks' status, the jobs'
// list, a third job reading next, and the manager's loop working ahead. A
// lock taken out of order deadlocks within the run and fails it at the
// liveness bound; each epoch still hands every sample once.
//
// A decoded job's epoch is a fixed number of batches; an augmented job's
// is not (a slow sample waits for a later batch), so its readers stop at
// its ends and may have begun one more epoch.
func TestEveryPathOfAViewsJobRunsAtOnceInTheLockOrder(t *testing.T) {
	const files, ranks, size, epochs = 24, 2, 4, 3
	m := newViewsManager(t, files)
	job := "batch_size=%d\nworld_size=%d\nview=%s\nsampler=ods\nseed=5\n"
	configure(t, m, "d", fmt.Sprintf(job, size, ranks, "decoded"))
	configure(t, m, "a", fmt.Sprintf(job, size, ranks, "augmented"))
	configure(t, m, "n", "batch_size=3\nview=encoded\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // the liveness bound
	defer cancel()

	decoded := &rankReads{seen: map[string]int{}, ends: make([]int, ranks)}
	augmented := &rankReads{seen: map[string]int{}, ends: make([]int, ranks)}
	var readers sync.WaitGroup
	failed := make(chan error, 16)
	for r := range ranks {
		var left atomic.Int32 // the rank's batches and one end an epoch
		left.Store(epochs * (files/ranks/size + 1))
		counted := func() bool { return left.Add(-1) >= 0 }
		untilEnds := func() bool {
			augmented.mu.Lock()
			defer augmented.mu.Unlock()
			return augmented.ends[r] < epochs
		}
		for range 2 {
			readers.Add(2)
			go func() { defer readers.Done(); readRank(ctx, m, jr(m, "d"), r, decoded, counted, failed) }()
			go func() { defer readers.Done(); readRank(ctx, m, jr(m, "a"), r, augmented, untilEnds, failed) }()
		}
	}
	stop := make(chan struct{})
	var others sync.WaitGroup
	loop := func(step func() error) {
		others.Add(1)
		go func() {
			defer others.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := step(); err != nil {
					failed <- err
					return
				}
			}
		}()
	}
	loop(func() error { // the state and the status files of both jobs
		for _, name := range []string{"d", "a"} {
			ref := jr(m, name)
			if _, err := m.State(ref); err != nil {
				return fmt.Errorf("%s state: %w", name, err)
			}
			if _, err := m.Status(ref); err != nil {
				return fmt.Errorf("%s status: %w", name, err)
			}
			for r := range ranks {
				if _, err := m.RankStatus(ref, r); err != nil {
					return fmt.Errorf("%s rank %d status: %w", name, r, err)
				}
			}
		}
		m.List()
		m.Stats()
		return nil
	})
	loop(func() error { // another job, reading next
		_, _, err := m.Next(ctx, jr(m, "n"))
		return err
	})
	readers.Wait()
	close(stop)
	others.Wait()
	close(failed)
	for err := range failed {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("the readers did not finish within the liveness bound: a lock taken out of order?")
	}
	for r := range ranks {
		if decoded.ends[r] != epochs || augmented.ends[r] != epochs {
			t.Errorf("rank %d saw %d and %d ends of an epoch, want %d", r, decoded.ends[r], augmented.ends[r], epochs)
		}
	}
	if lo, hi := decoded.counts(); len(decoded.seen) != files || lo != epochs || hi != epochs {
		t.Errorf("decoded: %d files seen, from %d to %d times each, want each of %d files %d times", len(decoded.seen), lo, hi, files, epochs)
	}
	if lo, hi := augmented.counts(); len(augmented.seen) != files || lo < epochs || hi > epochs+1 {
		t.Errorf("augmented: %d files seen, from %d to %d times each, want each of %d files %d times (%d for those of an epoch begun)", len(augmented.seen), lo, hi, files, epochs, epochs+1)
	}
}
