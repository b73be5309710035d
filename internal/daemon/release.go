package daemon

import (
	"context"
	"runtime"
	"runtime/debug"
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
// catalog's tree is whole (done closes): the walk of a source, or a
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
