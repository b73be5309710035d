package model

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

func TestReportKeyValuesAndJSON(t *testing.T) {
	p := hand()
	p.TGPU = Unbounded // an unbounded term must survive JSON and key=value
	d, err := Decide(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReport(d, []Input{
		{Key: "memory_budget", Symbol: "S_cache", Unit: "bytes", Value: Num(p.SCache), Source: "config"},
		{Key: "t_gpu", Symbol: "T_GPU", Unit: "samples/s", Value: Num(p.TGPU), Source: "unbounded: not set"},
	}, []string{"a warning"})
	kv := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.KeyValues()), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("line %q is not key=value", line)
		}
		if _, dup := kv[k]; dup {
			t.Fatalf("key %s twice", k)
		}
		kv[k] = v
	}
	var sum float64
	for _, k := range []string{"split_encoded_pct", "split_decoded_pct", "split_augmented_pct"} {
		v, err := strconv.ParseFloat(kv[k], 64)
		if err != nil {
			t.Fatalf("%s=%q", k, kv[k])
		}
		sum += v
	}
	if sum != 100 {
		t.Errorf("split sums to %v", sum)
	}
	if v, err := strconv.ParseFloat(kv["predicted_samples_per_s"], 64); err != nil || v <= 0 || v > d.Optimum.DSI+0.05 {
		t.Errorf("predicted_samples_per_s=%q (optimum %v)", kv["predicted_samples_per_s"], d.Optimum.DSI)
	}
	if kv["input.t_gpu"] != "inf" || kv["input.memory_budget"] != "100000000000" || kv["warning.0"] != "a warning" {
		t.Errorf("inputs: t_gpu=%q memory_budget=%q warning=%q", kv["input.t_gpu"], kv["input.memory_budget"], kv["warning.0"])
	}
	for _, name := range PathOrder {
		if kv["path."+name+".bound_by"] == "" || kv["path."+name+".samples_per_s"] == "" {
			t.Errorf("path %s missing", name)
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("JSON: %v", err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back["split_encoded_pct"].(float64)+back["split_decoded_pct"].(float64)+back["split_augmented_pct"].(float64) != 100 {
		t.Errorf("JSON split: %v", back)
	}
	gpu := back["paths"].(map[string]any)["augmented"].(map[string]any)["terms"].(map[string]any)["gpu"]
	if gpu != nil {
		t.Errorf("unbounded GPU term in JSON = %v, want null", gpu)
	}
}
