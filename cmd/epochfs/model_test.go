package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// issueExample is the [model] section of issue 3, which tests and scripts
// rely on.
const issueExample = `[model]
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
`

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "node.toml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

type modelJSON struct {
	E         float64 `json:"split_encoded_pct"`
	D         float64 `json:"split_decoded_pct"`
	A         float64 `json:"split_augmented_pct"`
	Predicted float64 `json:"predicted_samples_per_s"`
	Forced    bool    `json:"split_forced"`
	Optimum   struct {
		Predicted float64 `json:"predicted_samples_per_s"`
	} `json:"optimum"`
	Single map[string]struct {
		Predicted float64 `json:"predicted_samples_per_s"`
	} `json:"single_form"`
	Paths map[string]struct {
		Rate    *float64 `json:"samples_per_s"`
		Bound   string   `json:"bound_by"`
		Samples float64  `json:"samples"`
	} `json:"paths"`
	Inputs map[string]struct {
		Value  *float64 `json:"value"`
		Source string   `json:"source"`
	} `json:"inputs"`
	Warnings []string `json:"warnings"`
}

func modelRunJSON(t *testing.T, args ...string) modelJSON {
	t.Helper()
	code, out, errs := runCLI(append([]string{"model", "--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("epochfs model %v: exit %d: %s", args, code, errs)
	}
	var m modelJSON
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	return m
}

func TestModelJSONContract(t *testing.T) {
	m := modelRunJSON(t, "--config", writeConfig(t, issueExample))
	if sum := m.E + m.D + m.A; math.Abs(sum-100) > 1e-9 {
		t.Errorf("split %v-%v-%v sums to %v", m.E, m.D, m.A, sum)
	}
	if m.Predicted <= 0 || m.Forced {
		t.Errorf("predicted %v forced %v", m.Predicted, m.Forced)
	}
	for _, f := range []string{"encoded", "decoded", "augmented"} {
		s, ok := m.Single[f]
		if !ok || s.Predicted <= 0 || s.Predicted > m.Predicted+0.5 {
			t.Errorf("single-form %s: %+v (best %v)", f, s, m.Predicted)
		}
	}
	for _, key := range []string{"memory_budget", "inflation", "sample_bytes", "dataset_samples", "nodes", "t_gpu",
		"t_decode_augment", "t_augment", "b_pcie", "b_nic", "b_cache", "b_storage", "c_pcie", "c_nw"} {
		in, ok := m.Inputs[key]
		if !ok || !strings.HasPrefix(in.Source, "config") || in.Value == nil {
			t.Errorf("input %s: %+v, want a configured value", key, in)
		}
	}
	if v := *m.Inputs["b_nic"].Value; v != 1.25e9 {
		t.Errorf("b_nic = %v, want 10Gbit/s = 1.25e9 B/s", v)
	}
	// Every path says what bounds it; the samples served add up.
	var served float64
	for _, name := range []string{"augmented", "decoded", "encoded", "nvme", "storage"} {
		p, ok := m.Paths[name]
		if !ok || p.Bound == "" || p.Rate == nil {
			t.Errorf("path %s: %+v", name, p)
		}
		served += p.Samples
	}
	if math.Abs(served-1.3e6) > 5 {
		t.Errorf("paths serve %v samples, want 1300000", served)
	}
	// This node has less than 64 GiB: the budget warning is in the JSON.
	if !strings.Contains(strings.Join(m.Warnings, ";"), "larger than this node's physical memory") && physicalMemory() < 64<<30 {
		t.Errorf("no memory warning: %v", m.Warnings)
	}
}

func physicalMemory() float64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return math.Inf(1)
	}
	var kb float64
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "MemTotal:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				_, _ = fmt.Sscan(f[1], &kb)
			}
		}
	}
	return kb * 1024
}

func TestModelHumanOutput(t *testing.T) {
	for rules, wants := range map[string][]string{
		"paper": {"best (exact solver)", "cpu_decode_augment", "paths (whole job)"},
		"views": {"best (grid search)", "resources (all jobs)", "bound by", "views rules", "never reused"},
	} {
		code, out, errs := runCLI("model", "--config", writeConfig(t, issueExample+"split = \"58-42-0\"\nrules = \""+rules+"\"\n"))
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errs)
		}
		for _, want := range append(wants, "forced (model.split)", "58-42-0", "all encoded", "all augmented",
			"storage", "why", "memory_budget", "S_cache") {
			if !strings.Contains(out, want) {
				t.Errorf("rules %s: output lacks %q:\n%s", rules, want, out)
			}
		}
	}
}

func TestModelForcedSplit(t *testing.T) {
	m := modelRunJSON(t, "--config", writeConfig(t, issueExample+"split = \"50-25-25\"\n"))
	if !m.Forced || m.E != 50 || m.D != 25 || m.A != 25 {
		t.Errorf("forced split: %+v", m)
	}
	if m.Optimum.Predicted < m.Predicted {
		t.Errorf("optimum %v below the forced split %v", m.Optimum.Predicted, m.Predicted)
	}
}

// §6 under the paper's rules: a dataset that fits the budget augmented, on
// a node whose augmented path is the fastest, is cached all augmented; one
// far larger than the budget behind slow storage is cached encoded.
func TestModelQualitativeSplits(t *testing.T) {
	small := `[model]
rules = "paper"
memory_budget = "8GiB"
sample_bytes = "110KiB"
dataset_samples = 10000
t_gpu = 4000
t_decode_augment = 1500
t_augment = 3000
b_storage = "200MB/s"
`
	m := modelRunJSON(t, "--config", writeConfig(t, small))
	if m.E != 0 || m.D != 0 || m.A != 100 {
		t.Errorf("small dataset: split %v-%v-%v, want 0-0-100", m.E, m.D, m.A)
	}
	large := strings.Replace(small, "dataset_samples = 10000", "dataset_samples = 10000000", 1)
	large = strings.Replace(large, `b_storage = "200MB/s"`, `b_storage = "50MB/s"`, 1)
	m = modelRunJSON(t, "--config", writeConfig(t, large))
	if m.E != 100 {
		t.Errorf("large dataset: split %v-%v-%v, want 100-0-0", m.E, m.D, m.A)
	}
}

// Under the views rules augmented memory buys one job nothing (it is never
// a cache across epochs): a dataset that fits decoded is decoded; three
// jobs get a sharing window of augmented memory and decode the rest.
func TestModelViewsSplits(t *testing.T) {
	cfg := `[model]
memory_budget = "8GiB"
sample_bytes = "110KiB"
dataset_samples = 10000
decoded_bytes = "500KiB"
augmented_bytes = "147KiB"
t_decode_augment = 1500
t_augment = 5000
b_storage = "200MB/s"
`
	m := modelRunJSON(t, "--config", writeConfig(t, cfg))
	if m.D < 59 || m.A != 0 {
		t.Errorf("one job: split %v-%v-%v, want the dataset (59.6 %%) decoded and nothing augmented", m.E, m.D, m.A)
	}
	m3 := modelRunJSON(t, "--config", writeConfig(t, cfg+"jobs = 3\nbatch_size = 128\n"))
	window := 3.0 * 3 * 128 * 147 * 1024 / (8 << 30) * 100 // percent of the budget: 3 jobs × 3 batches in flight
	if m3.A < window-0.05 || m3.A > window+1 || m3.D < 59 {
		t.Errorf("three jobs: split %v-%v-%v, want %.2f%% augmented (the window) and the dataset decoded", m3.E, m3.D, m3.A, window)
	}
	if m3.Predicted < 2.9*m.Predicted {
		t.Errorf("three jobs sharing every augmentation predict %v, one job %v", m3.Predicted, m.Predicted)
	}
}

func TestModelBadInputIsAUsageErrorNamingTheKey(t *testing.T) {
	base := strings.Replace(issueExample, "sample_bytes = 114620\n", "", 1)
	for _, c := range []struct{ extra, says string }{
		{"sample_bytes = 0", "model.sample_bytes"},
		{"sample_bytes = -1", "model.sample_bytes"},
		{"sample_bytes = nan", "model.sample_bytes"},
		{"sample_bytes = 1000\nsplit = \"50-30-30\"", "model.split \"50-30-30\": percentages sum to 110, want 100"},
		{"sample_bytes = 1000\nsplit = \"50-30\"", "model.split"},
		{"sample_bytes = 1000\nnope = 1", "unknown key model.nope"},
	} {
		code, _, errs := runCLI("model", "--config", writeConfig(t, base+c.extra+"\n"))
		if code != exitUsage || !strings.Contains(errs, c.says) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and one line with %q", c.extra, code, errs, c.says)
		}
	}
	for _, c := range []struct{ from, to, says string }{
		{"t_gpu = 4550", "t_gpu = -1", "model.t_gpu = -1"},
		{"t_augment = 4050", "t_augment = nan", "model.t_augment = nan"},
		{"inflation = 5.12", "inflation = -2", "model.inflation = -2"},
		{"b_storage = \"500MB/s\"", "b_storage = \"fast\"", "model.b_storage"},
		{"memory_budget = \"64GiB\"", "", "model.memory_budget: missing"},
		{"t_decode_augment = 2132", "", "model.t_decode_augment: not set and not measured"},
		{"b_storage = \"500MB/s\"", "", "model.b_storage: not set and not measured"},
		{"dataset_samples = 1300000", "dataset_samples = 0", "model.dataset_samples = 0"},
	} {
		text := strings.Replace(issueExample, c.from, c.to, 1)
		code, _, errs := runCLI("model", "--config", writeConfig(t, text))
		if code != exitUsage || !strings.Contains(errs, c.says) {
			t.Errorf("%s → %q: exit %d, stderr %q; want exit 2 with %q", c.from, c.to, code, errs, c.says)
		}
	}
	// Nothing bounds the paper's augmented path (under the views rules
	// the CPU bounds every sample).
	text := issueExample + "rules = \"paper\"\n"
	for _, k := range []string{"t_gpu = 4550\n", "b_pcie = \"32GB/s\"\n", "b_cache = \"10Gbit/s\"\n"} {
		text = strings.Replace(text, k, "", 1)
	}
	if code, _, errs := runCLI("model", "--config", writeConfig(t, text)); code != exitUsage || !strings.Contains(errs, "set t_gpu, b_pcie or b_cache") {
		t.Errorf("unbounded: exit %d, %q", code, errs)
	}
	for _, c := range []struct{ extra, says string }{
		{"rules = \"magic\"", "model.rules = \"magic\""},
		{"rules = \"views\"\ncache = \"remote\"", "use rules = \"paper\""},
		{"jobs = 0", "model.jobs = 0"},
		{"decoded_bytes = 0", "model.decoded_bytes"},
		{"augmented_bytes = \"big\"", "model.augmented_bytes"},
		{"share_window = -1", "model.share_window = -1"},
	} {
		code, _, errs := runCLI("model", "--config", writeConfig(t, issueExample+c.extra+"\n"))
		if code != exitUsage || !strings.Contains(errs, c.says) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 with %q", c.extra, code, errs, c.says)
		}
	}
	if code, _, _ := runCLI("model", "extra-arg"); code != exitUsage {
		t.Errorf("positional argument: exit %d, want 2", code)
	}
	if code, _, errs := runCLI("model", "--config", filepath.Join(t.TempDir(), "missing.toml")); code != exitUsage || !strings.Contains(errs, "missing.toml") {
		t.Errorf("missing config: exit %d, %q", code, errs)
	}
}

func TestModelBudgetAbovePhysicalMemoryWarns(t *testing.T) {
	text := strings.Replace(issueExample, `memory_budget = "64GiB"`, `memory_budget = "1PiB"`, 1)
	code, _, errs := runCLI("model", "--config", writeConfig(t, text))
	if code != exitOK || !strings.Contains(errs, "warning: model.memory_budget = 1PiB is larger than this node's physical memory") {
		t.Errorf("exit %d, stderr %q; want a warning naming memory_budget", code, errs)
	}
}

func TestModelProfileMeasuresTheDataset(t *testing.T) {
	src := t.TempDir()
	var total int
	for i := 0; i < 40; i++ {
		dir := filepath.Join(src, []string{"cat", "dog"}[i%2])
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte{byte(i)}, 20000+i*100)
		total += len(data)
		if err := os.WriteFile(filepath.Join(dir, "img"+strings.Repeat("x", i)+".jpg"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tiers := t.TempDir()
	cfgText := `source = "` + src + `"
[[tier]]
name = "nvme"
path = "` + filepath.Join(tiers, "nvme") + `"
quota = "1GiB"

[model]
memory_budget = "64MiB"
t_gpu = 4000
t_decode_augment = 1500
t_augment = 3000
`
	m := modelRunJSON(t, "--config", writeConfig(t, cfgText), "--profile")
	for _, key := range []string{"sample_bytes", "dataset_samples", "b_storage", "b_nvme"} {
		if in := m.Inputs[key]; !strings.HasPrefix(in.Source, "measured: ") || in.Value == nil || *in.Value <= 0 {
			t.Errorf("input %s: %+v, want a measured value", key, in)
		}
	}
	if v := *m.Inputs["dataset_samples"].Value; v != 40 {
		t.Errorf("dataset_samples measured %v, want 40", v)
	}
	if v := *m.Inputs["sample_bytes"].Value; math.Abs(v-float64(total)/40) > 1e-9 {
		t.Errorf("sample_bytes measured %v, want %v", v, float64(total)/40)
	}
	if v := *m.Inputs["s_nvme"].Value; v != 1<<30 || !strings.Contains(m.Inputs["s_nvme"].Source, "nvme") {
		t.Errorf("s_nvme %v (%s), want the nvme tier's 1GiB quota", v, m.Inputs["s_nvme"].Source)
	}
	if m.Inputs["t_gpu"].Source != "config" {
		t.Errorf("configured t_gpu overridden: %+v", m.Inputs["t_gpu"])
	}
	// A configured value wins over the measurement.
	m = modelRunJSON(t, "--config", writeConfig(t, cfgText+"sample_bytes = 12345\n"), "--profile")
	if in := m.Inputs["sample_bytes"]; in.Source != "config" || *in.Value != 12345 {
		t.Errorf("configured sample_bytes: %+v", in)
	}
	// The test's source holds no images: T_D+A cannot be profiled, and
	// leaving it out is an error that says how to get it.
	noCPU := strings.Replace(cfgText, "t_decode_augment = 1500\n", "", 1)
	code, _, errs := runCLI("model", "--config", writeConfig(t, noCPU), "--profile")
	if code != exitUsage || !strings.Contains(errs, "model.t_decode_augment") || !strings.Contains(errs, "--profile with source set to a JPEG/PNG dataset") {
		t.Errorf("no T_D+A: exit %d, %q", code, errs)
	}
	if entries, _ := os.ReadDir(tiers); len(entries) != 0 {
		t.Errorf("profiling left %v in the tiers' parent", entries)
	}
}
