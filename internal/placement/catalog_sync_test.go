package placement

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/tier"
)

// A copy is recorded only once its tier made it durable: while the tier's
// syncfs fails, placed copies are served but not recorded (the catalog
// keeps them pending); once it works, they are.
func TestCopiesAreNotRecordedUntilTheirTierSynced(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	syncfs := func(dir string) error {
		if failing.Load() {
			return errors.New("syncfs: input/output error")
		}
		return nil
	}
	d := smallDataset(6, 4000)
	e := newEnv(t, d, []tier.Options{{Name: "t0", Quota: 1 << 30, Syncfs: syncfs}}, Options{})
	e.readAllFiles()
	waitFor(t, "every file placed", func() bool { return e.tiers[0].Files() == int64(len(d)) })
	waitFor(t, "the catalog degraded", func() bool { s, _ := e.cat.Health(); return s == catalog.HealthDegraded })
	for _, p := range d.Paths() {
		if got := storedTier(t, e.cat, p); got != "" {
			t.Errorf("%s recorded in tier %q before its tier synced", p, got)
		}
	}
	failing.Store(false)
	waitFor(t, "the catalog written", func() bool { s, n := e.cat.Health(); return s == catalog.HealthOK && n == 0 }) // the catch-up's next try
	for _, p := range d.Paths() {
		if got := storedTier(t, e.cat, p); got != "t0" {
			t.Errorf("%s recorded in tier %q after its tier synced, want t0", p, got)
		}
	}
}
