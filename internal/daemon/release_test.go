package daemon

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/placement"
	"go.uber.org/zap"
)

func TestMemoryIsReleasedWhenABurstOfCopiesEnds(t *testing.T) {
	for _, tc := range []struct {
		last int64
		st   placement.Stats
		want bool
	}{
		{0, placement.Stats{Done: releaseAfter}, true},
		{0, placement.Stats{Done: releaseAfter, Queued: 1}, false}, // still copying
		{0, placement.Stats{Done: releaseAfter - 1}, false},        // too few to matter
		{5000, placement.Stats{Done: 5000}, false},                 // released already
		{5000, placement.Stats{Done: 5000 + releaseAfter}, true},
	} {
		if got := burstEnded(tc.last, tc.st); got != tc.want {
			t.Errorf("burstEnded(%d, %+v) = %v, want %v", tc.last, tc.st, got, tc.want)
		}
	}
}

// The buffers a burst of copies leaves in a sync.Pool (the source's read
// buffers, the placer's copy buffers) are freed by freeMemory, not kept in
// the pool's victim cache until some later collection.
func TestFreeMemoryFreesIdlePoolBuffers(t *testing.T) {
	// No collection while the pool fills: one would move the buffers to
	// the victim cache, or free them, before the measure starts.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var pool sync.Pool
	for range 16 {
		b := make([]byte, 1<<20)
		pool.Put(&b)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	freeMemory()
	runtime.ReadMemStats(&after)
	if freed := int64(before.HeapInuse) - int64(after.HeapInuse); freed < 12<<20 {
		t.Errorf("freeMemory freed %d bytes of 16 idle pooled MiB", freed)
	}
	runtime.KeepAlive(&pool)
}

// Once the catalog is whole, the garbage of its walk is handed back to
// the system: the heap keeps no more idle pages than a few spans'.
func TestMemoryIsReleasedWhenTheCatalogIsWhole(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var keep [][]byte
	for i := range 64 << 10 {
		b := make([]byte, 512) // a walk's garbage: many small objects
		if i%64 == 0 {
			keep = append(keep, b)
		}
	}
	runtime.GC() // the garbage is freed but its pages stay with the runtime
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	done := make(chan struct{})
	close(done)
	releaseAfterWalk(context.Background(), done, func() {}, zap.NewNop())
	runtime.ReadMemStats(&after)
	if idle := before.HeapIdle - before.HeapReleased; idle < 16<<20 {
		t.Fatalf("the test's garbage left %d idle bytes, want at least 16 MiB to measure", idle)
	}
	if idle := after.HeapIdle - after.HeapReleased; idle > 4<<20 {
		t.Errorf("after the catalog is whole %d idle bytes are not returned to the system (%d before)", idle, before.HeapIdle-before.HeapReleased)
	}
	// A mount that ends first returns without waiting.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	releaseAfterWalk(ctx, make(chan struct{}), func() {}, zap.NewNop())
	runtime.KeepAlive(keep)
}

func TestAQuietDaemonHoldingGarbageReleasesIt(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name      string
		prev, cur heapSample
		want      bool
	}{
		{"quiet, 12 MiB held over 138 MiB live", heapSample{allocs: 500 * mib}, heapSample{allocs: 500*mib + 300<<10, live: 138 * mib, held: 12 * mib}, true},
		{"allocating", heapSample{allocs: 500 * mib}, heapSample{allocs: 502 * mib, live: 138 * mib, held: 12 * mib}, false},
		{"quiet, little held", heapSample{allocs: 500 * mib}, heapSample{allocs: 500 * mib, live: 138 * mib, held: 7 * mib}, false},
		{"quiet, held small beside a large heap", heapSample{allocs: 500 * mib}, heapSample{allocs: 500 * mib, live: 1200 * mib, held: 30 * mib}, false},
		{"quiet, held large beside a large heap", heapSample{allocs: 500 * mib}, heapSample{allocs: 500 * mib, live: 1200 * mib, held: 40 * mib}, true},
	} {
		if got := quietWithGarbage(tc.prev, tc.cur); got != tc.want {
			t.Errorf("%s: quietWithGarbage = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// readHeap sees garbage no collection freed yet, and pages a collection
// freed but the runtime kept; a release leaves neither.
func TestTheHeapSampleCountsGarbageUntilAReleaseReturnsIt(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	freeMemory()
	garbage := func() (keep [][]byte) {
		for i := range 64 << 10 {
			b := make([]byte, 512) // 32 MiB of small objects, one in 64 kept
			if i%64 == 0 {
				keep = append(keep, b)
			}
		}
		return keep
	}
	keep := garbage()
	if s := readHeap(); s.held < 24<<20 {
		t.Fatalf("32 MiB of garbage not collected, but the sample holds %d bytes", s.held)
	}
	freeMemory()
	if s := readHeap(); s.held > 4<<20 {
		t.Errorf("after a release the sample holds %d bytes", s.held)
	}
	keep = append(keep, garbage()...)
	runtime.GC() // freed, its pages kept by the runtime
	if s := readHeap(); s.held < 16<<20 {
		t.Errorf("32 MiB of garbage collected, but the sample holds %d bytes of free pages", s.held)
	}
	runtime.KeepAlive(keep)
}

// The loop releases once a quiet daemon holds garbage, and once a daemon
// that worked has been quiet for quietTicks: once a burst. A busy daemon,
// or a quiet one that holds little and did nothing since, is left alone.
func TestTheQuietReleaseRunsOnceABurst(t *testing.T) {
	const mib = 1 << 20
	samples := []heapSample{
		{allocs: 100 * mib}, // the start (the mount's work)
		{allocs: 300 * mib, live: 100 * mib, held: 90 * mib}, // busy
		{allocs: 300 * mib, live: 100 * mib, held: 90 * mib}, // quiet, holding: released
		{allocs: 300 * mib, live: 100 * mib},                 // after the release
		{allocs: 300 * mib, live: 100 * mib},                 // quiet, nothing held
		{allocs: 300*mib + 1000, live: 100 * mib, held: mib}, // quiet, little held
		{allocs: 300*mib + 2000, live: 100 * mib, held: mib}, // quiet, little held
		{allocs: 500 * mib, live: 100 * mib, held: mib},      // busy, little held
		{allocs: 500 * mib, live: 100 * mib, held: mib},      // quiet 1
		{allocs: 500 * mib, live: 100 * mib, held: mib},      // quiet 2
		{allocs: 500 * mib, live: 100 * mib, held: mib},      // quiet 3: released
		{allocs: 500 * mib, live: 100 * mib},                 // after the release
		{allocs: 500 * mib, live: 100 * mib},                 // quiet
		{allocs: 500 * mib, live: 100 * mib},                 // quiet
		{allocs: 500 * mib, live: 100 * mib},                 // quiet
	}
	var mu sync.Mutex
	done := make(chan struct{})
	read := func() heapSample {
		mu.Lock()
		defer mu.Unlock()
		s := samples[0]
		if len(samples) > 1 {
			samples = samples[1:]
		} else if done != nil {
			close(done)
			done = nil
		}
		return s
	}
	wait := done
	releases := 0
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() {
		releaseWhenQuiet(ctx, time.Millisecond, read, func() { releases++ }, zap.NewNop())
		close(ended)
	}()
	<-wait
	cancel()
	<-ended
	if releases != 2 {
		t.Errorf("%d releases, want 2", releases)
	}
}
