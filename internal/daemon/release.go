package daemon

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/epochfs/epochfs/internal/placement"
	"go.uber.org/zap"
)

// Returning the memory of a burst of copies to the system.
//
// Copying a dataset into the tiers allocates and frees per file (names,
// descriptors, catalog writes): the live heap after a warmup of 100,000
// files is no larger than after a remount of the same catalog, but the Go
// runtime keeps the freed pages (HeapIdle) and returns them only slowly,
// so the daemon's RSS stayed about twice what a remount shows, for hours.
// Once the copies stop, the daemon hands those pages back at once, and
// with them the pages of the catalog's files it mapped meanwhile
// (catalog.PageOut; pageOut below).

// releaseEvery is how often the daemon looks at the copies, and
// releaseAfter how many copies a burst must have made to be worth a
// release (a release runs a full collection).
const (
	releaseEvery = 10 * time.Second
	releaseAfter = 1000
)

// releaseAfterCopies returns the freed heap (and, pageOut, the catalog's
// mapped pages) to the system each time the placer goes idle after at
// least releaseAfter copies, until ctx ends.
func releaseAfterCopies(ctx context.Context, stats func() placement.Stats, pageOut func(), log *zap.Logger) {
	t := time.NewTicker(releaseEvery)
	defer t.Stop()
	last := stats().Done
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st := stats()
		if !burstEnded(last, st) {
			continue
		}
		last = st.Done
		start := time.Now()
		freeMemory()
		pageOut()
		log.Debug("copies idle: freed memory returned to the system", zap.Int64("copies", st.Done), zap.Duration("took", time.Since(start)))
	}
}

// releaseAfterWalk returns the freed heap to the system once the
// catalog's tree is whole and the placer has checked the copies it
// records (done closes: the placer's gate): the walk of a source, or a
// remount's load of the catalog, allocates and frees per entry (directory
// reads, stat results, records), and left the daemon's RSS at 1.7 times
// its live heap for a catalog of 1,000,000 files; pageOut then hands back
// the pages of the catalog's files the walk or load read.
func releaseAfterWalk(ctx context.Context, done <-chan struct{}, pageOut func(), log *zap.Logger) {
	select {
	case <-ctx.Done():
		return
	case <-done:
	}
	start := time.Now()
	freeMemory()
	pageOut()
	log.Debug("catalog whole: freed memory returned to the system", zap.Duration("took", time.Since(start)))
}

// The heap a quiet daemon holds for nothing. Work the two releases above
// do not follow (the catalog database's compactions after a walk or a
// remount, a refresh, a verify, jobs' epochs) leaves garbage that the
// collector frees only at its next cycle, which a quiet daemon does not
// start for up to two minutes, and pages that the runtime then keeps, as
// the heap is far below its goal: 12–14 MB after a walk or a remount of
// 1,000,000 files, 8 % of the daemon's RSS, for as long as it stays quiet.
// So every releaseEvery the daemon looks at its heap, and once it
// allocated less than quietAllocs in that time while holding at least
// max(quietHeld, live/32) of garbage not yet collected and of free pages,
// it returns them: a full collection a burst of work, since a release
// leaves nothing held and a quiet daemon takes long to hold that much
// again. Garbage that was live at the last collection (the buffers a
// pool of the catalog database drops a while after its compactions) shows
// in no count before a collection: so a daemon that worked (a tick with
// quietAllocs allocated, or the mount's walk or load) and then stayed
// quiet for quietTicks in a row releases once too.
const (
	quietAllocs = 1 << 20
	quietHeld   = 8 << 20
	quietTicks  = 3
)

// heapSample is what releaseWhenQuiet reads of the heap (runtime/metrics).
type heapSample struct {
	allocs uint64 // bytes allocated since the start
	live   uint64 // live bytes at the last collection
	held   uint64 // bytes of objects allocated since it, and of free pages not returned
}

var heapMetrics = []string{"/gc/heap/allocs:bytes", "/gc/heap/live:bytes",
	"/memory/classes/heap/objects:bytes", "/memory/classes/heap/free:bytes"}

// readHeap samples the heap.
func readHeap() heapSample {
	ms := make([]metrics.Sample, len(heapMetrics))
	for i, n := range heapMetrics {
		ms[i].Name = n
	}
	metrics.Read(ms)
	v := func(i int) uint64 {
		if ms[i].Value.Kind() != metrics.KindUint64 {
			return 0 // not in this runtime: nothing to release for
		}
		return ms[i].Value.Uint64()
	}
	s := heapSample{allocs: v(0), live: v(1)}
	if objects := v(2); objects > s.live {
		s.held = objects - s.live
	}
	s.held += v(3)
	return s
}

// quietWithGarbage reports that between samples prev and cur the daemon
// allocated little, while holding enough garbage and free pages to be
// worth a release.
func quietWithGarbage(prev, cur heapSample) bool {
	return cur.allocs-prev.allocs < quietAllocs && cur.held >= max(quietHeld, cur.live/32)
}

// releaseWhenQuiet returns what a quiet daemon holds for nothing (above)
// to the system, looking every interval until ctx ends; read samples the
// heap.
func releaseWhenQuiet(ctx context.Context, every time.Duration, read func() heapSample, pageOut func(), log *zap.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	prev := read()
	worked, quiet := true, 0 // the mount's walk or load is work
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur := read()
		if cur.allocs-prev.allocs >= quietAllocs {
			worked, quiet = true, 0
		} else {
			quiet++
		}
		if quietWithGarbage(prev, cur) || worked && quiet >= quietTicks {
			start := time.Now()
			freeMemory()
			pageOut()
			log.Debug("daemon quiet: freed memory returned to the system", zap.Uint64("held_bytes", cur.held),
				zap.Uint64("live_bytes", cur.live), zap.Duration("took", time.Since(start)))
			cur = read()
			worked = false
		}
		prev = cur
	}
}

// burstEnded reports that the placer is idle and has installed at least
// releaseAfter copies since the last release (at lastDone copies).
func burstEnded(lastDone int64, st placement.Stats) bool {
	return st.Queued == 0 && st.Done-lastDone >= releaseAfter
}

// freeMemory returns the freed heap to the system. It collects twice: the
// buffer pools of a burst of copies (sync.Pool: the source's read buffers
// and the placer's copy buffers, 1 MiB each) survive one collection in
// their victim caches and are freed by the next; FreeOSMemory's own
// collection is the second, after which it returns the pages.
func freeMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}
