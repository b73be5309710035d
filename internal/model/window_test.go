package model_test

import (
	"testing"

	"github.com/epochfs/epochfs/internal/model"
	"github.com/epochfs/epochfs/internal/sampler"
)

// The derived sharing window holds every job's batches in flight: the one
// being read and the sampler's lookahead.
func TestDerivedShareWindowHoldsEveryJobsBatchesInFlight(t *testing.T) {
	if model.InFlightBatches != sampler.DefaultLookahead+1 {
		t.Fatalf("InFlightBatches = %d, the sampler has %d in flight (lookahead %d + the batch being read)",
			model.InFlightBatches, sampler.DefaultLookahead+1, sampler.DefaultLookahead)
	}
	f := func(v float64) *float64 { return &v }
	jobs, batch := 3, 64
	m := model.Settings{
		MemoryBudget: f(1 << 30), DatasetSamples: f(1800), SampleBytes: f(110e3),
		TGPU: f(5000), TDecodeAugment: f(1000), TAugment: f(4000),
		BCache: f(5e9), BStorage: f(2e9), Jobs: &jobs, BatchSize: &batch,
	}
	_, p, _, err := model.Resolve(m, model.Observed{Memory: model.Measured{Value: 24 << 30, OK: true}})
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(jobs * 3 * batch); p.Window != want {
		t.Errorf("W = %v, want %v (jobs × 3 batches × batch_size)", p.Window, want)
	}
	w := 100.0
	m.ShareWindow = &w
	if _, p, _, err = model.Resolve(m, model.Observed{Memory: model.Measured{Value: 24 << 30, OK: true}}); err != nil {
		t.Fatal(err)
	}
	if p.Window != w {
		t.Errorf("share_window = %v in the config: W = %v", w, p.Window)
	}
}
