package placement

import (
	"testing"

	"github.com/epochfs/epochfs/internal/tier"
)

// TestBufferSlotsAreThreeQuartersOfTheBudgetInMeanFiles: the sampler counts
// ¾ of the budget, in files of the catalog's mean size, at most every file;
func TestBufferSlotsAreThreeQuartersOfTheBudgetInMeanFiles(t *testing.T) {
	data := bufferDataset(20) // 100 000 B each
	for _, c := range []struct {
		budget int64
		want   int
	}{{0, 0}, {400_000, 3}, {1_000_000, 7}, {10 << 20, 20}} {
		e := newEnv(t, data, []tier.Options{{Name: "mem", Quota: 1}}, Options{BufferBytes: c.budget})
		if got := e.p.Buffer().Slots(); got != c.want {
			t.Errorf("budget %d: %d slots, want %d", c.budget, got, c.want)
		}
	}
}
