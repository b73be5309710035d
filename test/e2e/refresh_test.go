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
// equal), and the next epoch covers every file left.
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
			Len                            int
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
	for _, p := range res.Parts {
		gone := map[string]bool{}
		for _, r := range p.Removed {
			gone[r] = true
		}
		if len(gone) != 4 {
			t.Errorf("%s: %d files removed, want 4", p.Name, len(gone))
		}
		if n := len(p.Before) + len(p.After); n != p.Len {
			t.Errorf("%s: epoch 1 handed out %d samples, len() %d", p.Name, n, p.Len)
		}
		if len(p.Epoch2) != p.Len {
			t.Errorf("%s: epoch 2 handed out %d samples, len() %d", p.Name, len(p.Epoch2), p.Len)
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
	}
	for key, seen := range covered {
		for f := range left {
			// Files a later part removed were still there for this one's
			// epoch 2, and files the source has now are all covered.
			if !seen[f] {
				t.Errorf("%s: epoch 2 never handed out %s", key, f)
			}
		}
	}
}
