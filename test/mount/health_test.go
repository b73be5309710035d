package mount

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/test/faultfs"
	"github.com/epochfs/epochfs/test/rediscluster"
)

// TestStatusNeverWaitsOnAHungSource: while the source hangs, in every
// validation mode, status answers at once (read from what the source's
// prober last learnt), says the source is unresponsive and since when, and
// keeps the time of its last answer; once the source answers, it is
// available again.
func TestStatusNeverWaitsOnAHungSource(t *testing.T) {
	for _, mode := range []placement.Validate{placement.ValidateOnce, placement.ValidateOpen, placement.ValidateNever} {
		t.Run(mode.String(), func(t *testing.T) {
			const timeout = 2 * time.Second
			e, f, _ := faultEnv(t, faultfs.Start, mode, timeout)
			f.Hang()
			t.Cleanup(f.Resume)
			hungAt := time.Now()
			var st map[string]string
			for time.Since(hungAt) < 4*timeout+4*time.Second {
				start := time.Now()
				done := make(chan map[string]string, 1)
				go func() { done <- e.status() }()
				select {
				case st = <-done:
				case <-time.After(5 * time.Second): // a liveness bound, not a speed target
					t.Fatalf("status did not answer within 5 s while the source hangs")
				}
				t.Logf("status after %v of hang: %v (source_state=%s)", time.Since(hungAt).Round(time.Millisecond), time.Since(start).Round(time.Millisecond), st["source_state"])
				if st["source_state"] == "unresponsive" {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if st["source_state"] != "unresponsive" || st["source_unavailable_since"] == "" || st["source_last_answer"] == "" {
				t.Fatalf("status during the hang: source_state=%q since=%q last_answer=%q", st["source_state"], st["source_unavailable_since"], st["source_last_answer"])
			}
			f.Resume()
			waitFor(t, func() bool { return e.status()["source_state"] == "available" })
		})
	}
}

// TestACtlReadThatFailsFails: a cluster job's state while the cluster is
// unreachable cannot be made; reading it fails (EIO) with the reason in
// errors, never an empty file a training script would save as its
// checkpoint.
func TestACtlReadThatFailsFails(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	src, _ := makeSamples(t, 12, 2000)
	e := clusterNode(t, rc, src)
	dir := filepath.Join(e.mnt, ".epochfs/jobs/c")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte("batch_size=2\ncluster=true\n"), 0); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "state")); err != nil || len(b) == 0 {
		t.Fatalf("state with the cluster up: %v %q", err, b)
	}
	for i := range 3 {
		rc.Kill(i)
	}
	b, err := os.ReadFile(filepath.Join(dir, "state"))
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("state with the cluster down: %v (%d bytes), want EIO", err, len(b))
	}
	if errs := e.errorsFile(); !strings.Contains(errs, "jobs/c/state") {
		t.Fatalf("errors does not say why: %q", errs)
	}
}

// TestARefreshSurvivesACrash: what a refresh reported (a file removed,
// files added and renamed) is in the catalog on disk when the refresh
// returns: the daemon SIGKILLed right after, the next mount lists what
// the refresh found, not what was there before it.
func TestARefreshSurvivesACrash(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<10)
	state := filepath.Join(base, "state")
	cfg := filepath.Join(base, "c.toml")
	os.WriteFile(cfg, []byte("[placement]\nvalidate = \"open\"\n"), 0o644)
	tierFlag := "--tier=mem=" + filepath.Join(base, "tier") + ":1GiB"
	binMount(t, src, mnt, state, "--config", cfg, tierFlag)
	checkAll(t, src, mnt, paths)
	os.Remove(filepath.Join(src, "a/small.txt"))
	os.WriteFile(filepath.Join(src, "a/added.txt"), []byte("added"), 0o644)
	os.Rename(filepath.Join(src, "empty"), filepath.Join(src, "renamed"))
	code, out := cli(t, "refresh", "--allow-drop", mnt)
	if code != 0 || !strings.Contains(out, "2 added, 2 removed") {
		t.Fatalf("refresh: exit %d: %s", code, out)
	}
	pid, _ := strconv.Atoi(statusOf(t, mnt)["pid"])
	syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, func() bool { return !processAlive(pid) })
	if code, out := cli(t, "unmount", "--lazy", mnt); code != 0 {
		t.Fatalf("unmount of the dead mount: %d %s", code, out)
	}
	binMount(t, src, mnt, state, "--config", cfg, tierFlag)
	for _, p := range []string{"a/small.txt", "empty"} {
		if _, err := os.Stat(filepath.Join(mnt, p)); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("%s, removed by the refresh before the crash: %v", p, err)
		}
	}
	checkAll(t, src, mnt, []string{"a/added.txt", "renamed"})
}

// TestOneSourceBudgetPerRequest: while the source hangs, in every
// validation mode, an open-and-read of a file that is not resident fails
// with EIO within source_timeout (and a second of slack), however many
// source operations it takes (an identity check, a stat, an open, a
// read); a second read of it while the first's operation is still stuck
// fails at once, and says why in errors.
func TestOneSourceBudgetPerRequest(t *testing.T) {
	for _, mode := range []placement.Validate{placement.ValidateOnce, placement.ValidateOpen, placement.ValidateNever} {
		t.Run(mode.String(), func(t *testing.T) {
			const timeout = 2 * time.Second
			e, f, resident := faultEnv(t, faultfs.Start, mode, timeout)
			big := filepath.Join(e.mnt, "big.bin")
			f.Hang()
			t.Cleanup(f.Resume)
			for i := range 2 {
				start := time.Now()
				_, err := os.ReadFile(big)
				took := time.Since(start)
				t.Logf("read %d of a non-resident file during the hang: %v after %v", i, err, took.Round(time.Millisecond))
				if !errors.Is(err, syscall.EIO) {
					t.Fatalf("read %d: %v, want EIO", i, err)
				}
				if took > timeout+time.Second {
					t.Fatalf("read %d took %v: past source_timeout (%v) + 1 s", i, took.Round(time.Millisecond), timeout)
				}
				if i == 1 && took > timeout/2 {
					t.Fatalf("the second read took %v: it started a source operation behind the first's, still stuck", took.Round(time.Millisecond))
				}
			}
			if errs := e.errorsFile(); !strings.Contains(errs, "big.bin") {
				t.Errorf("errors does not say why big.bin failed: %q", errs)
			}
			checkAll(t, e.src, e.mnt, resident)
			f.Resume()
			waitFor(t, func() bool { return e.num("source_stuck") == 0 && e.status()["source_state"] == "available" })
			checkAll(t, e.src, e.mnt, []string{"big.bin"})
		})
	}
}

// TestANewJobSeesTheFilesARefreshAdded: a refresh that replaced every file
// the mount started with (all renamed on the source) leaves a dataset a
// new job can train on: its mkdir succeeds and its batches name the new
// files only. (A new job was refused with "the dataset has no file left":
// found by make chaos.)
func TestANewJobSeesTheFilesARefreshAdded(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<10)
	binMount(t, src, mnt, filepath.Join(base, "state"), "--tier=mem="+filepath.Join(base, "tier")+":1GiB")
	renamed := map[string]bool{}
	for _, p := range paths {
		to := filepath.Join(filepath.Dir(p), "new-"+filepath.Base(p))
		if err := os.Rename(filepath.Join(src, p), filepath.Join(src, to)); err != nil {
			t.Fatal(err)
		}
		renamed[to] = true
	}
	if code, out := cli(t, "refresh", "--allow-drop", mnt); code != 0 {
		t.Fatalf("refresh: exit %d: %s", code, out)
	}
	dir := filepath.Join(mnt, ".epochfs/jobs/after")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("a new job after a refresh replaced every file: %v (errors: %s)", err, statusOfErrors(t, mnt))
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte("batch_size=100\n"), 0); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "next"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != len(paths) {
		t.Fatalf("the first batch names %d files, the dataset has %d: %q", len(lines), len(paths), lines)
	}
	for _, l := range lines {
		if !renamed[l] {
			t.Errorf("the batch names %q, not a file the refresh added", l)
		}
	}
}

// statusOfErrors is the mount's .epochfs/errors.
func statusOfErrors(t *testing.T, mnt string) string {
	b, _ := os.ReadFile(filepath.Join(mnt, ".epochfs/errors"))
	return strings.TrimSpace(string(b))
}
