package daemon

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/epochfs/epochfs/model"
	"github.com/epochfs/epochfs/model/profile"
	"github.com/epochfs/epochfs/preprocess"
	"github.com/epochfs/epochfs/tier"
)

// The memory of a mount is split three ways (Seneca's MDP): the RAM tier
// holds encoded samples, the views' decoded and augmented caches hold the
// other two forms. With model.memory_budget set, the DSI model decides the
// split from the catalog's counts and the config (no profiling at mount
// time); a tier whose quota is "model" (Options.Tiers[i].Quota == 0) takes
// the encoded share, and caches without budgets of their own take theirs.
// Explicit quotas and budgets win, and .epochfs/model reports them as
// overrides beside the split the model chose.

// ViewsOptions configure the preprocessed views (.epochfs/views/ and the
// jobs' views).
type ViewsOptions struct {
	Pipeline preprocess.Options // the mount's default pipeline ([preprocess])
	Seed     uint64             // generation 0 of every augmentation
	Workers  int                // preprocessing workers (0: one per core)
	// DecodedBytes and AugmentedBytes are the caches' budgets; negative:
	// the model's share, or DefaultDecoded/DefaultAugmented without one.
	DecodedBytes, AugmentedBytes int64
	DefaultDecoded               int64
	DefaultAugmented             int64
	// MaxBatchBytes bounds one batch (jobs default if 0).
	MaxBatchBytes int64
}

// memorySplit is what the mount applies.
type memorySplit struct {
	report    *model.Report // nil without a model decision
	err       error         // why the model could not decide
	encoded   int64         // the model's shares in bytes (with report)
	decoded   int64
	augmented int64
	applied   []string // key=value lines: what is in force and why
}

// decideSplit runs the model over the catalog's counts and the tiers.
func (m *Mount) decideSplit(ctx context.Context) *memorySplit {
	ms := &memorySplit{encoded: -1, decoded: -1, augmented: -1}
	set := m.o.ModelSettings
	if set == nil || set.MemoryBudget == nil {
		return ms
	}
	files, bytes := m.cat.Files(), m.cat.Bytes()
	obs := model.Observed{}
	_, mem := profile.Host(ctx)
	obs.Memory = model.Measured{Value: mem.Value, How: mem.How, OK: mem.OK}
	if files > 0 {
		obs.Samples = &model.Measured{Value: float64(files), How: "catalog: files in the dataset", OK: true}
		obs.SampleBytes = &model.Measured{Value: float64(bytes) / float64(files), How: "catalog: mean file size", OK: true}
	}
	for _, t := range m.o.Tiers {
		memFS, _, _ := profile.IsMemoryFS(t.Dir)
		obs.Tiers = append(obs.Tiers, model.TierObserved{Name: t.Name, Memory: memFS, Quota: t.Quota})
	}
	if set.TDecodeAugment == nil || set.TAugment == nil || set.ViewsRules() && (set.DecodedBytes == nil || set.AugmentedBytes == nil) {
		m.profileViews(ctx, m.o.Views, &obs)
	}
	d, rep, err := model.DecideSettings(*set, obs, nil)
	if err != nil {
		ms.err = err
		return ms
	}
	ms.report = &rep
	s := d.Chosen.Split
	budget := *set.MemoryBudget
	ms.encoded, ms.decoded = int64(s.E*budget), int64(s.D*budget)
	ms.augmented = int64(budget) - ms.encoded - ms.decoded
	return ms
}

// applyTierQuotas gives a tier with quota 0 the model's encoded share.
func (m *Mount) applyTierQuotas(ms *memorySplit, tiers []tier.Options) ([]tier.Options, error) {
	out := append([]tier.Options(nil), tiers...)
	for i, t := range out {
		if t.Quota != 0 {
			if ms.report != nil {
				if memFS, _, _ := profile.IsMemoryFS(t.Dir); memFS {
					ms.applied = append(ms.applied, fmt.Sprintf("applied.tier.%s.quota=%d", t.Name, t.Quota),
						fmt.Sprintf("applied.tier.%s.quota.source=config (overrides the model's encoded share %d)", t.Name, ms.encoded))
				}
			}
			continue
		}
		if ms.report == nil {
			why := "model.memory_budget is not set"
			if ms.err != nil {
				why = ms.err.Error()
			}
			return nil, &configError{fmt.Errorf("daemon: tier %q: quota = \"model\", but the model cannot decide: %s", t.Name, why)}
		}
		q := max(ms.encoded, 1)
		out[i].Quota = q
		ms.applied = append(ms.applied, fmt.Sprintf("applied.tier.%s.quota=%d", t.Name, q),
			fmt.Sprintf("applied.tier.%s.quota.source=model: split_encoded_pct of memory_budget", t.Name))
	}
	return out, nil
}

// cacheBudgets resolves the views' cache budgets.
func (m *Mount) cacheBudgets(ms *memorySplit, vo *ViewsOptions) (dec, aug int64) {
	pick := func(name string, explicit, share, def int64) int64 {
		switch {
		case explicit >= 0:
			src := "config"
			if ms.report != nil {
				src = fmt.Sprintf("config (overrides the model's %d)", share)
			}
			ms.applied = append(ms.applied, fmt.Sprintf("applied.%s_cache_bytes=%d", name, explicit), "applied."+name+"_cache_bytes.source="+src)
			return explicit
		case ms.report != nil:
			ms.applied = append(ms.applied, fmt.Sprintf("applied.%s_cache_bytes=%d", name, share),
				fmt.Sprintf("applied.%s_cache_bytes.source=model: split_%s_pct of memory_budget", name, name))
			return share
		default:
			ms.applied = append(ms.applied, fmt.Sprintf("applied.%s_cache_bytes=%d", name, def), "applied."+name+"_cache_bytes.source=default")
			return def
		}
	}
	return pick("decoded", vo.DecodedBytes, ms.decoded, vo.DefaultDecoded),
		pick("augmented", vo.AugmentedBytes, ms.augmented, vo.DefaultAugmented)
}

// modelText renders .epochfs/model: the model's report (or why it cannot
// decide) and what the mount applied.
func (ms *memorySplit) modelText() []byte {
	var b strings.Builder
	switch {
	case ms.report != nil:
		b.WriteString(ms.report.KeyValues())
	case ms.err != nil:
		b.WriteString("error=" + strings.ReplaceAll(ms.err.Error(), "\n", " ") + "\n")
	default:
		b.WriteString("error=model.memory_budget: not set: the mount applies the configured quotas and cache budgets\n")
	}
	for _, l := range ms.applied {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// startViews builds the preprocessing engine and the default view.
func (m *Mount) startViews(vo *ViewsOptions, dec, aug int64) error {
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
	b := m.o.BufferBytes
	if m.engine != nil {
		st := m.engine.Stats()
		b += st.DecodedBudget + st.AugmentedBudget
	}
	return b
}
