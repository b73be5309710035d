package placement

import (
	"bytes"
	"context"
	"os"
	"sync"
	"testing"

	"github.com/puzpuzpuz/xsync/v3"
	"go.uber.org/zap"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// newCopier is a copier on its own over e's catalog, source and tiers,
// with one worker and a validator of its own: no opener, no shared
// buffer, no scrubber. It stops with the test.
func newCopier(t *testing.T, e *env, o Options) *copier {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	ev := &events{}
	cp := &copier{o: &o, cat: e.cat, src: e.source, log: zap.NewNop(), ctx: ctx, wg: &wg,
		flights:     xsync.NewMapOf[*catalog.Entry, *flight](),
		failedFiles: xsync.NewMapOf[*catalog.Entry, struct{}](),
		queue:       make(chan *catalog.Entry, 16),
		demand:      make(chan struct{}, 4),
		notify:      ev.add,
		buffer:      &Buffer{},
		ready:       openGate(),
	}
	cp.seq.last.Store(-2)
	cp.seq.ahead.Store(-1)
	cp.bufs.New = func() any { b := make([]byte, copyChunk); return &b }
	cp.val, _ = newValidator(t, e, o)
	cp.val.flights = cp.flights
	wg.Add(1)
	go cp.worker()
	return cp
}

// The copier alone copies what is queued into the tiers, whole and
// byte for byte, once each however often it is asked, and counts it.
func TestCopierCopiesOnItsOwn(t *testing.T) {
	d := dataset{"x/a": content("x/a", 5000), "x/b": content("x/b", 3<<20+7), "y": content("y", 0)}
	e := newEnv(t, d, oneTier(1<<30), Options{})
	e.p.Close() // the placer's own workers are not part of this test
	cp := newCopier(t, e, Options{Tiers: e.tiers, Validate: ValidateOnce, MaxDrop: 1})
	for range 3 {
		for _, p := range d.Paths() {
			cp.enqueue(e.entry(p))
		}
	}
	waitFor(t, "every file copied", func() bool {
		for _, p := range d.Paths() {
			if e.entry(p).Tier() != 0 {
				return false
			}
		}
		return cp.queued.Load() == 0
	})
	for _, p := range d.Paths() {
		got, err := os.ReadFile(e.tiers[0].Path(p))
		if err != nil || !bytes.Equal(got, d[p]) {
			t.Errorf("%s: the copy differs from the source (%d bytes, want %d; %v)", p, len(got), len(d[p]), err)
		}
	}
	if n := cp.done.Load(); n != int64(len(d)) {
		t.Errorf("%d copies done, want %d (one a file)", n, len(d))
	}
	if cp.enqueue(e.entry("x/a")) {
		t.Error("a resident file was queued again")
	}
}
