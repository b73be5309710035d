package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"runtime"
	"sort"
	"syscall"

	"github.com/epochfs/epochfs/internal/config"
	"github.com/epochfs/epochfs/internal/model"
	"github.com/epochfs/epochfs/internal/model/profile"
	"github.com/epochfs/epochfs/internal/preprocess"
)

func runModel(args []string, stdout, stderr io.Writer) error {
	f := newFlagSet("model", "model [--config FILE] [--profile] [--json]", stderr)
	cfgPath := f.String("config", "", "TOML config file with a [model] section")
	doProfile := f.Bool("profile", false, "measure this node (source storage, tiers, cores, memory, dataset) before deciding")
	asJSON := f.Bool("json", false, "print one JSON object")
	pos, err := parseFlags(f, args)
	if err != nil {
		return err
	}
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
			pl, err := preprocess.New(pipelineOptions(cfg.Preprocess))
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
	d, rep, err := model.DecideSettings(modelSettings(cfg.Model), observed(cfg, prof, memory), warnings)
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
	printModel(stdout, rep, d, cores, memory, prof)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "epochfs model: warning: %s\n", w)
	}
	return nil
}

// modelSettings is the [model] section as the model's plain settings.
func modelSettings(m config.Model) model.Settings {
	size := func(v config.Size) *float64 {
		if v.Raw == "" {
			return nil
		}
		f := float64(v.Bytes)
		return &f
	}
	rate := func(v config.Rate) *float64 {
		if v.Raw == "" {
			return nil
		}
		f := v.BytesPerSec
		return &f
	}
	return model.Settings{
		MemoryBudget: size(m.MemoryBudget), MemoryBudgetText: m.MemoryBudget.Raw,
		Inflation: m.Inflation, SampleBytes: size(m.SampleBytes), DatasetSamples: m.DatasetSamples,
		Nodes: m.Nodes, TGPU: m.TGPU, TDecodeAugment: m.TDecodeAugment, TAugment: m.TAugment,
		BPCIe: rate(m.BPCIe), BNIC: rate(m.BNIC), BCache: rate(m.BCache), BStorage: rate(m.BStorage),
		CPCIe: size(m.CPCIe), CNw: size(m.CNw), GPUsPerNode: m.GPUsPerNode, ModelBytes: size(m.ModelBytes),
		NVLink: m.NVLink.Mode, BatchSize: m.BatchSize, BNVMe: rate(m.BNVMe), SNVMe: size(m.SNVMe),
		Remote: m.Cache == "remote", Split: m.Split,
		Rules: m.Rules, Jobs: m.Jobs, DecodedBytes: size(m.DecodedBytes), AugmentedBytes: size(m.AugmentedBytes),
		ShareWindow: m.ShareWindow, IngestOnCPU: m.IngestOnCPU,
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

func printModel(w io.Writer, r model.Report, d model.Decision, cores, memory profile.Measurement, prof *profile.Report) {
	if d.Params.Views {
		fmt.Fprintf(w, "DSI model (epochfs's views rules: Seneca §5 with augmented tensors never reused): %s cache, %d node(s), %d job(s)\n", r.Cache, d.Params.Nodes, max(d.Params.Jobs, 1))
	} else {
		fmt.Fprintf(w, "DSI model (Seneca §5.1 with the epochfs tier extension): %s cache, %d node(s)\n", r.Cache, d.Params.Nodes)
	}
	if cores.OK || memory.OK {
		fmt.Fprintf(w, "this node: %.0f cores, %s memory\n", cores.Value, config.FormatBytes(int64(memory.Value)))
	}
	fmt.Fprintf(w, "\ninputs\n  %-17s %-9s %-16s %s\n", "KEY", "SYMBOL", "VALUE", "SOURCE")
	for _, k := range r.InputOrder() {
		in := r.Inputs[k]
		fmt.Fprintf(w, "  %-17s %-9s %-16s %s\n", k, in.Symbol, fmtValue(in), in.Source)
	}
	if prof != nil {
		fmt.Fprintf(w, "\nmeasured (not all used: configured values win)\n")
		line := func(name string, m profile.Measurement, unit string) {
			v := "-"
			if m.OK {
				v = fmtUnit(m.Value, unit)
			}
			fmt.Fprintf(w, "  %-26s %-14s %s\n", name, v, m.How)
		}
		line("storage, directory order", prof.StorageSequential, "bytes/s")
		line("storage, random order", prof.StorageRandom, "bytes/s")
		for _, t := range prof.Tiers {
			kind := "disk"
			if t.Memory {
				kind = "RAM"
			}
			line(fmt.Sprintf("tier %s (%s)", t.Name, kind), t.Read, "bytes/s")
		}
		line("dataset samples", prof.Samples, "samples")
		line("mean sample size", prof.SampleBytes, "bytes")
		line("T_D+A", prof.DecodeAugment, "samples/s")
		line("T_A", prof.Augment, "samples/s")
		line("decoded sample", prof.DecodedBytes, "bytes")
		line("augmented sample", prof.AugmentedBytes, "bytes")
	}
	if v := r.Views; v != nil {
		fmt.Fprintf(w, "\nresources (all jobs) SAMPLES/S\n")
		names := make([]string, 0, len(v.Resources))
		for k := range v.Resources {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Fprintf(w, "  %-17s %s\n", k, fmtRate(v.Resources[k]))
		}
		fmt.Fprintf(w, "  bound by %s; %.0f%% of augmentations shared, %.2f made per sample and epoch\n", v.Bound, 100*v.Shared, v.ProductionsPerSample)
	} else {
		fmt.Fprintf(w, "\npaths (whole job)   %-12s %-20s %s\n", "SAMPLES/S", "BOUND BY", "SAMPLES SERVED")
		for _, name := range model.PathOrder {
			p := r.Paths[name]
			fmt.Fprintf(w, "  %-17s %-12s %-20s %.0f\n", name, fmtRate(p.Rate), p.Bound, p.Samples)
		}
	}
	fmt.Fprintf(w, "\nsplit of memory_budget (encoded-decoded-augmented %%)   predicted samples/s\n")
	best := "best (exact solver)"
	if d.Params.Views {
		best = "best (grid search)"
	}
	label := best
	if r.Forced {
		label = "forced (model.split)"
	}
	row := func(name string, s model.SplitReport) {
		fmt.Fprintf(w, "  %-22s %-31s %s\n", name, fmt.Sprintf("%g-%g-%g", s.EncodedPct, s.DecodedPct, s.AugmentedPct), fmtRate(s.Predicted))
	}
	row(label, r.SplitReport)
	if r.Forced {
		row(best, r.Optimum)
	}
	row("all encoded", r.Single["encoded"])
	row("all decoded", r.Single["decoded"])
	row("all augmented", r.Single["augmented"])
	fmt.Fprintf(w, "\nwhy\n")
	for _, line := range r.Why {
		fmt.Fprintf(w, "  %s\n", line)
	}
}

func fmtRate(p *float64) string {
	if p == nil {
		return "unbounded"
	}
	return fmt.Sprintf("%.0f", *p)
}

func fmtValue(in model.Input) string {
	if in.Value == nil {
		return "unbounded"
	}
	return fmtUnit(*in.Value, in.Unit)
}

func fmtUnit(v float64, unit string) string {
	switch unit {
	case "bytes":
		if v < 1024 {
			return fmt.Sprintf("%.0fB", v)
		}
		return config.FormatBytes(int64(v))
	case "bytes/s":
		switch {
		case v >= 1e9:
			return fmt.Sprintf("%.2fGB/s", v/1e9)
		case v >= 1e6:
			return fmt.Sprintf("%.1fMB/s", v/1e6)
		default:
			return fmt.Sprintf("%.0fB/s", v)
		}
	case "×":
		return fmt.Sprintf("%.3g", v)
	case "samples", "nodes":
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.6g", v)
	}
}
