package config

import (
	"github.com/epochfs/epochfs/internal/model/splitspec"
	"math"
	"strings"
	"testing"
)

// The [model] example of issue 3 (and docs/model.md): these keys are the
// contract.
const modelExample = `
[model]
memory_budget = "64GiB"
inflation = 5.12
sample_bytes = 114620
dataset_samples = 1300000
nodes = 1
t_gpu = 4550
t_decode_augment = 2132
t_augment = 4050
b_pcie = "32GB/s"
b_nic = "10Gbit/s"
b_cache = "10Gbit/s"
b_storage = "500MB/s"
c_pcie = 0
c_nw = 0
gpus_per_node = 2
model_bytes = "98MB"
nvlink = false
batch_size = 256
b_nvme = "2GB/s"
s_nvme = "200GiB"
cache = "remote"
split = "58-42-0"
`

func TestModelSectionExample(t *testing.T) {
	cfg, err := Parse(Default(), modelExample, "example.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m := cfg.Model
	for _, c := range []struct {
		key       string
		got, want float64
	}{
		{"memory_budget", float64(m.MemoryBudget.Bytes), 64 << 30},
		{"inflation", *m.Inflation, 5.12},
		{"sample_bytes", float64(m.SampleBytes.Bytes), 114620},
		{"dataset_samples", *m.DatasetSamples, 1.3e6},
		{"nodes", float64(*m.Nodes), 1},
		{"t_gpu", *m.TGPU, 4550},
		{"t_decode_augment", *m.TDecodeAugment, 2132},
		{"t_augment", *m.TAugment, 4050},
		{"b_pcie", m.BPCIe.BytesPerSec, 32e9},
		{"b_nic", m.BNIC.BytesPerSec, 1.25e9},
		{"b_cache", m.BCache.BytesPerSec, 1.25e9},
		{"b_storage", m.BStorage.BytesPerSec, 500e6},
		{"c_pcie", float64(m.CPCIe.Bytes), 0},
		{"c_nw", float64(m.CNw.Bytes), 0},
		{"gpus_per_node", float64(*m.GPUsPerNode), 2},
		{"model_bytes", float64(m.ModelBytes.Bytes), 98e6},
		{"batch_size", float64(*m.BatchSize), 256},
		{"b_nvme", m.BNVMe.BytesPerSec, 2e9},
		{"s_nvme", float64(m.SNVMe.Bytes), 200 << 30},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.key, c.got, c.want)
		}
	}
	if m.NVLink.Mode != "none" || m.Cache != "remote" {
		t.Errorf("nvlink %q cache %q, want none, remote", m.NVLink.Mode, m.Cache)
	}
	e, d, a, err := splitspec.Parse(m.Split)
	if err != nil || math.Abs(e-0.58) > 1e-12 || math.Abs(d-0.42) > 1e-12 || a != 0 {
		t.Errorf("split = %g/%g/%g, %v; want 0.58/0.42/0", e, d, a, err)
	}
}

func TestModelDefaults(t *testing.T) {
	cfg, err := Parse(Default(), "[model]\nt_gpu = 100\n", "x")
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Model
	if m.Cache != "local" || m.Nodes != nil || m.MemoryBudget.Raw != "" || m.TDecodeAugment != nil {
		t.Errorf("defaults: %+v", m)
	}
	if m.Split != "" {
		t.Errorf("no split: got %q", m.Split)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestModelNVLinkForms(t *testing.T) {
	for in, want := range map[string]string{
		"true": "intra", "false": "none", `"inter"`: "inter", `"Intra"`: "intra", `"none"`: "none",
	} {
		cfg, err := Parse(Default(), "[model]\nnvlink = "+in+"\n", "x")
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil || cfg.Model.NVLink.Mode != want {
			t.Errorf("nvlink = %s: mode %q, %v; want %q", in, cfg.Model.NVLink.Mode, err, want)
		}
	}
}

func TestModelBadValuesNameTheKey(t *testing.T) {
	for _, c := range []struct{ toml, says string }{
		{`t_gpu = -1`, "model.t_gpu = -1"},
		{`t_gpu = 0`, "model.t_gpu = 0"},
		{`t_augment = nan`, "model.t_augment = nan"},
		{`t_decode_augment = -inf`, "model.t_decode_augment"},
		{`sample_bytes = 0`, "model.sample_bytes = \"0\": must be greater than 0"},
		{`sample_bytes = -5`, "model.sample_bytes"},
		{`memory_budget = "lots"`, "model.memory_budget"},
		{`memory_budget = -1`, "model.memory_budget"},
		{`b_storage = "fast"`, "model.b_storage"},
		{`b_nic = 0`, "model.b_nic = \"0\""},
		{`b_cache = "-1GB/s"`, "model.b_cache"},
		{`b_nvme = "1 parsec"`, "model.b_nvme"},
		{`s_nvme = "1 lightyear"`, "model.s_nvme"},
		{`c_nw = -3`, "model.c_nw"},
		{`inflation = nan`, "model.inflation"},
		{`inflation = 0`, "model.inflation = 0"},
		{`dataset_samples = 0`, "model.dataset_samples = 0"},
		{`dataset_samples = 1.5`, "model.dataset_samples = 1.5"},
		{`nodes = 0`, "model.nodes = 0"},
		{`gpus_per_node = -1`, "model.gpus_per_node = -1"},
		{`batch_size = 0`, "model.batch_size = 0"},
		{`nvlink = "sometimes"`, "model.nvlink"},
		{`nvlink = 3`, "model.nvlink"},
		{`cache = "cloud"`, "model.cache = \"cloud\""},
		{`split = "50-30-30"`, "model.split \"50-30-30\": percentages sum to 110, want 100"},
		{`split = "50-50"`, "model.split \"50-50\""},
		{`split = "x-0-100"`, "model.split \"x-0-100\": encoded percentage"},
	} {
		cfg, err := Parse(Default(), "[model]\n"+c.toml+"\n", "x")
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want one containing %q", c.toml, err, c.says)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", c.toml, err)
		}
	}
}

func TestModelRejectsUnknownKeys(t *testing.T) {
	_, err := Parse(Default(), "[model]\nmemory_budgett = \"1GiB\"\n", "x")
	if err == nil || !strings.Contains(err.Error(), "model.memory_budgett") {
		t.Errorf("unknown key: %v", err)
	}
}

func FuzzModelSection(f *testing.F) {
	for _, s := range []string{
		modelExample,
		"[model]\nsplit = \"100-0-0\"\n",
		"[model]\nt_gpu = inf\nnvlink = true\n",
		"[model]\ndataset_samples = 1e6\nsample_bytes = \"110KiB\"\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		cfg, err := Parse(Default(), text, "fuzz")
		if err != nil {
			return
		}
		if err := cfg.Model.Validate(); err != nil {
			if !strings.HasPrefix(err.Error(), "model.") {
				t.Fatalf("error does not name a model key: %v", err)
			}
			return
		}
		// A valid section gives usable numbers.
		m := cfg.Model
		if m.SampleBytes.Raw != "" && m.SampleBytes.Bytes <= 0 {
			t.Fatalf("sample_bytes %q accepted as %d", m.SampleBytes.Raw, m.SampleBytes.Bytes)
		}
		for _, v := range []*float64{m.TGPU, m.TAugment, m.TDecodeAugment, m.Inflation} {
			if v != nil && (math.IsNaN(*v) || *v <= 0) {
				t.Fatalf("accepted %v", *v)
			}
		}
		if m.Split != "" {
			e, d, a, err := splitspec.Parse(m.Split)
			if err != nil || e < 0 || d < 0 || a < 0 || math.Abs(e+d+a-1) > 1e-9 {
				t.Fatalf("split %q: %g/%g/%g %v", m.Split, e, d, a, err)
			}
		}
	})
}
