package split

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/epochfs/epochfs/internal/tier"
)

// Without model.memory_budget nothing is decided: a tier whose quota is
// the model's is refused with the reason, explicit quotas and budgets are
// applied as configured, the defaults fill the rest, and .epochfs/model
// says which is which.
func TestWithoutABudgetTheConfigAppliesAndAModelQuotaIsRefused(t *testing.T) {
	ms := Decide(context.Background(), Options{})
	_, err := ms.TierQuotas([]tier.Options{{Name: "ram", Quota: 0}})
	if !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), `tier "ram": quota = "model"`) ||
		!strings.Contains(err.Error(), "model.memory_budget is not set") {
		t.Fatalf("a model quota without a budget: %v; want ErrModel naming the tier and the reason", err)
	}
	in := []tier.Options{{Name: "ram", Quota: 5 << 20}, {Name: "nvme", Quota: 7 << 30}}
	out, err := ms.TierQuotas(in)
	if err != nil || len(out) != 2 || out[0].Quota != 5<<20 || out[1].Quota != 7<<30 {
		t.Fatalf("configured quotas: %+v, %v; want them unchanged", out, err)
	}
	dec, aug := ms.CacheBudgets(&Views{DecodedBytes: -1, AugmentedBytes: 7, DefaultDecoded: 3, DefaultAugmented: 4})
	if dec != 3 || aug != 7 {
		t.Fatalf("cache budgets %d, %d; want the default 3 and the configured 7", dec, aug)
	}
	text := string(ms.Text())
	for _, want := range []string{
		"error=model.memory_budget: not set",
		"applied.decoded_cache_bytes=3\napplied.decoded_cache_bytes.source=default\n",
		"applied.augmented_cache_bytes=7\napplied.augmented_cache_bytes.source=config\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf(".epochfs/model lacks %q:\n%s", want, text)
		}
	}
}
