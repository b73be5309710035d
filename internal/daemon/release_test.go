package daemon

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"

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
