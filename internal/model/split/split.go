// Package split decides the mount's memory split with the DSI model and
// applies it: the RAM tier's quota and the views' cache budgets.
package split

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/epochfs/epochfs/internal/model"
	"github.com/epochfs/epochfs/internal/model/profile"
	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/preprocess"
	"github.com/epochfs/epochfs/internal/source"
	"github.com/epochfs/epochfs/internal/tier"
)

// The memory of a mount is split three ways (Seneca's MDP): the RAM tier
// holds encoded samples, the views' decoded and augmented caches hold the
// other two forms. With model.memory_budget set, the DSI model decides the
// split from the catalog's counts and the config (no profiling at mount
// time); a tier whose quota is "model" (Options.Tiers[i].Quota == 0) takes
// the encoded share, and caches without budgets of their own take theirs.
// Explicit quotas and budgets win, and .epochfs/model reports them as
// overrides beside the split the model chose.

// Split is the memory split the mount applies (.epochfs/model renders it:
// Text).
type Split struct {
	report    *model.Report // nil without a model decision
	err       error         // why the model could not decide
	encoded   int64         // the model's shares in bytes (with report)
	decoded   int64
	augmented int64
	applied   []string // key=value lines: what is in force and why
}

// Options are what Decide needs of the mount.
type Options struct {
	Settings *model.Settings // the [model] section; no memory budget: no split
	Catalog  *catalog.Catalog
	Source   *source.Source // read for the pipeline's profile
	Tiers    []tier.Options
	Views    *Views // nil: the mount serves no views
	Logger   *zap.Logger
}

// Views is what the split needs of the mount's views: the pipeline it
// profiles, and the caches' budgets.
type Views struct {
	Pipeline preprocess.Options // the mount's default pipeline ([preprocess])
	Workers  int                // preprocessing workers (0: one per core)
	// DecodedBytes and AugmentedBytes are the caches' budgets; negative:
	// the model's share, or DefaultDecoded/DefaultAugmented without one.
	DecodedBytes, AugmentedBytes int64
	DefaultDecoded               int64
	DefaultAugmented             int64
}

// Decide runs the model over the catalog's counts and the tiers.
func Decide(ctx context.Context, o Options) *Split {
	ms := &Split{encoded: -1, decoded: -1, augmented: -1}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	set := o.Settings
	if set == nil || set.MemoryBudget == nil {
		return ms
	}
	files, bytes := o.Catalog.Files(), o.Catalog.Bytes()
	obs := model.Observed{}
	_, mem := profile.Host(ctx)
	obs.Memory = model.Measured{Value: mem.Value, How: mem.How, OK: mem.OK}
	if files > 0 {
		obs.Samples = &model.Measured{Value: float64(files), How: "catalog: files in the dataset", OK: true}
		obs.SampleBytes = &model.Measured{Value: float64(bytes) / float64(files), How: "catalog: mean file size", OK: true}
	}
	for _, t := range o.Tiers {
		memFS, _, _ := profile.IsMemoryFS(t.Dir)
		obs.Tiers = append(obs.Tiers, model.TierObserved{Name: t.Name, Memory: memFS, Quota: t.Quota})
	}
	if set.TDecodeAugment == nil || set.TAugment == nil || set.ViewsRules() && (set.DecodedBytes == nil || set.AugmentedBytes == nil) {
		profileViews(ctx, o, &obs)
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

// ErrModel: a tier's quota is the model's, and the model cannot decide.
var ErrModel = errors.New("the model cannot decide")

// TierQuotas gives a tier with quota 0 the model's encoded share.
func (ms *Split) TierQuotas(tiers []tier.Options) ([]tier.Options, error) {
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
			return nil, fmt.Errorf("tier %q: quota = \"model\", but %w: %s", t.Name, ErrModel, why)
		}
		q := max(ms.encoded, 1)
		out[i].Quota = q
		ms.applied = append(ms.applied, fmt.Sprintf("applied.tier.%s.quota=%d", t.Name, q),
			fmt.Sprintf("applied.tier.%s.quota.source=model: split_encoded_pct of memory_budget", t.Name))
	}
	return out, nil
}

// CacheBudgets resolves the views' cache budgets.
func (ms *Split) CacheBudgets(vo *Views) (dec, aug int64) {
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

// Text renders .epochfs/model: the model's report (or why it cannot
// decide) and what the mount applied.
func (ms *Split) Text() []byte {
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
