package config

import (
	"fmt"
	"math"
	"strings"

	"github.com/epochfs/epochfs/internal/model/splitspec"
)

// Model is the [model] section: the inputs of the DSI performance model
// (Seneca §5.1, Table 3) and, optionally, a forced split. Every key is
// optional here; a key left out is measured by `epochfs model --profile`,
// derived from other keys, or unbounded (see docs/model.md). Sizes and rates
// take plain numbers (bytes, bytes/s) or units ("64GiB", "500MB/s",
// "10Gbit/s"). Throughputs are samples/s per node.
type Model struct {
	MemoryBudget   Size     `toml:"memory_budget"`    // S_cache
	Inflation      *float64 `toml:"inflation"`        // M
	SampleBytes    Size     `toml:"sample_bytes"`     // S_data
	DatasetSamples *float64 `toml:"dataset_samples"`  // N_total
	Nodes          *int     `toml:"nodes"`            // n
	TGPU           *float64 `toml:"t_gpu"`            // T_GPU
	TDecodeAugment *float64 `toml:"t_decode_augment"` // T_D+A
	TAugment       *float64 `toml:"t_augment"`        // T_A
	BPCIe          Rate     `toml:"b_pcie"`
	BNIC           Rate     `toml:"b_nic"`
	BCache         Rate     `toml:"b_cache"`
	BStorage       Rate     `toml:"b_storage"`
	CPCIe          Size     `toml:"c_pcie"` // C_PCIe, bytes
	CNw            Size     `toml:"c_nw"`   // C_nw, bytes
	GPUsPerNode    *int     `toml:"gpus_per_node"`
	ModelBytes     Size     `toml:"model_bytes"`
	NVLink         NVLink   `toml:"nvlink"`
	BatchSize      *int     `toml:"batch_size"`
	BNVMe          Rate     `toml:"b_nvme"`
	SNVMe          Size     `toml:"s_nvme"`
	// Cache is where the memory cache is: "local" (epochfs: in the training
	// node's RAM; the default) or "remote" (a cache service across the NIC,
	// Seneca's setting).
	Cache string `toml:"cache"`
	// Split forces the split of the memory budget, "ENCODED-DECODED-AUGMENTED"
	// in percent (e.g. "58-42-0"); empty: the model chooses.
	Split string `toml:"split"`
	// Rules is "views" (epochfs's caches: augmented tensors are never
	// reused, augmented memory lets jobs share them; the default with a
	// local cache) or "paper" (Seneca's equations as printed; the default
	// with cache = "remote").
	Rules string `toml:"rules"`
	// The views rules' inputs: jobs with one pipeline per node, the bytes
	// of a decoded sample and of an augmented one, the samples of
	// augmented memory the jobs need to share a production, and whether
	// the jobs ingest on the CPUs that preprocess (no GPU).
	Jobs           *int     `toml:"jobs"`
	DecodedBytes   Size     `toml:"decoded_bytes"`
	AugmentedBytes Size     `toml:"augmented_bytes"`
	ShareWindow    *float64 `toml:"share_window"`
	IngestOnCPU    bool     `toml:"ingest_on_cpu"`
}

// NVLink says which GPU links are NVLink, which removes gradient traffic
// from PCIe ("intra": C_PCIe = 0) or from PCIe and the network ("inter":
// C_PCIe = C_nw = 0), as in Seneca §5.1. TOML: true (= "intra"), false
// (= "none"), or one of the strings "none", "intra", "inter".
type NVLink struct {
	Raw  string
	Mode string // "", "none", "intra" or "inter"
	err  error
}

// UnmarshalTOML accepts a boolean or a string.
func (n *NVLink) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case bool:
		*n = NVLink{Raw: fmt.Sprint(x), Mode: map[bool]string{true: "intra", false: "none"}[x]}
	case string:
		m := strings.ToLower(strings.TrimSpace(x))
		switch m {
		case "none", "intra", "inter":
			*n = NVLink{Raw: x, Mode: m}
		default:
			*n = NVLink{Raw: x, err: fmt.Errorf("%q: want true, false, \"none\", \"intra\" or \"inter\"", x)}
		}
	default:
		*n = NVLink{Raw: fmt.Sprint(v), err: fmt.Errorf("%v: want true, false, \"none\", \"intra\" or \"inter\"", v)}
	}
	return nil
}

// Err is the parse error, if any.
func (n NVLink) Err() error { return n.err }

// DefaultModel returns the [model] defaults: nothing set, a local cache.
func DefaultModel() Model { return Model{Cache: "local"} }

// Validate checks every [model] key that is set. Errors name the key and
// the value.
//
// Long: one check per key of [model], in the section's order.
func (m *Model) Validate() error {
	sizes := []struct {
		key      string
		v        Size
		positive bool
	}{
		{"memory_budget", m.MemoryBudget, false},
		{"sample_bytes", m.SampleBytes, true},
		{"c_pcie", m.CPCIe, false},
		{"c_nw", m.CNw, false},
		{"model_bytes", m.ModelBytes, false},
		{"s_nvme", m.SNVMe, false},
		{"decoded_bytes", m.DecodedBytes, true},
		{"augmented_bytes", m.AugmentedBytes, true},
	}
	for _, s := range sizes {
		if s.v.Raw == "" {
			continue
		}
		if err := s.v.Err(); err != nil {
			return fmt.Errorf("model.%s: %w", s.key, err)
		}
		if s.positive && s.v.Bytes <= 0 {
			return fmt.Errorf("model.%s = %q: must be greater than 0", s.key, s.v.Raw)
		}
	}
	rates := []struct {
		key string
		v   Rate
	}{{"b_pcie", m.BPCIe}, {"b_nic", m.BNIC}, {"b_cache", m.BCache}, {"b_storage", m.BStorage}, {"b_nvme", m.BNVMe}}
	for _, r := range rates {
		if r.v.Raw == "" {
			continue
		}
		if err := r.v.Err(); err != nil {
			return fmt.Errorf("model.%s: %w", r.key, err)
		}
		if r.v.BytesPerSec <= 0 {
			return fmt.Errorf("model.%s = %q: must be greater than 0 (leave it out for unbounded)", r.key, r.v.Raw)
		}
	}
	for _, t := range []struct {
		key string
		v   *float64
	}{{"t_gpu", m.TGPU}, {"t_decode_augment", m.TDecodeAugment}, {"t_augment", m.TAugment}} {
		if t.v == nil {
			continue
		}
		switch v := *t.v; {
		case math.IsNaN(v):
			return fmt.Errorf("model.%s = nan: want samples/s greater than 0", t.key)
		case v <= 0:
			return fmt.Errorf("model.%s = %g: must be greater than 0 (leave it out, or write inf, for unbounded)", t.key, v)
		}
	}
	if m.Inflation != nil {
		if v := *m.Inflation; math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return fmt.Errorf("model.inflation = %g: want a finite factor greater than 0 (Seneca's ImageNet: 5.12)", v)
		}
	}
	if m.DatasetSamples != nil {
		if v := *m.DatasetSamples; math.IsNaN(v) || math.IsInf(v, 0) || v < 1 || v != math.Trunc(v) || v > 1e15 {
			return fmt.Errorf("model.dataset_samples = %g: want a whole number of samples, at least 1", v)
		}
	}
	for _, c := range []struct {
		key string
		v   *int
		max int
	}{{"nodes", m.Nodes, 1 << 20}, {"gpus_per_node", m.GPUsPerNode, 1024}, {"batch_size", m.BatchSize, 1 << 30}, {"jobs", m.Jobs, 4096}} {
		if c.v != nil && (*c.v < 1 || *c.v > c.max) {
			return fmt.Errorf("model.%s = %d: want 1 to %d", c.key, *c.v, c.max)
		}
	}
	if err := m.NVLink.Err(); err != nil {
		return fmt.Errorf("model.nvlink = %w", err)
	}
	switch m.Cache {
	case "", "local", "remote": // "" is the default, local
	default:
		return fmt.Errorf("model.cache = %q: want \"local\" or \"remote\"", m.Cache)
	}
	switch m.Rules {
	case "", "views", "paper":
	default:
		return fmt.Errorf("model.rules = %q: want \"views\" (epochfs's caches) or \"paper\" (Seneca's equations as printed)", m.Rules)
	}
	if m.Rules == "views" && m.Cache == "remote" {
		return fmt.Errorf("model.rules = \"views\" models the node's own caches: with cache = \"remote\" use rules = \"paper\"")
	}
	if m.ShareWindow != nil {
		if v := *m.ShareWindow; math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("model.share_window = %g: want samples, 0 or more", v)
		}
	}
	if strings.TrimSpace(m.Split) != "" {
		if _, _, _, err := splitspec.Parse(m.Split); err != nil {
			return fmt.Errorf("model.%w", err) // "model.split \"…\": why"
		}
	}
	return nil
}
