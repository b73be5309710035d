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

// TestTorchSamplerFromNextCoversEverySampleOncePerEpoch trains two epochs
// through the mount with docs/examples/epochfs_sampler.py driving an
// unmodified ImageFolder, and checks that each epoch delivers every sample
// exactly once.
func TestTorchSamplerFromNextCoversEverySampleOncePerEpoch(t *testing.T) {
	requireFUSE(t)
	requireTorch(t)
	const files, classes = 120, 4
	_, mnt, _, total := mountedDataset(t, files, classes)

	examples, err := filepath.Abs("../../docs/examples")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "epochs.json")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "sampler_train.py", "--mount", mnt, "--examples", examples, "--out", out, "--epochs", "2")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sampler_train.py: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		N      int     `json:"n"`
		Epochs [][]int `json:"epochs"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if res.N != files || len(res.Epochs) != 2 {
		t.Fatalf("dataset of %d samples, %d epochs; want %d and 2", res.N, len(res.Epochs), files)
	}
	for e, ep := range res.Epochs {
		count := make([]int, res.N)
		for _, i := range ep {
			if i < 0 || i >= res.N {
				t.Fatalf("epoch %d: index %d out of range", e+1, i)
			}
			count[i]++
		}
		for i, c := range count {
			if c != 1 {
				t.Fatalf("epoch %d: sample %d delivered %d times, want once", e+1, i, c)
			}
		}
	}
	if equalInts(res.Epochs[0], res.Epochs[1]) {
		t.Fatal("both epochs in the same order")
	}
	st := mustStatus(t, mnt)
	jobStatus, _ := os.ReadFile(filepath.Join(mnt, ".epochfs", "jobs", "e2e-train", "status"))
	t.Logf("jobs=%s; job status: %s", st["jobs"], strings.ReplaceAll(strings.TrimSpace(string(jobStatus)), "\n", " "))
	// The tier has room for the dataset: prefetches place files in it
	// rather than in RAM, so each file crosses the source once.
	if got := st.int(t, "source_bytes"); got > total {
		t.Errorf("source_bytes=%d over two epochs, want at most the dataset's %d", got, total)
	}
	if !strings.Contains(string(jobStatus), "epoch=2\n") {
		t.Fatalf("job status after two epochs:\n%s", jobStatus)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
