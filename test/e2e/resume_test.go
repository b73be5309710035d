package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stepLog is one rank's log of docs/examples/train_resumable.py: the
// samples of each step, and the step it resumed from (-1: none).
type stepLog struct {
	resume int
	steps  []stepLine
}

type stepLine struct {
	epoch, step int
	idx         []int
}

func readStepLog(t *testing.T, path string) stepLog {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := stepLog{resume: -1}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 2 && fs[0] == "resume" {
			l.resume, _ = strconv.Atoi(fs[1])
			continue
		}
		if len(fs) != 3 {
			continue // a line cut by the kill
		}
		var s stepLine
		s.epoch, _ = strconv.Atoi(fs[0])
		s.step, _ = strconv.Atoi(fs[1])
		for _, v := range strings.Split(fs[2], ",") {
			i, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %q", path, sc.Text())
			}
			s.idx = append(s.idx, i)
		}
		l.steps = append(l.steps, s)
	}
	return l
}

// TestATrainingKilledMidEpochResumesWithAnotherWorldSizeOnAFreshMount:
// the resumable example trains with 2 ranks (gloo), checkpointing every 3
// steps, and is SIGKILLed mid-epoch; started again with 3 ranks on a fresh
// mount of the same files (another state directory: the daemon knows
// nothing of the job), it loads the checkpoint and finishes the epoch:
// what the first run trained on up to the checkpoint and what the second
// trained on in that epoch hold every sample once, apart from torch's
// padding, with equal counts on the new ranks; the next epoch is whole.
func TestATrainingKilledMidEpochResumesWithAnotherWorldSizeOnAFreshMount(t *testing.T) {
	requireFUSE(t)
	requireTorch(t)
	const files, classes = 80, 4
	base := t.TempDir()
	bin, src, _, _ := generatedSource(t, base, files, classes)
	mnt1, unmount1 := mountWithUnmount(t, bin, src, filepath.Join(base, "m1"), "1GiB", "")
	example, _ := filepath.Abs("../../docs/examples/train_resumable.py")
	pkg, _ := filepath.Abs("../../python")
	ckpt := filepath.Join(base, "ckpt.pt")
	logs := []string{filepath.Join(base, "log1"), filepath.Join(base, "log2")}
	for _, d := range logs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	start := func(mnt string, rank, world, port int, log string, extra ...string) *exec.Cmd {
		args := append([]string{example, mnt, "--job", "resumable", "--ckpt", ckpt, "--every", "3", "--epochs", "2",
			"--batch-size", "4", "--workers", "1", "--log", log}, extra...)
		cmd := exec.Command(python, args...)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+pkg, "RANK="+strconv.Itoa(rank), "WORLD_SIZE="+strconv.Itoa(world),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port))
		return cmd
	}

	// Run 1: 2 ranks, killed once rank 0 trained past its second checkpoint.
	port := freePort(t)
	var run1 []*exec.Cmd
	var out1 [2]syncBuffer
	for r := range 2 {
		cmd := start(mnt1, r, 2, port, logs[0], "--pace", "0.2")
		cmd.Stdout, cmd.Stderr = &out1[r], &out1[r]
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		run1 = append(run1, cmd)
	}
	kill := func() {
		for _, c := range run1 {
			syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
	}
	t.Cleanup(kill)
	deadline := time.Now().Add(4 * time.Minute)
	for {
		data, _ := os.ReadFile(filepath.Join(logs[0], "rank-0.log"))
		if strings.Contains(string(data), "\n1 8 ") {
			break
		}
		if time.Now().After(deadline) {
			kill()
			t.Fatalf("run 1 did not reach step 8:\n%s\n%s", out1[0].String(), out1[1].String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	kill()
	for r, c := range run1 {
		err := c.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("rank %d of run 1 did not die of SIGKILL: %v\n%s", r, err, out1[r].String())
		}
	}
	unmount1()

	// Run 2: 3 ranks on a fresh mount.
	mnt2 := mountWith(t, bin, src, filepath.Join(base, "m2"), "1GiB", "")
	port = freePort(t)
	var run2 []*exec.Cmd
	for r := range 3 {
		run2 = append(run2, start(mnt2, r, 3, port, logs[1]))
	}
	res := make(chan string, 3)
	for r := 1; r < 3; r++ {
		go func() {
			out, err := runRanks(t, run2[r], 5*time.Minute)
			if err != nil {
				out = fmt.Sprintf("rank %d: %v\n%s", r, err, out)
			} else {
				out = ""
			}
			res <- out
		}()
	}
	out, err := runRanks(t, run2[0], 5*time.Minute)
	if err != nil {
		t.Fatalf("run 2 rank 0: %v\n%s", err, out)
	}
	for range 2 {
		if msg := <-res; msg != "" {
			t.Fatal(msg)
		}
	}
	t.Logf("run 2:\n%s", strings.TrimSpace(out))

	var one, two [][]stepLine
	for r := range 2 {
		one = append(one, readStepLog(t, filepath.Join(logs[0], fmt.Sprintf("rank-%d.log", r))).steps)
	}
	g := -1
	for r := range 3 {
		l := readStepLog(t, filepath.Join(logs[1], fmt.Sprintf("rank-%d.log", r)))
		if r == 0 {
			g = l.resume
		} else if l.resume != g {
			t.Fatalf("rank %d resumed from step %d, rank 0 from %d", r, l.resume, g)
		}
		two = append(two, l.steps)
	}
	if g < 3 || g%3 != 0 {
		t.Fatalf("run 2 resumed from step %d, want a checkpoint of run 1 (every 3 steps)", g)
	}
	count := make([]int, files)
	trained := 0
	for _, steps := range one {
		last := 0
		for _, s := range steps {
			last = max(last, s.step)
			if s.step <= g {
				if s.epoch != 1 {
					t.Fatalf("run 1 reached epoch %d by step %d", s.epoch, s.step)
				}
				for _, i := range s.idx {
					count[i]++
					trained++
				}
			}
		}
		if last <= g {
			t.Fatalf("run 1 was killed at step %d, not after its checkpoint %d: the test shows nothing", last, g)
		}
	}
	perRank := make([]int, 3)
	for r, steps := range two {
		for _, s := range steps {
			if s.epoch == 1 {
				perRank[r] += len(s.idx)
				for _, i := range s.idx {
					count[i]++
				}
			}
		}
	}
	if perRank[0] != perRank[1] || perRank[1] != perRank[2] {
		t.Fatalf("the resumed ranks trained on %v samples of epoch 1: want equal counts", perRank)
	}
	left := files - trained
	if want := (left + 2) / 3; perRank[0] != want {
		t.Fatalf("each resumed rank trained on %d samples of epoch 1, want ceil(%d/3) = %d", perRank[0], left, want)
	}
	repeats := 0
	for i, c := range count {
		if c == 0 {
			t.Fatalf("sample %d was never trained on in the interrupted epoch", i)
		}
		repeats += c - 1
	}
	if pad := 3*perRank[0] - left; repeats != pad {
		t.Fatalf("epoch 1: %d samples trained on twice, want torch's padding %d", repeats, pad)
	}
	var next [][]int
	for _, steps := range two {
		var idx []int
		for _, s := range steps {
			if s.epoch == 2 {
				idx = append(idx, s.idx...)
			}
		}
		next = append(next, idx)
	}
	checkEpoch(t, "epoch 2 after the resumed one", next, files, 27)
}
