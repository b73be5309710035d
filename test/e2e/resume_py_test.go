package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPythonSamplerAndBatchesResumeTheirEpoch: with Debian's PyTorch,
// epochfs.Sampler and epochfs.Batches (a prefetch thread reading ahead)
// take part of an epoch, save state_dict(), and new ones on the same
// mount load it and finish the epoch: every sample once across both, the
// batches read ahead and never yielded included; a state of another seed
// is refused with EpochfsError naming it.
func TestPythonSamplerAndBatchesResumeTheirEpoch(t *testing.T) {
	requireFUSE(t)
	requireTorch(t)
	_, mnt, paths := mountedWithConfig(t, 45, 3, "[preprocess]\naugment = [\"random_resized_crop:32\"]\n")
	pkg, _ := filepath.Abs("../../python")
	script := `
import json, os, sys, time, torch
from torchvision import datasets
from epochfs import Batches, EpochfsError, Sampler
mnt = sys.argv[1]
ds = datasets.ImageFolder(mnt)
out = {}
# Sampler: 10 samples yielded, then the state; a new Sampler finishes the epoch.
s = Sampler(ds, "s1", batch_size=4, seed=1)
it = iter(s)
first = [next(it) for _ in range(10)]
state = s.state_dict()
s2 = Sampler(ds, "s2", batch_size=4, seed=1)
s2.load_state_dict(state)
rest = list(iter(s2))
out["sampler"] = {"first": first, "rest": rest, "len": len(s2), "n": len(ds)}
try:
    Sampler(ds, "s3", batch_size=4, seed=2).load_state_dict(state)
    out["foreign"] = "taken"
except EpochfsError as e:
    out["foreign"] = str(e)
# Batches: 2 batches taken while the thread reads one ahead; it is given back.
b = Batches(mnt, job="b1", batch_size=5, seed=1, with_paths=True, prefetch=1)
it = iter(b)
taken = [p for _ in range(2) for p in next(it)[2]]
time.sleep(1)  # pacing: the thread reads the next batch meanwhile, as during a training step
state = b.state_dict()
b2 = Batches(mnt, job="b2", batch_size=5, seed=1, with_paths=True)
b2.load_state_dict(state)
more = [p for _, _, paths in b2 for p in paths]
out["batches"] = {"first": taken, "rest": more, "unread": len(state["unread"])}
json.dump(out, open(sys.argv[2], "w"))
`
	res := filepath.Join(t.TempDir(), "out.json")
	cmd := exec.Command(python, "-c", script, mnt, res)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, b)
	}
	var out struct {
		Sampler struct {
			First, Rest []int
			Len, N      int
		}
		Foreign string
		Batches struct {
			First, Rest []string
			Unread      int
		}
	}
	data, _ := os.ReadFile(res)
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	once := func(what string, n int, parts ...[]int) {
		t.Helper()
		count := make([]int, n)
		for _, p := range parts {
			for _, i := range p {
				count[i]++
			}
		}
		for i, c := range count {
			if c != 1 {
				t.Fatalf("%s: sample %d handed out %d times across the runs", what, i, c)
			}
		}
	}
	s := out.Sampler
	once("Sampler", s.N, s.First, s.Rest)
	if s.Len != s.N-10 {
		t.Errorf("Sampler: len() of the resumed epoch %d, want %d", s.Len, s.N-10)
	}
	if out.Foreign == "taken" || out.Foreign == "" {
		t.Errorf("a state of another seed: %q, want EpochfsError", out.Foreign)
	}
	index := map[string]int{}
	for i, p := range paths {
		index[p] = i
	}
	var first, rest []int
	for _, p := range out.Batches.First {
		first = append(first, index[p])
	}
	for _, p := range out.Batches.Rest {
		rest = append(rest, index[p])
	}
	once("Batches", len(paths), first, rest)
	if out.Batches.Unread == 0 {
		t.Error("Batches: nothing read ahead was given back: the test shows nothing")
	}
}
