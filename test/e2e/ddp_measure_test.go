//go:build measure

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMeasureDDPSourceBytes measures what data-parallel jobs take from the
// source per epoch with 20 % of the dataset resident: one 4-rank job, and
// two concurrent 2-rank jobs, with epochfs.DistributedSampler and with
// torch's own DistributedSampler, each run on a fresh mount (same catalog
// and tier, empty buffer), reps times. The ranks of all jobs start their
// first epoch together (EPOCHFS_MEASURE_SKEW=1: as torchrun starts them). Every read drops its page cache, as
// a dataset larger than RAM would. The ratio is source bytes per epoch ÷
// (1 − f) × dataset bytes. Built only with -tags measure (a few minutes);
// EPOCHFS_MEASURE_REPS (default 3), EPOCHFS_MEASURE_FILES (default 400),
// EPOCHFS_MEASURE_BATCH (default 8: the ranks' lookahead windows, 2 batches
// each, must fit the buffer's slots with room to spare).
func TestMeasureDDPSourceBytes(t *testing.T) {
	requireFUSE(t)
	requireTorch(t)
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("1-minute load at the start: %s (of %d cores)", strings.Fields(string(load))[0], numCPU())
	reps := envInt("EPOCHFS_MEASURE_REPS", 3)
	files := envInt("EPOCHFS_MEASURE_FILES", 400)
	batch := envInt("EPOCHFS_MEASURE_BATCH", 8)
	const epochs = 2
	base := t.TempDir()
	bin, src, _, total := generatedSource(t, base, files, 8)
	cfg := fmt.Sprintf("[sampler]\nbuffer = \"%d\"\n", total*2/5)
	quota := strconv.FormatInt(total/5, 10)
	torchrun, err := exec.LookPath("torchrun")
	if err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs("ddp_train.py")

	type setup struct {
		name    string
		sampler string
		jobs    int
		ranks   int
	}
	setups := []setup{
		{"1 job × 4 ranks, epochfs", "epochfs", 1, 4},
		{"1 job × 4 ranks, torch", "torch", 1, 4},
		{"2 jobs × 2 ranks, epochfs", "epochfs", 2, 2},
		{"2 jobs × 2 ranks, torch", "torch", 2, 2},
	}
	ratios := map[string][]float64{}
	for rep := range reps {
		for _, s := range setups {
			mnt, unmount := mountWithUnmount(t, bin, src, filepath.Join(base, "m"), quota, cfg)
			if err := os.WriteFile(filepath.Join(mnt, ".epochfs", "warmup"), []byte("all\n"), 0); err != nil {
				t.Fatal(err)
			}
			st := waitPlaced(t, mnt)
			f := float64(st.int(t, "bytes_resident")) / float64(total)
			before := st.int(t, "source_bytes")
			errs := make(chan error, s.jobs)
			start := time.Now()
			var outs []string
			// Every rank of every job starts its first epoch together, so
			// that the jobs run side by side, as concurrent jobs of equal
			// speed would; EPOCHFS_MEASURE_SKEW=1 lets them start as they
			// come (torchrun's start-up differs by a second or two).
			ready := t.TempDir()
			startArg := []string{"--start", fmt.Sprintf("%s:%d", ready, s.jobs*s.ranks)}
			if os.Getenv("EPOCHFS_MEASURE_SKEW") != "" {
				startArg = nil
			}
			for j := range s.jobs {
				out := t.TempDir()
				outs = append(outs, out)
				cmd := exec.Command(torchrun, "--standalone", "--nproc_per_node="+strconv.Itoa(s.ranks), "--redirects", "1", "--tee", "1",
					script, "--mount", mnt, "--out", out, "--job", fmt.Sprintf("m%d", j), "--epochs", strconv.Itoa(epochs),
					"--batch", strconv.Itoa(batch), "--train", "--uncached", "--sampler", s.sampler, "--seed", strconv.Itoa(7+j))
				cmd.Args = append(cmd.Args, startArg...)
				go func() {
					logs, err := runRanks(t, cmd, 20*time.Minute)
					if err != nil {
						err = fmt.Errorf("%v\n%s", err, logs)
					}
					errs <- err
				}()
			}
			for range s.jobs {
				if err := <-errs; err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
			}
			after := mustStatus(t, mnt)
			used := after.int(t, "source_bytes") - before
			if s.sampler == "epochfs" && testing.Verbose() {
				for j, out := range outs {
					st := strings.Fields(loadRank(t, out, 0).Status)
					t.Logf("job m%d: %s", j, strings.Join(st, " "))
				}
				t.Logf("buffer: fetches=%s hits=%s refused=%s budget=%s", after["buffer_fetches"], after["buffer_hits"], after["buffer_refused"], after["buffer_budget"])
			}
			r := float64(used) / epochs / ((1 - f) * float64(total))
			ratios[s.name] = append(ratios[s.name], r)
			t.Logf("run %d, %s: f=%.3f, %d source bytes in %d epochs (%.1f s): %.2f × (1 − f) × dataset per epoch",
				rep+1, s.name, f, used, epochs, time.Since(start).Seconds(), r)
			unmount()
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d files, %d bytes, tier 20 %%, buffer 40 %%, batch %d, %d epochs per run, %d runs:\n", files, total, batch, epochs, reps)
	for _, s := range setups {
		v := slices.Clone(ratios[s.name])
		slices.Sort(v)
		fmt.Fprintf(&b, "| %s | median %.2f | min %.2f | max %.2f | runs %v |\n", s.name, v[len(v)/2], v[0], v[len(v)-1], fmtRatios(ratios[s.name]))
	}
	t.Logf("source bytes per epoch ÷ (1 − f) × dataset:\n%s", b.String())
	med := func(name string) float64 { v := slices.Sorted(slices.Values(ratios[name])); return v[len(v)/2] }
	if med("2 jobs × 2 ranks, epochfs") >= med("2 jobs × 2 ranks, torch") {
		t.Errorf("two jobs with epochfs.DistributedSampler took no less from the source than with torch's")
	}
}

func fmtRatios(v []float64) string {
	s := make([]string, len(v))
	for i, r := range v {
		s[i] = strconv.FormatFloat(r, 'f', 2, 64)
	}
	return strings.Join(s, " ")
}

func envInt(k string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(k)); err == nil && n > 0 {
		return n
	}
	return def
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "processor\t:")
}
