package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A refresh that removes and adds files in the middle of an epoch, under
// the Python package's Sampler, DistributedSampler (two ranks) and Batches
// (view=encoded), with Debian's PyTorch: no exception (FileNotFoundError,
// "handed out ..., not a sample"), no removed or added file handed out in
// the epoch running, every epoch as long as len() says (ranks equal:
// padding stands in for the removed files), and the next epoch hands out,
// once each, the files left of the samplers' datasets (their jobs are
// fixed: their dataset objects list the samples) and, for Batches, the
// files left and the files added.
func TestJobsRunOnWhenARefreshRemovesAndAddsFiles(t *testing.T) {
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
			Name                                             string
			Ranks, Len1, Len2                                int
			Removed, Added, Before, After, Epoch2, Expected2 []string
		}
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Parts) != 4 {
		t.Fatalf("%d parts, want 4", len(res.Parts))
	}
	// Epoch 2 of each job, its ranks together.
	epoch2 := map[string]map[string]int{}
	expected := map[string][]string{}
	for _, p := range res.Parts {
		gone, added := map[string]bool{}, map[string]bool{}
		for _, r := range p.Removed {
			gone[r] = true
		}
		for _, r := range p.Added {
			added[r] = true
		}
		if len(gone) != 4 || len(added) != 2 {
			t.Errorf("%s: %d files removed and %d added, want 4 and 2", p.Name, len(gone), len(added))
		}
		if n := len(p.Before) + len(p.After); n != p.Len1 {
			t.Errorf("%s: epoch 1 handed out %d samples, len() %d", p.Name, n, p.Len1)
		}
		for _, q := range p.After {
			if gone[q] || added[q] {
				t.Errorf("%s: epoch 1 handed out %s after the refresh (removed %v, added %v)", p.Name, q, gone[q], added[q])
			}
		}
		// Epoch 2: torch's count over its files (an even number here).
		if want := len(p.Expected2) / p.Ranks; len(p.Epoch2) != p.Len2 || p.Len2 != want {
			t.Errorf("%s: epoch 2 handed out %d samples, len() %d, want %d", p.Name, len(p.Epoch2), p.Len2, want)
		}
		key := strings.Fields(p.Name)[0]
		if epoch2[key] == nil {
			epoch2[key] = map[string]int{}
		}
		for _, q := range p.Epoch2 {
			epoch2[key][q]++
		}
		expected[key] = p.Expected2
	}
	for key, want := range expected {
		for _, f := range want {
			if epoch2[key][f] != 1 {
				t.Errorf("%s: epoch 2 handed out %s %d times, want once", key, f, epoch2[key][f])
			}
		}
		if len(epoch2[key]) != len(want) {
			t.Errorf("%s: epoch 2 handed out %d distinct files, want %d", key, len(epoch2[key]), len(want))
		}
	}
}
