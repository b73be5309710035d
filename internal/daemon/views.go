package daemon

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/epochfs/epochfs/internal/model/split"
	"github.com/epochfs/epochfs/internal/preprocess"
	"github.com/epochfs/epochfs/internal/views"
)

// startViews builds the preprocessing engine and the default view.
func (m *Mount) startViews(vo *views.Config, dec, aug int64) error {
	cat := m.cat
	eng, err := preprocess.NewEngine(preprocess.EngineOptions{
		// Method values: the engine's pool calls placement directly.
		Load:         m.p.ReadSample,
		Name:         cat.SampleName,
		DecodedBytes: dec, AugmentedBytes: aug, Seed: vo.Seed,
		Pool: preprocess.PoolOptions{Workers: vo.Workers},
	})
	if err != nil {
		return &configError{fmt.Errorf("daemon: views: %w", err)}
	}
	m.engine = eng
	m.steps = append(m.steps, step{what: "the preprocessing engine", close: eng.Close})
	v, err := eng.View(vo.Pipeline)
	if err != nil {
		return &configError{fmt.Errorf("daemon: views: [preprocess]: %w", err)}
	}
	m.view = v
	m.log.Info("views on", zap.Int64("decoded_cache_bytes", dec), zap.Int64("augmented_cache_bytes", aug),
		zap.String("pipeline", v.Key()))
	return nil
}

// MemoryBudget is the bytes the daemon's own memory may hold by its
// budgets: the views' decoded and augmented caches and the shared buffer
// (RAM tiers are tmpfs, outside the process).
func (m *Mount) MemoryBudget() int64 {
	b := m.o.Placement.BufferBytes
	if m.engine != nil {
		st := m.engine.Stats()
		b += st.DecodedBudget + st.AugmentedBudget
	}
	return b
}

// splitViews is what the memory split needs of the views config (nil: the
// mount serves no views).
func splitViews(c *views.Config) *split.Views {
	if c == nil {
		return nil
	}
	return &split.Views{Pipeline: c.Pipeline, Workers: c.Workers, DecodedBytes: c.DecodedBytes,
		AugmentedBytes: c.AugmentedBytes, DefaultDecoded: c.DefaultDecoded, DefaultAugmented: c.DefaultAugmented}
}
