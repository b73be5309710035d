package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/status"
)

// Data-parallel jobs through the real binary: torch.distributed ranks on
// the gloo backend read an ImageFolder in the mount with
// epochfs.DistributedSampler.

// rankLog is what ddp_train.py writes per rank.
type rankLog struct {
	N      int      `json:"n"`
	Len    int      `json:"len"`
	Epochs [][]int  `json:"epochs"`
	Status string   `json:"status"` // the job's, after the rank's last read
	Ranks  []string `json:"ranks"`  // each rank's status then
}

func loadRank(t *testing.T, dir string, r int) rankLog {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank-%d.json", r)))
	if err != nil {
		t.Fatal(err)
	}
	var l rankLog
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// mountWith mounts src at mnt with the binary, a tier of the given quota
// and a config file of cfg, and unmounts at cleanup.
func mountWith(t *testing.T, bin, src, base, quota, cfg string) (mnt string) {
	t.Helper()
	mnt, _ = mountWithUnmount(t, bin, src, base, quota, cfg)
	return mnt
}

// mountWithUnmount is mountWith that also returns the unmount (it runs
// once, at the latest at cleanup).
func mountWithUnmount(t *testing.T, bin, src, base, quota, cfg string) (mnt string, unmount func()) {
	t.Helper()
	mnt = filepath.Join(base, "mnt")
	for _, d := range []string{"mnt", "tier", "state"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(base, "epochfs.toml")
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	state := filepath.Join(base, "state")
	out, err := exec.CommandContext(ctx, bin, "mount", "--config", conf, "--tier", "mem="+filepath.Join(base, "tier")+":"+quota,
		"--state", state, src, mnt).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(state, "epochfs.log"))
		t.Fatalf("epochfs mount: %v: %s\nlog:\n%s", err, out, log)
	}
	pid := 0
	if st, err := readStatus(mnt); err == nil {
		pid, _ = strconv.Atoi(st["pid"])
	}
	var once sync.Once
	unmount = func() { once.Do(func() { unmountBin(t, bin, mnt, state, pid) }) }
	t.Cleanup(unmount)
	return mnt, unmount
}

func unmountBin(t *testing.T, bin, mnt, state string, pid int) {
	{
		var out []byte
		var err error
		for i := 0; i < 20; i++ {
			if out, err = exec.Command(bin, "unmount", mnt).CombinedOutput(); err == nil {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("epochfs unmount: %v: %s", err, out)
			exec.Command(bin, "unmount", "--lazy", mnt).Run()
		}
		if pid > 0 && alive(pid) {
			t.Errorf("daemon pid %d still running after unmount; killing it", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if mounted(t, mnt) {
			t.Errorf("%s is still in /proc/mounts after unmount", mnt)
		}
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(state, "epochfs.log"))
			t.Logf("epochfs.log:\n%s", log)
		}
	}
}

// freePort returns a TCP port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// runRanks runs cmd (already set up) in its own process group, killed at
// cleanup if still running, and waits for it within limit.
func runRanks(t *testing.T, cmd *exec.Cmd, limit time.Duration) (string, error) {
	t.Helper()
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(limit):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("%v did not finish within %v:\n%s", cmd.Args, limit, out.String())
	}
	return "", nil
}

// checkEpoch checks one epoch of every rank: each got share samples, and
// together every one of n samples, total − n of them twice (padding).
func checkEpoch(t *testing.T, what string, shares [][]int, n, share int) {
	t.Helper()
	count := make([]int, n)
	total := 0
	for r, s := range shares {
		if share > 0 && len(s) != share {
			t.Errorf("%s: rank %d got %d samples, want %d", what, r, len(s), share)
		}
		for _, i := range s {
			if i < 0 || i >= n {
				t.Fatalf("%s: rank %d got index %d of %d", what, r, i, n)
			}
			count[i]++
			total++
		}
	}
	extra := 0
	for i, c := range count {
		if c == 0 {
			t.Errorf("%s: sample %d given to no rank", what, i)
		}
		if c > 1 {
			extra += c - 1
		}
	}
	if extra != total-n {
		t.Errorf("%s: %d samples handed out more than once", what, extra)
	}
}

// TestTorchDistributedRanksShareEveryEpochThroughTheMount: torchrun
// --nproc_per_node=2 trains a DistributedDataParallel model (gloo) for two
// epochs with epochfs.DistributedSampler; each rank's samples are logged:
// per epoch each rank has len(sampler) = ceil(61/2) of them, and together
// they are the dataset with one sample twice (torch's padding).
func TestTorchDistributedRanksShareEveryEpochThroughTheMount(t *testing.T) {
	requireFUSE(t)
	requireTorch(t)
	const files, classes = 61, 4
	_, mnt, _, _ := mountedDataset(t, files, classes)
	torchrun, err := exec.LookPath("torchrun")
	if err != nil {
		skipOrFail(t, "no torchrun (Debian's python3-torch ships it): %v", err)
	}
	script, _ := filepath.Abs("ddp_train.py")
	out := t.TempDir()
	// --redirects 1 --tee 1: Debian's torchrun (torch 1.13 under Python
	// 3.11) cannot parse the default "0" (Std.from_str finds no zero flag).
	cmd := exec.Command(torchrun, "--standalone", "--nproc_per_node=2", "--redirects", "1", "--tee", "1", script,
		"--mount", mnt, "--out", out, "--job", "ddp", "--epochs", "2", "--batch", "8", "--train", "--workers", "1")
	logs, err := runRanks(t, cmd, 5*time.Minute)
	if err != nil {
		t.Fatalf("torchrun: %v\n%s", err, logs)
	}
	t.Logf("%s", strings.TrimSpace(logs))
	r0, r1 := loadRank(t, out, 0), loadRank(t, out, 1)
	if r0.N != files || r0.Len != 31 || r1.Len != 31 || len(r0.Epochs) != 2 || len(r1.Epochs) != 2 {
		t.Fatalf("rank logs: n=%d len=%d/%d epochs=%d/%d", r0.N, r0.Len, r1.Len, len(r0.Epochs), len(r1.Epochs))
	}
	for ep := range 2 {
		checkEpoch(t, fmt.Sprintf("epoch %d", ep+1), [][]int{r0.Epochs[ep], r1.Epochs[ep]}, files, 31)
	}
	if fmt.Sprint(r0.Epochs[0]) == fmt.Sprint(r0.Epochs[1]) {
		t.Error("rank 0 got the same order in both epochs")
	}
	st := r0.Status
	kv := status.Parse([]byte(st)).Map()
	if kv["world_size"] != "2" || kv["per_rank"] != "31" || kv["padded"] != "2" || kv["ranks_lost"] != "none" {
		t.Fatalf("job status:\n%s", st)
	}
}

// TestAKilledRanksShareIsFinishedByTheOther: two ranks (gloo, started as
// torchrun would: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); rank 1 is
// killed after 3 samples of epoch 1. Once its lease (2 s) runs out, rank 0
// takes over what it had not read: epoch 1 still covers every sample
// (plus the one padding), the job's status says rank 1 was lost, and rank
// 0 alone reads all of epoch 2.
func TestAKilledRanksShareIsFinishedByTheOther(t *testing.T) {
	requireFUSE(t)
	requireTorch(t)
	const files, classes = 61, 4
	base := t.TempDir()
	bin, src, _, _ := generatedSource(t, base, files, classes)
	mnt := mountWith(t, bin, src, filepath.Join(base, "m"), "1GiB", "[sampler]\nlease = \"2s\"\n")
	script, _ := filepath.Abs("ddp_train.py")
	out := t.TempDir()
	port := freePort(t)
	var cmds []*exec.Cmd
	for r := range 2 {
		args := []string{script, "--mount", mnt, "--out", out, "--job", "lost", "--epochs", "2", "--batch", "1"}
		if r == 1 {
			args = append(args, "--die-after", "3")
		} else {
			args = append(args, "--pace", "0.25")
		}
		cmd := exec.Command(python, args...)
		cmd.Env = append(os.Environ(), "RANK="+strconv.Itoa(r), "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port))
		cmds = append(cmds, cmd)
	}
	res := make(chan error, 1)
	var logs1 string
	go func() {
		var err error
		logs1, err = runRanks(t, cmds[1], 5*time.Minute)
		res <- err
	}()
	logs0, err0 := runRanks(t, cmds[0], 5*time.Minute)
	err1 := <-res
	if ee, ok := err1.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("rank 1 did not die of SIGKILL: %v\n%s", err1, logs1)
	}
	if err0 != nil {
		t.Fatalf("rank 0: %v\n%s", err0, logs0)
	}
	t.Logf("%s", strings.TrimSpace(logs0))
	r0, r1 := loadRank(t, out, 0), loadRank(t, out, 1)
	if len(r1.Epochs) != 1 || len(r1.Epochs[0]) != 3 || len(r0.Epochs) != 2 {
		t.Fatalf("logs: rank 1 %v, rank 0 %d epochs", r1.Epochs, len(r0.Epochs))
	}
	// Epoch 1: rank 1's 3, rank 0 the rest of the 62 (31 each, one padding).
	if got := len(r0.Epochs[0]) + 3; got != 62 {
		t.Errorf("epoch 1: %d samples handed out, want 62", got)
	}
	checkEpoch(t, "epoch 1", [][]int{r0.Epochs[0], r1.Epochs[0]}, files, 0)
	checkEpoch(t, "epoch 2, rank 0 alone", [][]int{r0.Epochs[1]}, files, 62)
	// The status right after rank 0's last read (the job's lease ends 2 s
	// after it).
	if st := r0.Status; !strings.Contains(st, "ranks_lost=1\n") || !strings.Contains(st, "rank_losses=1\n") || !strings.Contains(st, "dropped=0\n") {
		t.Fatalf("job status after rank 1 was killed:\n%s", st)
	}
	if len(r0.Ranks) != 2 || !strings.Contains(r0.Ranks[1], "state=lost\n") {
		t.Fatalf("rank statuses: %q", r0.Ranks)
	}
}
