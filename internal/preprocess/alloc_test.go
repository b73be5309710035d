//go:build !race

package preprocess

// Allocation counts, which the race detector changes (sync.Pool drops a
// random share of what it is given under it): make ci runs these in a
// step without -race.

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/epochfs/epochfs/internal/testenv"
)

// Getting and putting a pooled class allocate nothing once it is there.
func TestBufPoolRecyclesWithoutAllocating(t *testing.T) {
	var b bufPool
	b.put(b.get(602240))
	// AllocsPerRun runs on one P, whose private slot of the class holds
	// the buffer between put and get. (A collection emptying the pool in
	// between costs one allocation in 100 runs, which rounds to 0.)
	allocs := testing.AllocsPerRun(100, func() {
		x := b.get(590000)
		b.put(x)
	})
	if allocs != 0 {
		t.Errorf("get+put of a pooled class: %.1f allocations, want 0", allocs)
	}
}

// In a steady state, the pool path (LoadFile, the training pipeline,
// NPY, Release) allocates no tensor-sized buffer per sample: the encoded
// input, the decoded region, the resize buffers and the 600 KB output
// tensor all come back from the buffer pool. (Before the pool took them
// all, a sample allocated about 1.5 MB.)
func TestPoolPathAllocatesNoTensorSizedBufferPerSample(t *testing.T) {
	if !haveTurbo {
		testenv.Skip(t, "Go's image/jpeg (the build without cgo) allocates its own images")
	}
	dir := t.TempDir()
	paths := writeJPEGs(t, dir, 6)
	p, err := New(Options{Augment: []string{"random_resized_crop:224", "hflip:0.5"}, Output: "float32_chw"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pool, err := NewPool(PoolOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := context.Background()
	load := func(_ context.Context, s *State) error { return p.LoadFile(s, s.Key) }
	steps := append([]Step{load}, p.EncodedSteps()...)
	keys := make([]string, 500)
	for i := range keys {
		keys[i] = fmt.Sprint(i)
	}
	run := func(from, to int) {
		go func() {
			for i := from; i < to; i++ {
				st := &State{Key: paths[i%len(paths)], RNG: SampleRNG(1, keys[i])}
				if err := pool.Submit(ctx, Task{Key: keys[i], State: st, Steps: steps}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		for range to - from {
			r, err := pool.Next(ctx)
			if err != nil || r.Err != nil {
				t.Fatal(err, r.Err)
			}
			if err := WriteNPY(io.Discard, r.State.Out); err != nil {
				t.Fatal(err)
			}
			r.State.Out.Release()
		}
	}
	// No collection, so nothing empties the buffer pool under the test.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	run(0, 200) // warm up: every buffer, and most size classes of decoded regions
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 300
	run(200, 200+n)
	runtime.ReadMemStats(&after)
	perSample := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("%d B and %.1f allocations per sample", perSample, float64(after.Mallocs-before.Mallocs)/n)
	if perSample > 64<<10 {
		t.Errorf("%d bytes allocated per sample, want < 64 KiB (the output tensor alone is 588 KiB)", perSample)
	}
}
