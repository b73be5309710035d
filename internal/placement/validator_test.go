package placement

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/puzpuzpuz/xsync/v3"
	"go.uber.org/zap"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// events records what a validator tells the kernel.
type events struct {
	mu  sync.Mutex
	got []Event
}

func (ev *events) add(k EventKind, e *catalog.Entry, sync bool) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.got = append(ev.got, Event{Kind: k, Entry: e, Sync: sync})
}

// newValidator is a validator on its own over e's catalog and source: no
// copier, no opener, no scrubber.
func newValidator(t *testing.T, e *env, o Options) (*validator, *events) {
	t.Helper()
	ev := &events{}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	return &validator{o: &o, cat: e.cat, src: e.source, log: zap.NewNop(), ctx: context.Background(), wg: &wg,
		checks:  xsync.NewMapOf[*catalog.Entry, *check](),
		flights: xsync.NewMapOf[*catalog.Entry, *flight](), buffer: &Buffer{},
		notify: ev.add, forgetResident: func(*catalog.Entry) {}, ready: openGate()}, ev
}

// openGate is a placer's gate (copier.ready) open from the start: the
// parts tested on their own have no walk to wait for.
func openGate() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// The validator alone checks an open against the source: a new content
// is a new version told to the kernel before the open returns, a file
// gone leaves the dataset, and past the guard's budget a file gone stays.
func TestValidatorChecksOpensOnItsOwn(t *testing.T) {
	d := dataset{"a": content("a", 100), "b": content("b", 200), "c": content("c", 300), "d": content("d", 400)}
	e := newEnv(t, d, oneTier(1<<20), Options{})
	e.p.Close() // the placer's own work is not part of this test
	v, ev := newValidator(t, e, Options{Tiers: e.tiers, Validate: ValidateOnce, MaxDrop: 0.25})
	ctx := context.Background()

	// A new content.
	a := e.entry("a")
	ver := a.Version()
	if err := os.WriteFile(filepath.Join(e.src, "a"), content("a2", 150), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, sf, c, err := v.validate(ctx, a)
	if err != nil || !changed || sf == nil {
		t.Fatalf("validate of a changed file: changed %v, source file %v, %v", changed, sf != nil, err)
	}
	sf.Close()
	v.endCheck(a, c)
	if a.Version() != ver+1 || a.Attr().Size != 150 || !a.Residency().Validated() {
		t.Errorf("after the check: version %d (was %d), size %d, validated %v", a.Version(), ver, a.Attr().Size, a.Residency().Validated())
	}
	if len(ev.got) != 1 || ev.got[0].Kind != EntryChanged || ev.got[0].Entry != a || !ev.got[0].Sync {
		t.Errorf("events %+v, want one EntryChanged of a that the open waits for", ev.got)
	}
	// Not resident: the next open reads the source, and finds it as the
	// check left it.
	changed, sf, c, err = v.validate(ctx, a)
	if err != nil || changed {
		t.Errorf("a second open of a checked file: changed %v, %v", changed, err)
	}
	if sf != nil {
		sf.Close()
	}
	v.endCheck(a, c)

	// Files gone: the first within the budget (a quarter of four files),
	// the second past it.
	for _, p := range []string{"b", "c"} {
		if err := os.Remove(filepath.Join(e.src, p)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := v.validate(ctx, e.entry("b")); !errors.Is(err, ErrVanished) {
		t.Errorf("validate of a removed file: %v, want ErrVanished", err)
	}
	if e.cat.Find("b") != nil || v.removed.Load() != 1 {
		t.Errorf("b still in the dataset (removed %d)", v.removed.Load())
	}
	if _, _, _, err := v.validate(ctx, e.entry("c")); !errors.Is(err, ErrDropHeld) {
		t.Errorf("validate of a removed file past the guard: %v, want ErrDropHeld", err)
	}
	if e.cat.Find("c") == nil || v.heldDrops() != 1 {
		t.Errorf("c left the dataset past the guard (held %d)", v.heldDrops())
	}
	var removed int
	for _, x := range ev.got {
		if x.Kind == EntryRemoved {
			removed++
		}
	}
	if removed != 1 {
		t.Errorf("%d EntryRemoved events, want 1 (b's)", removed)
	}
}
