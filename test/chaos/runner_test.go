package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/mounts"
	"github.com/epochfs/epochfs/internal/status"
	"github.com/epochfs/epochfs/test/faultfs"
)

// sourceTimeout is the mounts' placement.source_timeout: short, so that a
// fault costs little time and the harness runs many steps.
const sourceTimeout = time.Second

// slack is what a noisy shared machine may add to a deadline.
const slack = 3 * time.Second

// runner is one run: a source (a faultfs over a real directory), a mount
// of it by the epochfs binary, the model, and the steps so far.
type runner struct {
	t        testing.TB
	rng      *rand.Rand
	m        *model
	base     string
	src      string // the real directory behind the faultfs
	f        *faultfs.FS
	mnt      string
	tierDir  string
	tierFS   string // a small tmpfs holding tierDir, which fill fills
	filled   bool
	args     []string // the mount command
	epoch    time.Time
	step     int
	ops      []op
	held     []*heldFile
	jobs     map[int64]bool
	slowOn   bool
	counts   map[string]int
	closed   bool
	hangedOp string // an operation that outlived its deadline (the run cannot go on)
}

type heldFile struct {
	f    *os.File
	path string
}

// newRunner makes a dataset of 40 files, a faultfs over it and a mount.
func newRunner(t testing.TB, seed uint64, validate string) *runner {
	base, err := os.MkdirTemp("", "epochfs-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{t: t, rng: rand.New(rand.NewPCG(seed, 0xc4a05)), base: base, src: filepath.Join(base, "src"),
		mnt: filepath.Join(base, "mnt"), tierFS: filepath.Join(base, "tierfs"), jobs: map[int64]bool{},
		m: newModel(validate, 3*time.Second+2*sourceTimeout), epoch: time.Unix(1.7e9, 0), counts: map[string]int{}}
	// The second user (exec_test.go: userRead) reaches the mount.
	os.Chmod(base, 0o755)
	os.MkdirAll(r.mnt, 0o755)
	// The tier's own file system, small enough to fill (faults_test.go).
	r.tierDir = filepath.Join(r.tierFS, "tier")
	os.Mkdir(r.tierFS, 0o700)
	if err := syscall.Mount("tmpfs", r.tierFS, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=4m,mode=0700"); err != nil {
		os.RemoveAll(base)
		t.Fatalf("a tmpfs for the tier: %v", err)
	}
	for _, d := range baseDirs {
		os.MkdirAll(filepath.Join(r.src, d), 0o755)
	}
	gen := rand.New(rand.NewPCG(seed, 1))
	for i := range 40 {
		o := op{Kind: "add", Path: fmt.Sprintf("%s/f%02d.bin", baseDirs[i%len(baseDirs)], i), Arg: fileSize(gen), To: fmt.Sprint(gen.Int64())}
		if err := r.mutate(o); err != nil {
			t.Fatal(err)
		}
	}
	r.f = faultfs.Start(t, r.src)
	cfg := filepath.Join(base, "c.toml")
	// Half the seeds walk names first (placement.walk): odd ones.
	walk := [...]string{"stat", "names"}[seed%2]
	os.WriteFile(cfg, []byte(fmt.Sprintf("[placement]\nvalidate = %q\nsource_timeout = %q\nfill_after = 0\nwalk = %q\n",
		validate, sourceTimeout, walk)), 0o644)
	r.args = []string{"mount", "--state", filepath.Join(base, "state"), "--config", cfg,
		"--tier=mem=" + r.tierDir + ":1MiB", r.f.Mnt(), r.mnt}
	if code, out := r.cli(30*time.Second, r.args...); code != 0 {
		r.close()
		t.Fatalf("mount: exit %d: %s", code, out)
	}
	if want := os.Getenv("EPOCHFS_TEST_TRANSPORT"); want != "" {
		if got := r.status()["transport"]; got != want {
			r.close()
			t.Fatalf("the mount's transport is %q, and this run is for %q", got, want)
		}
	}
	// The first walk (or a remount's load): the model's files are the
	// catalog's.
	deadline := time.Now().Add(60 * time.Second)
	for st := r.status()["catalog"]; (st == "walking" || st == "loading") && time.Now().Before(deadline); st = r.status()["catalog"] {
		time.Sleep(20 * time.Millisecond)
	}
	return r
}

// daemonLog returns the last n lines of the daemon's log that warn, fail,
// or tell of a mount, a refresh or a removal (the mounts since the run
// began: crashes append to it), for the report of a failure.
func (r *runner) daemonLog(n int) string {
	data, err := os.ReadFile(filepath.Join(r.base, "state", "epochfs.log"))
	if err != nil {
		return err.Error()
	}
	var keep []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `"level":"warn"`) || strings.Contains(line, `"level":"error"`) ||
			strings.Contains(line, "\tWARN\t") || strings.Contains(line, "\tERROR\t") ||
			strings.Contains(line, "refresh") || strings.Contains(line, "remov") || strings.Contains(line, "mount") {
			keep = append(keep, line)
		}
	}
	keep = keep[max(0, len(keep)-n):]
	return strings.Join(keep, "\n")
}

// cli runs the epochfs binary, bounded by limit.
func (r *runner) cli(limit time.Duration, args ...string) (int, string) {
	cmd := exec.Command(binPath, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return -1, err.Error()
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return code, out.String()
	case <-time.After(limit):
		// Its goroutines' stacks, for the report, then the end.
		cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		return -2, fmt.Sprintf("no exit within %v: %s", limit, out.String())
	}
}

// within runs fn, giving up (and marking the run hung) after limit.
func (r *runner) within(limit time.Duration, what string, fn func()) bool {
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(limit):
		r.hangedOp = what
		return false
	}
}

// status reads .epochfs/status (nil when it fails or hangs).
func (r *runner) status() map[string]string {
	var b []byte
	var err error
	if !r.within(slack, "status", func() { b, err = os.ReadFile(filepath.Join(r.mnt, ".epochfs/status")) }) || err != nil {
		return nil
	}
	st := status.Parse(b).Map()
	return st
}

// close unmounts, ends the source and removes the run's directories.
func (r *runner) close() {
	if r.closed {
		return
	}
	r.closed = true
	for _, h := range r.held {
		h.f.Close()
	}
	r.held = nil
	// The source well first: a hung one must not hold the unmount.
	r.fault(op{Kind: "heal"})
	r.cli(60*time.Second, "unmount", "--lazy", r.mnt)
	r.f.Close()
	if err := syscall.Unmount(r.tierFS, syscall.MNT_DETACH); err != nil {
		r.t.Errorf("unmount the tier's tmpfs: %v", err)
	}
	os.RemoveAll(r.base)
}

// readWhole opens p and reads it to the end with pread.
func readWhole(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []byte
	buf := make([]byte, 512<<10)
	for {
		n, err := f.ReadAt(buf, int64(len(out)))
		out = append(out, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// pread reads n bytes at off of p (fewer at the end).
func pread(p string, off int64, n int) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return buf[:got], err
}

// readLimit bounds an operation that may need the source: each system
// call gets source_timeout, and a few calls make a read.
func readLimit() time.Duration { return 3*sourceTimeout + slack }

// syscallErr strips the path from an *os.PathError for the model.
func syscallErr(err error) error {
	if err == nil {
		return nil
	}
	if e := errno(err); e != 0 {
		return e
	}
	return err
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// killDaemon SIGKILLs the mount's daemon and waits until it runs no more
// (a thread of it may stay blocked in a request a stopped source took:
// mounts.ProcRunning says when the rest is gone).
func killDaemon(pid int) error {
	start := mounts.ProcStart(pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	for range 500 {
		if !mounts.ProcRunning(pid, start) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("pid %d runs 5 s after SIGKILL", pid)
}
