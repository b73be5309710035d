package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The Python package's Batches and AugmentedFolder over a real mount with
// Debian's PyTorch: three jobs take two epochs each of augmented batches;
// each epoch is a permutation of ImageFolder's samples with its labels, and
// no job sees a tensor twice; a DataLoader over AugmentedFolder reads the
// views with ImageFolder's labels.
func TestPythonBatchesOverAMount(t *testing.T) {
	requireFUSE(t)
	requireTorch(t)
	_, mnt, paths := mountedWithConfig(t, 40, 4, "[preprocess]\naugment = [\"random_resized_crop:64\", \"hflip:0.5\"]\noutput = \"float32_chw\"\n"+
		"normalize = [[0.485, 0.456, 0.406], [0.229, 0.224, 0.225]]\n")
	pkg, _ := filepath.Abs("../../python")
	script := `
import hashlib, json, sys, threading
import torch
from torch.utils.data import DataLoader
from torchvision import datasets
from epochfs import Batches, AugmentedFolder
mnt = sys.argv[1]
ref = datasets.ImageFolder(mnt)
import os
want = {os.path.relpath(p, mnt): y for p, y in ref.samples}
out = {"jobs": {}, "folder": {}}
def run(name):
    b = Batches(mnt, job=name, batch_size=8, seed=3, with_paths=True)
    seen, epochs = set(), []
    for epoch in range(2):
        got, twice, bad_label, shapes = [], 0, 0, set()
        for x, y, paths in b:
            shapes.add(tuple(x.shape[1:]) + (str(x.dtype),))
            for i, p in enumerate(paths):
                got.append(p)
                if want[p] != int(y[i]):
                    bad_label += 1
                d = hashlib.sha256(x[i].numpy().tobytes()).hexdigest()
                twice += d in seen
                seen.add(d)
        epochs.append({"n": len(got), "distinct": len(set(got)), "covers": set(got) == set(want),
                       "twice": twice, "bad_label": bad_label, "shapes": sorted(shapes), "len": len(b)})
    out["jobs"][name] = epochs
threads = [threading.Thread(target=run, args=(n,)) for n in ("j1", "j2", "j3")]
[t.start() for t in threads]
[t.join() for t in threads]
# view=encoded: the files' bytes, each batch mapped (with passthrough) or read into one buffer
# reused for every batch; what earlier batches gave must still hold their own bytes once later
# batches are read, and their mappings are gone.
import epochfs.batches as batches_mod
mapped, unmapped = [0], [0]
map_or_read = batches_mod.map_or_read
def counted(path, buf):
    r = map_or_read(path, buf)
    if len(r[0]):
        (mapped if r[2] is not None else unmapped)[0] += 1
    return r
batches_mod.map_or_read = counted
def batch_maps():  # the memory files' mappings: unlinked tmpfs files, or memfds
    return sum(1 for line in open("/proc/self/maps") if "(deleted)" in line or "epochfs-batch" in line)
maps_before = batch_maps()
kept = []
for x, y, paths in Batches(mnt, job="enc", batch_size=8, seed=3, view="encoded", with_paths=True):
    kept.append((x, y, paths))
ok, n_enc = 0, 0
for x, y, paths in kept:
    for i, p in enumerate(paths):
        n_enc += 1
        with open(os.path.join(mnt, p), "rb") as f:
            ok += x[i] == f.read() and want[p] == int(y[i])
# A loop left early: the reader thread stops, and the rest of the epoch is what the job neither
# gave nor read ahead (prefetch=1: one batch more than the caller saw, or none if not yet read).
b = Batches(mnt, job="early", batch_size=8, seed=3)
for x, y in b:
    break
rest = sum(len(y) for x, y in b)
import time
deadline = time.time() + 10
while any(t.name == "epochfs-batches" for t in threading.enumerate()) and time.time() < deadline:
    time.sleep(0.05)
out["early"] = {"rest": rest, "threads": sum(t.name == "epochfs-batches" for t in threading.enumerate())}
maps = batch_maps() - maps_before
out["encoded"] = {"n": n_enc, "ok": ok, "distinct": len({p for _, _, ps in kept for p in ps}),
                  "mapped": mapped[0], "unmapped": unmapped[0], "maps_left": maps}
ds = AugmentedFolder(mnt, job="folder", seed=5)
n, bad = 0, 0
for x, y in DataLoader(ds, batch_size=8, shuffle=True, num_workers=2):
    n += len(y)
    assert tuple(x.shape[1:]) == (3, 64, 64), x.shape
mine, theirs = [os.path.relpath(p, mnt) for p, _ in ds.samples], [os.path.relpath(p, mnt) for p, _ in ref.samples]
out["folder"] = {"n": n, "len": len(ds), "same_samples": mine == theirs, "same_targets": ds.targets == ref.targets}
print(json.dumps(out))
`
	cmd := exec.Command(python, "-c", script, mnt)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pkg)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	var res struct {
		Jobs map[string][]struct {
			N        int     `json:"n"`
			Distinct int     `json:"distinct"`
			Twice    int     `json:"twice"`
			BadLabel int     `json:"bad_label"`
			Len      int     `json:"len"`
			Covers   bool    `json:"covers"`
			Shapes   [][]any `json:"shapes"`
		} `json:"jobs"`
		Early struct {
			Rest    int `json:"rest"`
			Threads int `json:"threads"`
		} `json:"early"`
		Encoded struct {
			N        int `json:"n"`
			OK       int `json:"ok"`
			Distinct int `json:"distinct"`
			Mapped   int `json:"mapped"`
			Unmapped int `json:"unmapped"`
			MapsLeft int `json:"maps_left"`
		} `json:"encoded"`
		Folder struct {
			N           int  `json:"n"`
			Len         int  `json:"len"`
			SameSamples bool `json:"same_samples"`
			SameTargets bool `json:"same_targets"`
		} `json:"folder"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for name, epochs := range res.Jobs {
		for i, ep := range epochs {
			if ep.N != len(paths) || ep.Distinct != len(paths) || !ep.Covers || ep.Twice != 0 || ep.BadLabel != 0 || ep.Len != 5 {
				t.Errorf("job %s epoch %d: %+v (want %d samples once each, ImageFolder's labels, no tensor twice)", name, i+1, ep, len(paths))
			}
			if len(ep.Shapes) != 1 || len(ep.Shapes[0]) != 4 || ep.Shapes[0][3] != "torch.float32" {
				t.Errorf("job %s epoch %d: shapes %v, want one (3, 64, 64) float32", name, i+1, ep.Shapes)
			}
		}
	}
	if len(res.Jobs) != 3 {
		t.Errorf("jobs: %v", res.Jobs)
	}
	if e := res.Early; e.Rest < len(paths)-16 || e.Rest > len(paths)-8 || e.Threads != 0 {
		// Each early loop loses at most the one batch read ahead.
		t.Errorf("a loop left after one batch of 8: the rest of the epoch gave %d samples (want %d to %d), %d reader threads left",
			e.Rest, len(paths)-16, len(paths)-8, e.Threads)
	}
	if e := res.Encoded; e.N != len(paths) || e.OK != len(paths) || e.Distinct != len(paths) {
		t.Errorf("view=encoded: %+v, want %d files once each, every one the file's bytes and ImageFolder's label", e, len(paths))
	}
	// With passthrough the batches are mapped, not read; an open made while the last batch's
	// release is still in flight is read instead, so most but not all need be mapped.
	if e := res.Encoded; mustStatus(t, mnt)["passthrough"] == "on" && e.Mapped < (e.Mapped+e.Unmapped+1)/2 {
		t.Errorf("view=encoded with passthrough: %d batches mapped, %d read; want most mapped", e.Mapped, e.Unmapped)
	}
	t.Logf("view=encoded: %d batches mapped, %d read", res.Encoded.Mapped, res.Encoded.Unmapped)
	if e := res.Encoded; e.MapsLeft != 0 {
		t.Errorf("view=encoded: %d mappings of batch files left after the epoch", e.MapsLeft)
	}
	if f := res.Folder; f.N != len(paths) || f.Len != len(paths) || !f.SameSamples || !f.SameTargets {
		t.Errorf("AugmentedFolder: %+v", f)
	}
	st := mustStatus(t, mnt)
	t.Logf("preprocess_augments=%s for 3 jobs × 2 epochs × %d files (+%d for the folder's pass)", st["preprocess_augments"], len(paths), len(paths))
}

// docs/examples/train_batches.py, the example of the docs, trains two
// epochs over a mount with Debian's PyTorch.
func TestTrainBatchesExampleRuns(t *testing.T) {
	requireFUSE(t)
	requireTorch(t)
	_, mnt, paths := mountedWithConfig(t, 24, 3, "[preprocess]\naugment = [\"random_resized_crop:32\", \"hflip:0.5\"]\n")
	pkg, _ := filepath.Abs("../../python")
	example, _ := filepath.Abs("../../docs/examples/train_batches.py")
	cmd := exec.Command(python, example, mnt, "--job", "example", "--epochs", "2", "--batch-size", "8")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pkg)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("train_batches.py: %v\n%s", err, out)
	}
	for _, want := range []string{"epoch 1: " + strconv.Itoa(len(paths)) + " samples", "epoch 2: " + strconv.Itoa(len(paths)) + " samples"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// The shell's way to a batch (docs/views.md): bash makes the job, `cat`
// copies each batch file out until an empty one ends the epoch, and
// Debian's numpy.load reads every one: the epoch's samples once each, with
// ImageFolder's labels.
func TestShellCatOfBatchFilesLoadsWithNumPy(t *testing.T) {
	requireFUSE(t)
	requireTorch(t)
	_, mnt, paths := mountedWithConfig(t, 24, 3, "[preprocess]\naugment = [\"random_resized_crop:32\"]\n")
	dir := t.TempDir()
	shell := `set -e
J="$1/.epochfs/jobs/sh"
mkdir "$J"
printf 'batch_size=5\nseed=2\nview=encoded\n' > "$J/config"
i=0
while cat "$J/batch" > "$2/b$i.npz" && [ -s "$2/b$i.npz" ]; do i=$((i+1)); done
rm "$2/b$i.npz" # the empty file that ended the epoch
echo "$i"`
	out, err := exec.Command("bash", "-c", shell, "bash", mnt, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(string(out))); n != (len(paths)+4)/5 {
		t.Errorf("bash read %s batch files, want %d", out, (len(paths)+4)/5)
	}
	script := `
import glob, json, os, sys
import numpy as np
from torchvision import datasets
mnt, d = sys.argv[1], sys.argv[2]
want = {os.path.relpath(p, mnt): y for p, y in datasets.ImageFolder(mnt).samples}
got, bad = [], 0
for f in sorted(glob.glob(os.path.join(d, "b*.npz"))):
    with np.load(f) as z:
        x, off, y = z["x"], z["offsets"], z["y"]
        for i, p in enumerate(z["paths"].tolist()):
            got.append(p)
            data = open(os.path.join(mnt, p), "rb").read()
            bad += want[p] != int(y[i]) or x[off[i]:off[i + 1]].tobytes() != data
print(json.dumps({"n": len(got), "distinct": len(set(got)), "covers": set(got) == set(want), "bad": bad}))
`
	out, err = exec.Command(python, "-c", script, mnt, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	var res struct {
		N, Distinct, Bad int
		Covers           bool
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.N != len(paths) || res.Distinct != len(paths) || !res.Covers || res.Bad != 0 {
		t.Errorf("batches copied with cat: %+v, want %d files once each, each the file's bytes and ImageFolder's label", res, len(paths))
	}
}
