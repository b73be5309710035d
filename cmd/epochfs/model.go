package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/epochfs/epochfs/internal/config"
	"github.com/epochfs/epochfs/internal/daemon"
	"github.com/epochfs/epochfs/internal/model"
	"github.com/epochfs/epochfs/internal/model/profile"
	"github.com/epochfs/epochfs/internal/preprocess"
)

const modelSynopsis = "model [--config FILE] [--profile] [--json]"

func modelFlags(f *pflag.FlagSet) runFunc {
	cfgPath := f.String("config", "", "TOML config file with a [model] section")
	doProfile := f.Bool("profile", false, "measure this node (source storage, tiers, cores, memory, dataset) before deciding")
	asJSON := f.Bool("json", false, "print one JSON object")
	return func(pos []string, stdout, stderr io.Writer) error {
		var err error
		if len(pos) != 0 {
			return usageErr("unexpected argument %q", pos[0])
		}
		cfg := config.Default()
		if *cfgPath != "" {
			if cfg, err = config.Load(*cfgPath); err != nil {
				return usageErr("%v", err)
			}
		}
		if err := cfg.Validate(); err != nil {
			return usageErr("%v", err)
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()

		var prof *profile.Report
		var warnings []string
		if *doProfile {
			opts := profile.Options{Source: cfg.Source, Seed: 1}
			for _, t := range cfg.Tiers {
				opts.Tiers = append(opts.Tiers, profile.Tier{Name: t.Name, Path: t.Path})
			}
			if cfg.Source != "" {
				pl, err := preprocess.New(daemon.PipelineOptions(cfg.Preprocess))
				if err != nil {
					return usageErr("preprocess pipeline for the profile: %v", err)
				}
				defer pl.Close()
				opts.Pipeline, opts.Workers = preprocess.NewProfiler(pl), cfg.Preprocess.Workers
				if opts.Workers <= 0 {
					opts.Workers = runtime.NumCPU()
				}
			}
			m := cfg.Model
			if m.SampleBytes.Raw != "" && m.DatasetSamples != nil {
				opts.WalkLimit = 20000 // only to pick sample files
			}
			fmt.Fprintf(stderr, "epochfs model: profiling this node (source %q, %d tiers)…\n", cfg.Source, len(cfg.Tiers))
			rep, err := profile.Run(ctx, opts)
			if ctx.Err() != nil {
				return runtimeErr("interrupted")
			}
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("profile: %v", err))
			}
			prof = &rep
		}
		cores, memory := profile.Host(ctx)
		d, rep, err := model.DecideSettings(daemon.ModelSettings(cfg.Model), observed(cfg, prof, memory), warnings)
		if err != nil {
			return usageErr("%v", err)
		}
		warnings = rep.Warnings
		if *asJSON {
			out := struct {
				model.Report
				Host    map[string]profile.Measurement `json:"host"`
				Profile *profile.Report                `json:"profile,omitempty"`
			}{rep, map[string]profile.Measurement{"cores": cores, "memory_bytes": memory}, prof}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(out); err != nil {
				return runtimeErr("%v", err)
			}
			return nil
		}
		model.WriteText(stdout, rep, d, cores, memory, prof, config.FormatBytes)
		for _, w := range warnings {
			fmt.Fprintf(stderr, "epochfs model: warning: %s\n", w)
		}
		return nil
	}
}

// observed is what the profile (nil: none) and the config tell of the node.
func observed(cfg config.Config, prof *profile.Report, memory profile.Measurement) model.Observed {
	conv := func(m profile.Measurement) *model.Measured {
		return &model.Measured{Value: m.Value, How: m.How, OK: m.OK}
	}
	obs := model.Observed{Memory: *conv(memory)}
	if prof != nil {
		obs.Samples, obs.SampleBytes, obs.StorageRandom = conv(prof.Samples), conv(prof.SampleBytes), conv(prof.StorageRandom)
		obs.DecodeAugment, obs.Augment = conv(prof.DecodeAugment), conv(prof.Augment)
		obs.DecodedBytes, obs.AugmentedBytes = conv(prof.DecodedBytes), conv(prof.AugmentedBytes)
	}
	for i, t := range cfg.Tiers {
		to := model.TierObserved{Name: t.Name, Quota: t.Quota.Bytes}
		if prof != nil && i < len(prof.Tiers) {
			to.Memory, to.Read = prof.Tiers[i].Memory, *conv(prof.Tiers[i].Read)
		} else {
			to.Memory, _, _ = profile.IsMemoryFS(t.Path)
		}
		obs.Tiers = append(obs.Tiers, to)
	}
	return obs
}
