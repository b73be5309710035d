package placement

import (
	"context"
	"errors"
	"testing"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// prewarmEnv is a placed dataset whose kept copies were let go, as a new
// mount of the same catalog finds it.
func prewarmEnv(t *testing.T, files int, popts Options) *env {
	t.Helper()
	e := placedEnv(t, smallDataset(files, 3000), popts)
	e.p.op.res.close()
	return e
}

func TestPrewarmKeepsTheCopiesWithinTheBudgetWithoutReleasingAny(t *testing.T) {
	const budget = 4
	e := prewarmEnv(t, 10, Options{KeptCopies: budget})
	before := e.p.ResidentStats()
	var attached []string
	st := e.p.Prewarm(context.Background(), func(int) bool { return true }, func(en *catalog.Entry, c *Resident) error {
		if c.e != en || !c.kept.Load() || c.used.Load() {
			t.Errorf("%s: attach got kept=%v used=%v, want a kept, unused copy of the entry", en.Path(), c.kept.Load(), c.used.Load())
		}
		attached = append(attached, en.Path())
		return nil
	})
	after := e.p.ResidentStats()
	if st.Kept != budget || st.Left != 10-budget || !errors.Is(st.Stopped, errPrewarmFull) || len(attached) != budget {
		t.Fatalf("prewarm of 10 copies with a budget of %d: %+v, %d attached; want %d kept, %d left, stopped by the budget", budget, st, len(attached), budget, 10-budget)
	}
	if after.Kept != budget || after.Prewarmed-before.Prewarmed != budget || after.Misses != before.Misses || after.Released != before.Released {
		t.Errorf("after the prewarm: %+v (before %+v); want %d kept and prewarmed, no miss and no release", after, before, budget)
	}
	// A reader of a prewarmed copy finds it kept.
	r := openRead(t, e, attached[0])
	if got := e.p.ResidentStats(); got.Hits != after.Hits+1 || got.Misses != after.Misses {
		t.Errorf("the first open of a prewarmed copy: %d hits and %d misses more, want 1 and 0", got.Hits-after.Hits, got.Misses-after.Misses)
	}
	r.Close()
	// A second prewarm finds no room and keeps nothing more.
	if st := e.p.Prewarm(context.Background(), func(int) bool { return true }, func(*catalog.Entry, *Resident) error { return nil }); st.Kept != 0 {
		t.Errorf("a prewarm with the budget full kept %d copies", st.Kept)
	}
}

func TestPrewarmStopsAtAFailedAttachAndSkipsTiersNotWanted(t *testing.T) {
	e := prewarmEnv(t, 6, Options{})
	if st := e.p.Prewarm(context.Background(), func(int) bool { return false }, func(*catalog.Entry, *Resident) error {
		t.Error("attach called for a tier not wanted")
		return nil
	}); st.Kept != 0 || st.Left != 6 || e.p.ResidentStats().Kept != 0 {
		t.Errorf("prewarm of no wanted tier: %+v, %d kept", st, e.p.ResidentStats().Kept)
	}
	refused := errors.New("registration refused")
	calls := 0
	st := e.p.Prewarm(context.Background(), func(int) bool { return true }, func(*catalog.Entry, *Resident) error {
		calls++
		if calls == 3 {
			return refused
		}
		return nil
	})
	if calls != 3 || st.Kept != 2 || !errors.Is(st.Stopped, refused) || st.Left != 4 {
		t.Errorf("prewarm whose third attach fails: %+v after %d attaches, want 2 kept, 4 left, stopped by the refusal", st, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if st := e.p.Prewarm(ctx, func(int) bool { return true }, func(*catalog.Entry, *Resident) error { return nil }); st.Kept != 0 || !errors.Is(st.Stopped, context.Canceled) {
		t.Errorf("a cancelled prewarm: %+v", st)
	}
}
