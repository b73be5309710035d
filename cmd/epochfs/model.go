package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os/signal"
	"strings"
	"syscall"

	"github.com/epochfs/epochfs/config"
	"github.com/epochfs/epochfs/model"
	"github.com/epochfs/epochfs/model/profile"
)

// tensorBytes is the preprocessed sample inflation is derived from when
// [model] inflation is not set: one 224×224×3 float32 tensor, the usual
// output of RandomResizedCrop(224) + ToTensor (Seneca's M = 5.12 for
// ImageNet's 114.62 KiB mean is this size to 0.2 %).
const tensorBytes = 224 * 224 * 3 * 4

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
			pp, workers, err := newProfilePipeline(cfg.Preprocess)
			if err != nil {
				return usageErr("%v", err)
			}
			defer pp.Close()
			opts.Pipeline, opts.Workers = pp, workers
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
	inputs, params, more, err := resolveInputs(cfg, prof, memory)
	if err != nil {
		return err
	}
	warnings = append(warnings, more...)
	forced, err := cfg.Model.ParsedSplit()
	if err != nil {
		return usageErr("%v", err)
	}
	d, err := model.Decide(params, forced)
	if err != nil {
		return usageErr("%v", err)
	}
	rep := model.NewReport(d, inputs, warnings)
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

// resolveInputs turns the [model] section and the profile into the model's
// parameters. Configured values win over measured ones; a value neither
// configured nor measured is derived, defaulted or unbounded, or is an error
// naming its key.
func resolveInputs(cfg config.Config, prof *profile.Report, memory profile.Measurement) ([]model.Input, model.Params, []string, error) {
	m := cfg.Model
	var ins []model.Input
	var warnings []string
	add := func(key, symbol, unit string, v float64, source string) float64 {
		ins = append(ins, model.Input{Key: key, Symbol: symbol, Unit: unit, Value: model.Num(v), Source: source})
		return v
	}
	missing := func(key, what string) error {
		return usageErr("model.%s: not set and not measured: set it in [model]%s", key, what)
	}
	measuredOr := func(key, symbol, unit string, cfgSet bool, cfgV float64, meas *profile.Measurement, what string) (float64, error) {
		switch {
		case cfgSet:
			return add(key, symbol, unit, cfgV, "config"), nil
		case meas != nil && meas.OK:
			return add(key, symbol, unit, meas.Value, "measured: "+meas.How), nil
		case meas != nil:
			return 0, missing(key, what+" ("+meas.How+")")
		default:
			return 0, missing(key, what)
		}
	}
	var p model.Params
	p.CacheRemote = m.Cache == "remote"

	// S_cache.
	if m.MemoryBudget.Raw == "" {
		return nil, p, nil, usageErr("model.memory_budget: missing: the RAM to split between encoded, decoded and augmented samples, e.g. memory_budget = \"64GiB\"")
	}
	p.SCache = add("memory_budget", "S_cache", "bytes", float64(m.MemoryBudget.Bytes), "config")
	if memory.OK && !p.CacheRemote && p.SCache > memory.Value {
		warnings = append(warnings, fmt.Sprintf("model.memory_budget = %s is larger than this node's physical memory (%s)", m.MemoryBudget.Raw, config.FormatBytes(int64(memory.Value))))
	}

	pick := func(get func(*profile.Report) *profile.Measurement) *profile.Measurement {
		if prof == nil {
			return nil
		}
		return get(prof)
	}
	srcHint := " (or give source and run with --profile)"
	var err error
	if p.SData, err = measuredOr("sample_bytes", "S_data", "bytes", m.SampleBytes.Raw != "", float64(m.SampleBytes.Bytes),
		pick(func(r *profile.Report) *profile.Measurement { return &r.SampleBytes }), srcHint); err != nil {
		return nil, p, nil, err
	}
	var nCfg float64
	if m.DatasetSamples != nil {
		nCfg = *m.DatasetSamples
	}
	if p.NTotal, err = measuredOr("dataset_samples", "N_total", "samples", m.DatasetSamples != nil, nCfg,
		pick(func(r *profile.Report) *profile.Measurement { return &r.Samples }), srcHint); err != nil {
		return nil, p, nil, err
	}
	if m.Inflation != nil {
		p.M = add("inflation", "M", "×", *m.Inflation, "config")
	} else {
		p.M = add("inflation", "M", "×", tensorBytes/p.SData, fmt.Sprintf("derived: a 224×224×3 float32 tensor (%d B) / S_data", tensorBytes))
	}
	p.Nodes = 1
	if m.Nodes != nil {
		p.Nodes = *m.Nodes
		add("nodes", "n", "nodes", float64(p.Nodes), "config")
	} else {
		add("nodes", "n", "nodes", 1, "default")
	}

	// Throughputs, samples/s per node.
	if m.TGPU != nil {
		p.TGPU = add("t_gpu", "T_GPU", "samples/s", *m.TGPU, "config")
	} else {
		p.TGPU = add("t_gpu", "T_GPU", "samples/s", model.Unbounded, "unbounded: not set")
	}
	cpuHint := " (or profile it: --profile with source set to a JPEG/PNG dataset)"
	var tda, ta float64
	if m.TDecodeAugment != nil {
		tda = *m.TDecodeAugment
	}
	if m.TAugment != nil {
		ta = *m.TAugment
	}
	if p.TDA, err = measuredOr("t_decode_augment", "T_D+A", "samples/s", m.TDecodeAugment != nil, tda,
		pick(func(r *profile.Report) *profile.Measurement { return &r.DecodeAugment }), cpuHint); err != nil {
		return nil, p, nil, err
	}
	if p.TA, err = measuredOr("t_augment", "T_A", "samples/s", m.TAugment != nil, ta,
		pick(func(r *profile.Report) *profile.Measurement { return &r.Augment }), cpuHint); err != nil {
		return nil, p, nil, err
	}

	// Bandwidths, bytes/s.
	rateOr := func(key, symbol string, r config.Rate, why string) float64 {
		if r.Raw != "" {
			return add(key, symbol, "bytes/s", r.BytesPerSec, "config")
		}
		return add(key, symbol, "bytes/s", model.Unbounded, "unbounded: "+why)
	}
	p.BPCIe = rateOr("b_pcie", "B_PCIe", m.BPCIe, "not set")
	p.BNIC = rateOr("b_nic", "B_NIC", m.BNIC, "not set")

	// The tiers: which are RAM and which are disk (NVMe/SSD).
	var memTier, diskTier *profile.TierReport
	var diskQuota int64
	var diskNames []string
	for i, t := range cfg.Tiers {
		var tr profile.TierReport
		if prof != nil && i < len(prof.Tiers) {
			tr = prof.Tiers[i]
		} else {
			memFS, _, _ := profile.IsMemoryFS(t.Path)
			tr = profile.TierReport{Name: t.Name, Path: t.Path, Memory: memFS}
		}
		if tr.Memory {
			if memTier == nil {
				memTier = &tr
			}
			continue
		}
		if diskTier == nil {
			diskTier = &tr
		}
		diskQuota += t.Quota.Bytes
		diskNames = append(diskNames, t.Name)
	}

	switch {
	case m.BCache.Raw != "":
		p.BCache = add("b_cache", "B_cache", "bytes/s", m.BCache.BytesPerSec, "config")
	case !p.CacheRemote && memTier != nil && memTier.Read.OK:
		p.BCache = add("b_cache", "B_cache", "bytes/s", memTier.Read.Value, fmt.Sprintf("measured: RAM tier %q: %s", memTier.Name, memTier.Read.How))
	default:
		p.BCache = add("b_cache", "B_cache", "bytes/s", model.Unbounded, "unbounded: not set")
	}

	var bst float64
	if m.BStorage.Raw != "" {
		bst = m.BStorage.BytesPerSec
	}
	if p.BStorage, err = measuredOr("b_storage", "B_storage", "bytes/s", m.BStorage.Raw != "", bst,
		pick(func(r *profile.Report) *profile.Measurement { return &r.StorageRandom }), srcHint); err != nil {
		return nil, p, nil, err
	}

	// Gradient overheads.
	batch := 1
	if m.BatchSize != nil {
		batch = *m.BatchSize
	}
	perSample := ""
	if batch > 1 {
		perSample = fmt.Sprintf(" / batch_size %d", batch)
	}
	switch {
	case m.CPCIe.Raw != "":
		p.CPCIe = add("c_pcie", "C_PCIe", "bytes", float64(m.CPCIe.Bytes), "config")
	case m.NVLink.Mode == "intra" || m.NVLink.Mode == "inter":
		p.CPCIe = add("c_pcie", "C_PCIe", "bytes", 0, "derived: NVLink within the node")
	case m.GPUsPerNode != nil && m.ModelBytes.Raw != "":
		p.CPCIe = add("c_pcie", "C_PCIe", "bytes", model.RingAllReduceBytes(*m.GPUsPerNode, float64(m.ModelBytes.Bytes))/float64(batch),
			fmt.Sprintf("derived: 2(g−1)/g × model_bytes, g = gpus_per_node %d%s", *m.GPUsPerNode, perSample))
	default:
		p.CPCIe = add("c_pcie", "C_PCIe", "bytes", 0, "default: no gradient traffic on PCIe (set c_pcie, or gpus_per_node and model_bytes)")
	}
	switch {
	case m.CNw.Raw != "":
		p.CNw = add("c_nw", "C_nw", "bytes", float64(m.CNw.Bytes), "config")
	case m.NVLink.Mode == "inter":
		p.CNw = add("c_nw", "C_nw", "bytes", 0, "derived: NVLink between nodes")
	case m.ModelBytes.Raw != "":
		p.CNw = add("c_nw", "C_nw", "bytes", model.RingAllReduceBytes(p.Nodes, float64(m.ModelBytes.Bytes))/float64(batch),
			fmt.Sprintf("derived: 2(n−1)/n × model_bytes, n = nodes %d%s", p.Nodes, perSample))
	default:
		p.CNw = add("c_nw", "C_nw", "bytes", 0, "default: no gradient traffic on the network (set c_nw, or model_bytes)")
	}

	// The NVMe tier.
	switch {
	case m.SNVMe.Raw != "":
		p.SNVMe = add("s_nvme", "S_nvme", "bytes", float64(m.SNVMe.Bytes), "config")
	case diskQuota > 0:
		p.SNVMe = add("s_nvme", "S_nvme", "bytes", float64(diskQuota), fmt.Sprintf("derived: quota of disk tier(s) %s", strings.Join(diskNames, ", ")))
	default:
		p.SNVMe = add("s_nvme", "S_nvme", "bytes", 0, "default: no disk tier")
	}
	switch {
	case m.BNVMe.Raw != "":
		p.BNVMe = add("b_nvme", "B_nvme", "bytes/s", m.BNVMe.BytesPerSec, "config")
	case diskTier != nil && diskTier.Read.OK:
		p.BNVMe = add("b_nvme", "B_nvme", "bytes/s", diskTier.Read.Value, fmt.Sprintf("measured: tier %q: %s", diskTier.Name, diskTier.Read.How))
	case p.SNVMe > 0:
		p.BNVMe = add("b_nvme", "B_nvme", "bytes/s", model.Unbounded, "unbounded: not set (run with --profile to measure the disk tier)")
	default:
		p.BNVMe = add("b_nvme", "B_nvme", "bytes/s", model.Unbounded, "unbounded: no disk tier")
	}

	// A path with no finite bound makes the optimum infinite.
	if math.IsInf(p.TGPU, 1) && math.IsInf(p.BPCIe, 1) && math.IsInf(p.BCache, 1) && (!p.CacheRemote || math.IsInf(p.BNIC, 1)) {
		return nil, p, nil, usageErr("model: nothing bounds the augmented path: set t_gpu, b_pcie or b_cache")
	}
	return ins, p, warnings, nil
}

func printModel(w io.Writer, r model.Report, d model.Decision, cores, memory profile.Measurement, prof *profile.Report) {
	fmt.Fprintf(w, "DSI model (Seneca §5.1 with the epochfs tier extension): %s cache, %d node(s)\n", r.Cache, d.Params.Nodes)
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
	}
	fmt.Fprintf(w, "\npaths (whole job)   %-12s %-20s %s\n", "SAMPLES/S", "BOUND BY", "SAMPLES SERVED")
	for _, name := range model.PathOrder {
		p := r.Paths[name]
		fmt.Fprintf(w, "  %-17s %-12s %-20s %.0f\n", name, fmtRate(p.Rate), p.Bound, p.Samples)
	}
	fmt.Fprintf(w, "\nsplit of memory_budget (encoded-decoded-augmented %%)   predicted samples/s\n")
	label := "best (exact solver)"
	if r.Forced {
		label = "forced (model.split)"
	}
	row := func(name string, s model.SplitReport) {
		fmt.Fprintf(w, "  %-22s %-31s %s\n", name, fmt.Sprintf("%g-%g-%g", s.EncodedPct, s.DecodedPct, s.AugmentedPct), fmtRate(s.Predicted))
	}
	row(label, r.SplitReport)
	if r.Forced {
		row("best (exact solver)", r.Optimum)
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

// mountModelText renders the model's decision for .epochfs/model from the
// config and the catalog's dataset counts (no profiling at mount time). A
// model that cannot decide (inputs missing) says why on an error= line.
func mountModelText(ctx context.Context, cfg config.Config, files, bytes int64) []byte {
	prof := &profile.Report{}
	if files > 0 {
		prof.Samples = profile.Measurement{Value: float64(files), How: "catalog: files in the dataset", OK: true}
		prof.SampleBytes = profile.Measurement{Value: float64(bytes) / float64(files), How: "catalog: mean file size", OK: true}
		prof.DatasetBytes = profile.Measurement{Value: float64(bytes), How: "catalog: bytes in the dataset", OK: true}
	}
	_, memory := profile.Host(ctx)
	inputs, params, warnings, err := resolveInputs(cfg, prof, memory)
	if err != nil {
		return []byte("error=" + oneLineErr(err) + "\n")
	}
	forced, err := cfg.Model.ParsedSplit()
	if err != nil {
		return []byte("error=" + oneLineErr(err) + "\n")
	}
	d, err := model.Decide(params, forced)
	if err != nil {
		return []byte("error=" + oneLineErr(err) + "\n")
	}
	return []byte(model.NewReport(d, inputs, warnings).KeyValues())
}

func oneLineErr(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }
