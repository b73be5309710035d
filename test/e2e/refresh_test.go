package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// A refresh that removes files in the middle of an epoch, under the
// Python package's Sampler, DistributedSampler (two ranks) and Batches
// (view=encoded), with Debian's PyTorch: no exception (FileNotFoundError,
// "handed out ..., not a sample"), no removed file handed out after the
// refresh or in the next epoch, every epoch as long as len() says (ranks
// equal: padding stands in for the removed files in the epoch running),
// and the next epoch is torch's count over the files left, covering them.
func TestJobsRunOnWhenARefreshRemovesFiles(t *testing.T) {
	requireFUSE(t)
	requireTorch(t)
	src, mnt, _, _ := mountedDataset(t, 120, 4)
	pkg, err := filepath.Abs("../../python")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "refresh.json")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "refresh_train.py", "--mount", mnt, "--source", src, "--package", pkg, "--out", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("refresh_train.py: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Parts []struct {
			Name                           string
			Len1, Len2                     int
			Ranks                          int
			Removed, Before, After, Epoch2 []string
		}
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Parts) != 4 {
		t.Fatalf("%d parts, want 4", len(res.Parts))
	}
	// Every file the source still has, at the end.
	left := map[string]bool{}
	filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(src, p)
			left[rel] = true
		}
		return nil
	})
	covered := map[string]map[string]bool{}
	handed := map[string]int{}
	for _, p := range res.Parts {
		gone := map[string]bool{}
		for _, r := range p.Removed {
			gone[r] = true
		}
		if len(gone) != 4 {
			t.Errorf("%s: %d files removed, want 4", p.Name, len(gone))
		}
		if n := len(p.Before) + len(p.After); n != p.Len1 {
			t.Errorf("%s: epoch 1 handed out %d samples, len() %d", p.Name, n, p.Len1)
		}
		// Epoch 2 is torch's count over the files left (the datasets here
		// divide evenly over the ranks).
		w := max(p.Ranks, 1)
		if want := (p.Len1*w - 4 + w - 1) / w; len(p.Epoch2) != p.Len2 || p.Len2 != want {
			t.Errorf("%s: epoch 2 handed out %d samples, len() %d, want %d", p.Name, len(p.Epoch2), p.Len2, want)
		}
		for _, q := range append(append([]string{}, p.After...), p.Epoch2...) {
			if gone[q] {
				t.Errorf("%s: %s handed out after the refresh removed it", p.Name, q)
			}
		}
		// The ranks of one job together cover the files left.
		key := p.Name
		if p.Ranks > 1 {
			key = "DistributedSampler"
		}
		if covered[key] == nil {
			covered[key] = map[string]bool{}
		}
		for _, q := range p.Epoch2 {
			covered[key][q] = true
		}
		handed[key] += len(p.Epoch2)
	}
	for key, seen := range covered {
		// Each file left once: no padding over these even counts.
		if handed[key] != len(seen) {
			t.Errorf("%s: epoch 2 handed out %d samples, %d distinct", key, handed[key], len(seen))
		}
		for f := range left {
			// Files a later part removed were still there for this one's
			// epoch 2, and files the source has now are all covered.
			if !seen[f] {
				t.Errorf("%s: epoch 2 never handed out %s", key, f)
			}
		}
	}
}
