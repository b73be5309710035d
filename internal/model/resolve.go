package model

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Resolving the model's inputs: the [model] section (Settings, every key
// optional) and what was measured on the node (Observed) become Params and
// the list of Inputs with where each value came from. Configured values
// win over measured ones; a value neither configured nor measured is
// derived, defaulted or unbounded, or is an error (ErrMissing) naming its
// key. `epochfs model` resolves with a profile of the node; a mount
// resolves with its catalog's counts and its tiers (no profiling).

// ErrMissing is wrapped by Resolve's errors: an input that is neither
// configured nor measured, or nothing bounding the model.
var ErrMissing = errors.New("model input missing")

type missingError struct{ msg string }

func (e *missingError) Error() string        { return e.msg }
func (e *missingError) Is(target error) bool { return target == ErrMissing }

func missingf(format string, a ...any) error { return &missingError{fmt.Sprintf(format, a...)} }

// TensorBytes is the preprocessed sample inflation is derived from when
// Settings.Inflation is not set: one 224×224×3 float32 tensor, the usual
// output of RandomResizedCrop(224) + ToTensor (Seneca's M = 5.12 for
// ImageNet's 114.62 KiB mean is this size to 0.2 %).
const TensorBytes = 224 * 224 * 3 * 4

// Settings is the [model] section as plain values: nil means not set.
// Sizes are bytes, rates bytes/s, throughputs samples/s per node.
type Settings struct {
	MemoryBudget     *float64
	MemoryBudgetText string // as written, for messages
	Inflation        *float64
	SampleBytes      *float64
	DatasetSamples   *float64
	Nodes            *int
	TGPU             *float64
	TDecodeAugment   *float64
	TAugment         *float64
	BPCIe            *float64
	BNIC             *float64
	BCache           *float64
	BStorage         *float64
	CPCIe            *float64
	CNw              *float64
	GPUsPerNode      *int
	ModelBytes       *float64
	NVLink           string // "", "none", "intra", "inter"
	BatchSize        *int
	BNVMe            *float64
	SNVMe            *float64
	Remote           bool   // cache = "remote"
	Split            string // forced split, "" for the model's choice
	Rules            string // "views", "paper"; "": views with a local cache, paper with a remote one
	Jobs             *int
	DecodedBytes     *float64
	AugmentedBytes   *float64
	ShareWindow      *float64
	IngestOnCPU      bool
}

// ViewsRules reports whether the settings select the views rules.
func (m Settings) ViewsRules() bool {
	return m.Rules == "views" || m.Rules == "" && !m.Remote
}

// InFlightBatches is how many batches of each job are made ahead of or
// being read at once: the one being read and the sampler's lookahead of two
// (sampler.DefaultLookahead). The sharing window holds them for every job:
// an augmented tensor made for one job must stay in memory while the
// others' windows reach it, so a cache of K·batch tensors (one batch per
// job) shares nothing in practice (docs/benchmarks.md, "The model against
// the mount").
const InFlightBatches = 3

// DefaultBatch is the batch size the sharing window is derived from when
// model.batch_size is not set.
const DefaultBatch = 256

// Measured is a value measured on the node; OK false says it could not be,
// and How says why (or how it was).
type Measured struct {
	Value float64
	How   string
	OK    bool
}

// Observed is what is known of the node. A nil measurement was not taken.
type Observed struct {
	Samples, SampleBytes *Measured // the dataset
	StorageRandom        *Measured // B_storage
	DecodeAugment        *Measured // T_D+A
	Augment              *Measured // T_A
	Memory               Measured  // physical memory
	Tiers                []TierObserved
	// The views rules: the mean bytes of a decoded sample and of an
	// augmented one (the pipeline's output).
	DecodedBytes, AugmentedBytes *Measured
}

// TierObserved is one tier of the mount, in its order.
type TierObserved struct {
	Name   string
	Memory bool  // on tmpfs or ramfs
	Quota  int64 // bytes
	Read   Measured
}

// Resolve turns settings and observations into the model's parameters.
//
// Long: the model's inputs resolved in the order of the paper's equations, each with its source.
func Resolve(m Settings, obs Observed) ([]Input, Params, []string, error) {
	var ins []Input
	var warnings []string
	add := func(key, symbol, unit string, v float64, source string) float64 {
		ins = append(ins, Input{Key: key, Symbol: symbol, Unit: unit, Value: Num(v), Source: source})
		return v
	}
	missing := func(key, what string) error {
		return missingf("model.%s: not set and not measured: set it in [model]%s", key, what)
	}
	measuredOr := func(key, symbol, unit string, cfg *float64, meas *Measured, what string) (float64, error) {
		switch {
		case cfg != nil:
			return add(key, symbol, unit, *cfg, "config"), nil
		case meas != nil && meas.OK:
			return add(key, symbol, unit, meas.Value, "measured: "+meas.How), nil
		case meas != nil:
			return 0, missing(key, what+" ("+meas.How+")")
		default:
			return 0, missing(key, what)
		}
	}
	var p Params
	p.CacheRemote = m.Remote
	p.Views = m.ViewsRules()
	if p.Views && m.Remote {
		return nil, p, nil, missingf("model.rules = \"views\" models the node's own caches: with cache = \"remote\" use rules = \"paper\"")
	}

	// S_cache.
	if m.MemoryBudget == nil {
		return nil, p, nil, missingf("model.memory_budget: missing: the RAM to split between encoded, decoded and augmented samples, e.g. memory_budget = \"64GiB\"")
	}
	p.SCache = add("memory_budget", "S_cache", "bytes", *m.MemoryBudget, "config")
	if obs.Memory.OK && !p.CacheRemote && p.SCache > obs.Memory.Value {
		warnings = append(warnings, fmt.Sprintf("model.memory_budget = %s is larger than this node's physical memory (%s)",
			m.MemoryBudgetText, bytesStr(obs.Memory.Value)))
	}
	srcHint := " (or give source and run with --profile)"
	var err error
	if p.SData, err = measuredOr("sample_bytes", "S_data", "bytes", m.SampleBytes, obs.SampleBytes, srcHint); err != nil {
		return nil, p, nil, err
	}
	if p.NTotal, err = measuredOr("dataset_samples", "N_total", "samples", m.DatasetSamples, obs.Samples, srcHint); err != nil {
		return nil, p, nil, err
	}
	switch {
	case !p.Views && m.Inflation != nil:
		p.M = add("inflation", "M", "×", *m.Inflation, "config")
	case !p.Views:
		p.M = add("inflation", "M", "×", TensorBytes/p.SData, fmt.Sprintf("derived: a 224×224×3 float32 tensor (%d B) / S_data", TensorBytes))
	default:
		if err := resolveViews(m, obs, &p, add); err != nil {
			return nil, p, nil, err
		}
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
		p.TGPU = add("t_gpu", "T_GPU", "samples/s", Unbounded, "unbounded: not set")
	}
	cpuHint := " (or profile it: --profile with source set to a JPEG/PNG dataset)"
	if p.TDA, err = measuredOr("t_decode_augment", "T_D+A", "samples/s", m.TDecodeAugment, obs.DecodeAugment, cpuHint); err != nil {
		return nil, p, nil, err
	}
	if p.TA, err = measuredOr("t_augment", "T_A", "samples/s", m.TAugment, obs.Augment, cpuHint); err != nil {
		return nil, p, nil, err
	}

	// Bandwidths, bytes/s.
	rateOr := func(key, symbol string, r *float64, why string) float64 {
		if r != nil {
			return add(key, symbol, "bytes/s", *r, "config")
		}
		return add(key, symbol, "bytes/s", Unbounded, "unbounded: "+why)
	}
	p.BPCIe = rateOr("b_pcie", "B_PCIe", m.BPCIe, "not set")
	p.BNIC = rateOr("b_nic", "B_NIC", m.BNIC, "not set")

	// The tiers: which are RAM and which are disk (NVMe/SSD).
	var memTier, diskTier *TierObserved
	var diskQuota int64
	var diskNames []string
	for i := range obs.Tiers {
		t := &obs.Tiers[i]
		if t.Memory {
			if memTier == nil {
				memTier = t
			}
			continue
		}
		if diskTier == nil {
			diskTier = t
		}
		diskQuota += t.Quota
		diskNames = append(diskNames, t.Name)
	}
	switch {
	case m.BCache != nil:
		p.BCache = add("b_cache", "B_cache", "bytes/s", *m.BCache, "config")
	case !p.CacheRemote && memTier != nil && memTier.Read.OK:
		p.BCache = add("b_cache", "B_cache", "bytes/s", memTier.Read.Value, fmt.Sprintf("measured: RAM tier %q: %s", memTier.Name, memTier.Read.How))
	default:
		p.BCache = add("b_cache", "B_cache", "bytes/s", Unbounded, "unbounded: not set")
	}
	if p.BStorage, err = measuredOr("b_storage", "B_storage", "bytes/s", m.BStorage, obs.StorageRandom, srcHint); err != nil {
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
	case m.CPCIe != nil:
		p.CPCIe = add("c_pcie", "C_PCIe", "bytes", *m.CPCIe, "config")
	case m.NVLink == "intra" || m.NVLink == "inter":
		p.CPCIe = add("c_pcie", "C_PCIe", "bytes", 0, "derived: NVLink within the node")
	case m.GPUsPerNode != nil && m.ModelBytes != nil:
		p.CPCIe = add("c_pcie", "C_PCIe", "bytes", RingAllReduceBytes(*m.GPUsPerNode, *m.ModelBytes)/float64(batch),
			fmt.Sprintf("derived: 2(g−1)/g × model_bytes, g = gpus_per_node %d%s", *m.GPUsPerNode, perSample))
	default:
		p.CPCIe = add("c_pcie", "C_PCIe", "bytes", 0, "default: no gradient traffic on PCIe (set c_pcie, or gpus_per_node and model_bytes)")
	}
	switch {
	case m.CNw != nil:
		p.CNw = add("c_nw", "C_nw", "bytes", *m.CNw, "config")
	case m.NVLink == "inter":
		p.CNw = add("c_nw", "C_nw", "bytes", 0, "derived: NVLink between nodes")
	case m.ModelBytes != nil:
		p.CNw = add("c_nw", "C_nw", "bytes", RingAllReduceBytes(p.Nodes, *m.ModelBytes)/float64(batch),
			fmt.Sprintf("derived: 2(n−1)/n × model_bytes, n = nodes %d%s", p.Nodes, perSample))
	default:
		p.CNw = add("c_nw", "C_nw", "bytes", 0, "default: no gradient traffic on the network (set c_nw, or model_bytes)")
	}

	// The NVMe tier.
	switch {
	case m.SNVMe != nil:
		p.SNVMe = add("s_nvme", "S_nvme", "bytes", *m.SNVMe, "config")
	case diskQuota > 0:
		p.SNVMe = add("s_nvme", "S_nvme", "bytes", float64(diskQuota), fmt.Sprintf("derived: quota of disk tier(s) %s", strings.Join(diskNames, ", ")))
	default:
		p.SNVMe = add("s_nvme", "S_nvme", "bytes", 0, "default: no disk tier")
	}
	switch {
	case m.BNVMe != nil:
		p.BNVMe = add("b_nvme", "B_nvme", "bytes/s", *m.BNVMe, "config")
	case diskTier != nil && diskTier.Read.OK:
		p.BNVMe = add("b_nvme", "B_nvme", "bytes/s", diskTier.Read.Value, fmt.Sprintf("measured: tier %q: %s", diskTier.Name, diskTier.Read.How))
	case p.SNVMe > 0:
		p.BNVMe = add("b_nvme", "B_nvme", "bytes/s", Unbounded, "unbounded: not set (run with --profile to measure the disk tier)")
	default:
		p.BNVMe = add("b_nvme", "B_nvme", "bytes/s", Unbounded, "unbounded: no disk tier")
	}

	// A path with no finite bound makes the optimum infinite.
	if !p.Views && math.IsInf(p.TGPU, 1) && math.IsInf(p.BPCIe, 1) && math.IsInf(p.BCache, 1) && (!p.CacheRemote || math.IsInf(p.BNIC, 1)) {
		return nil, p, nil, missingf("model: nothing bounds the augmented path: set t_gpu, b_pcie or b_cache")
	}
	return ins, p, warnings, nil
}

// resolveViews resolves the views rules' inputs: the decoded and augmented
// sizes (M, M_A), the jobs, the sharing window and where ingestion runs.
func resolveViews(m Settings, obs Observed, p *Params, add func(key, symbol, unit string, v float64, source string) float64) error {
	switch {
	case m.DecodedBytes != nil:
		p.M = add("decoded_bytes", "M", "×", *m.DecodedBytes/p.SData, fmt.Sprintf("derived: decoded_bytes %.0f B (config) / S_data", *m.DecodedBytes))
	case obs.DecodedBytes != nil && obs.DecodedBytes.OK:
		p.M = add("decoded_bytes", "M", "×", obs.DecodedBytes.Value/p.SData, fmt.Sprintf("derived: %.0f B per decoded sample (measured: %s) / S_data", obs.DecodedBytes.Value, obs.DecodedBytes.How))
	case m.Inflation != nil:
		p.M = add("inflation", "M", "×", *m.Inflation, "config (the decoded sample's inflation)")
	default:
		why := "not set"
		if obs.DecodedBytes != nil {
			why = "not measured: " + obs.DecodedBytes.How
		}
		p.M = add("decoded_bytes", "M", "×", TensorBytes/p.SData, fmt.Sprintf("derived (%s; set decoded_bytes or run with --profile): the paper's M, a 224×224×3 float32 tensor (%d B) / S_data", why, TensorBytes))
	}
	switch {
	case m.AugmentedBytes != nil:
		p.MA = add("augmented_bytes", "M_A", "×", *m.AugmentedBytes/p.SData, fmt.Sprintf("derived: augmented_bytes %.0f B (config) / S_data", *m.AugmentedBytes))
	case obs.AugmentedBytes != nil && obs.AugmentedBytes.OK:
		p.MA = add("augmented_bytes", "M_A", "×", obs.AugmentedBytes.Value/p.SData, fmt.Sprintf("derived: %.0f B per augmented sample (%s) / S_data", obs.AugmentedBytes.Value, obs.AugmentedBytes.How))
	default:
		p.MA = add("augmented_bytes", "M_A", "×", TensorBytes/p.SData, fmt.Sprintf("derived: a 224×224×3 float32 tensor (%d B) / S_data", TensorBytes))
	}
	p.Jobs = 1
	if m.Jobs != nil {
		p.Jobs = *m.Jobs
		add("jobs", "K", "jobs", float64(p.Jobs), "config")
	} else {
		add("jobs", "K", "jobs", 1, "default")
	}
	batch, batchFrom := DefaultBatch, fmt.Sprintf("the default batch of %d", DefaultBatch)
	if m.BatchSize != nil {
		batch, batchFrom = *m.BatchSize, fmt.Sprintf("batch_size %d", *m.BatchSize)
	}
	if m.ShareWindow != nil {
		p.Window = add("share_window", "W", "samples", *m.ShareWindow, "config")
	} else {
		p.Window = add("share_window", "W", "samples", float64(p.Jobs*InFlightBatches*batch),
			fmt.Sprintf("derived: jobs %d × %d batches in flight × %s", p.Jobs, InFlightBatches, batchFrom))
	}
	p.IngestOnCPU = m.IngestOnCPU
	v, src := 0.0, "default: the jobs ingest on GPUs"
	if m.IngestOnCPU {
		v, src = 1, "config: the jobs ingest on the CPUs that preprocess"
	}
	add("ingest_on_cpu", "", "bool", v, src)
	return nil
}

// DecideSettings resolves and decides: the split (forced by Settings.Split,
// else the model's), the report for `epochfs model` and .epochfs/model.
func DecideSettings(m Settings, obs Observed, warnings []string) (Decision, Report, error) {
	inputs, params, more, err := Resolve(m, obs)
	if err != nil {
		return Decision{}, Report{}, err
	}
	var forced *Split
	if strings.TrimSpace(m.Split) != "" {
		s, err := ParseSplit(m.Split)
		if err != nil {
			return Decision{}, Report{}, fmt.Errorf("model.%w", err)
		}
		forced = &s
	}
	d, err := Decide(params, forced)
	if err != nil {
		return Decision{}, Report{}, err
	}
	return d, NewReport(d, inputs, append(warnings, more...)), nil
}
