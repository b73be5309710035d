package mount

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/status"
	"golang.org/x/sys/unix"
)

// makeSamples writes n files of size bytes in four class directories.
func makeSamples(t *testing.T, n int, size int) (string, []string) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	var paths []string
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("class%d/img%04d.jpg", i%4, i)
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, size)
		rand.Read(b)
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return src, paths
}

// warm places what fits the tiers (the rest is marked as fitting no tier)
// and waits until placement settles.
func (e *env) warm() {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.mnt, ".epochfs", "warmup"), []byte("all\n"), 0); err != nil {
		e.t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		w, _ := os.ReadFile(filepath.Join(e.mnt, ".epochfs", "warmup"))
		kv := status.Parse(w)
		if e.p.Stats().Queued == 0 && kv.IntOf("queued") > 0 && kv.IntOf("done")+kv.IntOf("skipped") == kv.IntOf("queued") {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("warmup not done after 60s: %s %+v", w, e.p.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runJob registers a job, configures it, and reads one epoch: each batch
// from next, then each of its files through the mount (dropping the
// kernel's cached pages after, as a dataset larger than RAM would). It
// returns the paths in read order.
func runJob(e *env, name, config string, want map[string][]byte) ([]string, error) {
	dir := filepath.Join(e.mnt, ".epochfs", "jobs", name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(config), 0); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return readJobEpoch(e, dir, want)
}

// readJobEpoch reads the next epoch of the job at dir as runJob does.
func readJobEpoch(e *env, dir string, want map[string][]byte) ([]string, error) {
	var got []string
	for i := 0; ; i++ {
		b, err := os.ReadFile(filepath.Join(dir, "next"))
		if err != nil {
			return nil, fmt.Errorf("next: %w", err)
		}
		if len(b) == 0 {
			return got, nil
		}
		// The training step: gives the prefetcher a moment, as a GPU
		// step would (pacing only; nothing is timed).
		time.Sleep(2 * time.Millisecond)
		if i > 100000 {
			return nil, errors.New("epoch does not end")
		}
		for _, p := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			f, err := os.Open(filepath.Join(e.mnt, p))
			if err != nil {
				return nil, err
			}
			data, err := readAll(f)
			unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", p, err)
			}
			if !bytes.Equal(data, want[p]) {
				return nil, fmt.Errorf("%s: %d bytes through the mount differ from the source", p, len(data))
			}
			got = append(got, p)
		}
	}
}

// sharedEpoch runs three concurrent jobs of one sampler kind over a tree
// whose tier holds 20 % of it and returns source bytes for the epoch ÷
// (1 − f) × dataset bytes.
func sharedEpoch(t *testing.T, kind string) float64 {
	const n, size = 600, 16 << 10
	src, paths := makeSamples(t, n, size)
	total := int64(n * size)
	e := newEnv(t, src, total/5)
	e.opts.bufferBytes = total * 2 / 5
	e.mount()
	e.warm()
	resident := e.num("bytes_resident")
	f := float64(resident) / float64(total)
	if f < 0.15 || f > 0.21 {
		t.Fatalf("resident fraction %.3f after warmup, want about 0.2", f)
	}
	want := map[string][]byte{}
	for _, p := range paths {
		want[p], _ = os.ReadFile(filepath.Join(src, p))
	}
	before := e.num("source_bytes")
	var wg sync.WaitGroup
	results := make([][]string, 3)
	errs := make([]error, 3)
	for j := 0; j < 3; j++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := fmt.Sprintf("batch_size=8\nseed=%d\nsampler=%s\n", j+1, kind)
			results[j], errs[j] = runJob(e, fmt.Sprintf("j%d", j), cfg, want)
		}()
	}
	wg.Wait()
	for j, err := range errs {
		if err != nil {
			t.Fatalf("%s job %d: %v", kind, j, err)
		}
		got := slices.Clone(results[j])
		slices.Sort(got)
		if !slices.Equal(got, paths) {
			t.Fatalf("%s job %d: its epoch of %d paths is not a permutation of the %d files", kind, j, len(got), len(paths))
		}
		if slices.Equal(results[j], paths) {
			t.Fatalf("%s job %d: epoch in path order", kind, j)
		}
	}
	used := e.num("source_bytes") - before
	ratio := float64(used) / ((1 - f) * float64(total))
	st, _ := os.ReadFile(filepath.Join(e.mnt, ".epochfs", "jobs", "j0", "status"))
	t.Logf("sampler=%s: 3 jobs, f=%.3f, source_bytes for the epoch %d = %.2f × (1 − f) × dataset; buffer_fetches=%d buffer_hits=%d buffer_refused=%d; j0 status: %s",
		kind, f, used, ratio, e.num("buffer_fetches"), e.num("buffer_hits"), e.num("buffer_refused"), strings.ReplaceAll(strings.TrimSpace(string(st)), "\n", " "))
	t.Logf("sampler buffer stats: %+v", e.jm.Sampler().Stats())
	if e.num("jobs") != 3 {
		t.Fatalf("status jobs=%d, want 3", e.num("jobs"))
	}
	if b, bud := e.num("buffer_bytes"), e.num("buffer_budget"); b > bud {
		t.Fatalf("buffer_bytes %d over the budget %d", b, bud)
	}
	return ratio
}

func TestThreeConcurrentJobsShareSourceFetches(t *testing.T) {
	ods := sharedEpoch(t, "ods")
	random := sharedEpoch(t, "random")
	t.Logf("source bytes ÷ (1 − f) × dataset: ods %.2f, random %.2f (target ods ≤ 1.2, random ≈ 3)", ods, random)
	if ods >= 2.0 {
		t.Errorf("ods: %.2f × (1 − f) × dataset from the source, want < 2", ods)
	}
	if random <= ods {
		t.Errorf("random (%.2f) should take more from the source than ods (%.2f)", random, ods)
	}
}

func TestJobsCtlFilesRejectBadInput(t *testing.T) {
	src, paths := makeSamples(t, 20, 1000)
	e := newEnv(t, src, 1<<20)
	e.opts.bufferBytes = 1 << 20
	e.mount()
	jobsDir := filepath.Join(e.mnt, ".epochfs", "jobs")
	errorsFile := filepath.Join(e.mnt, ".epochfs", "errors")
	if st, err := os.Stat(jobsDir); err != nil || st.Mode()&os.ModeSticky == 0 || st.Mode().Perm() != 0o777 {
		t.Fatalf("jobs dir: %v %v, want a sticky 0777 directory", st, err)
	}
	for _, name := range []string{"a b", "x:y", strings.Repeat("n", 65)} {
		if err := os.Mkdir(filepath.Join(jobsDir, name), 0o755); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("mkdir %q: %v, want EINVAL", name, err)
		}
	}
	if err := os.Mkdir(filepath.Join(jobsDir, ".."), 0o755); err == nil {
		t.Error("mkdir jobs/.. succeeded")
	}
	if err := os.Mkdir(filepath.Join(jobsDir, "a", "b"), 0o755); err == nil {
		t.Error("mkdir jobs/a/b succeeded")
	}
	errs, _ := os.ReadFile(errorsFile)
	if !strings.Contains(string(errs), "job name") {
		t.Errorf(".epochfs/errors lacks the bad name's reason:\n%s", errs)
	}
	dir := filepath.Join(jobsDir, "j")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("second mkdir: %v, want EEXIST", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte("batch_size=7\nseed=3\nsampler=sequential\n"), 0); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(filepath.Join(dir, "config"))
	for _, bad := range []string{"colour=blue\n", "batch_size=0\n", "batch_size=-2\n", "subset=nothing/here\n", "sampler=lru\n"} {
		err := os.WriteFile(filepath.Join(dir, "config"), []byte(bad), 0)
		if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("config %q: %v, want EINVAL", bad, err)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "config")); !bytes.Equal(got, good) {
			t.Fatalf("config %q changed the config to %q", bad, got)
		}
		key, _, _ := strings.Cut(strings.TrimSpace(bad), "=")
		if errs, _ := os.ReadFile(errorsFile); !strings.Contains(string(errs), key) {
			t.Errorf(".epochfs/errors lacks the reason for %q:\n%s", bad, errs)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "next"), []byte("x\n"), 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("write to next: %v, want EINVAL", err)
	}
	if errs, _ := os.ReadFile(errorsFile); !strings.Contains(string(errs), "next") {
		t.Errorf(".epochfs/errors lacks the next write:\n%s", errs)
	}
	// Nothing changed: the sequential job still starts at the first file.
	b, err := os.ReadFile(filepath.Join(dir, "next"))
	if err != nil || string(b) != strings.Join(paths[:7], "\n")+"\n" {
		t.Fatalf("first batch %q, %v; want the first 7 paths", b, err)
	}
	// A read at a later offset continues the batch; the next read at 0
	// takes the next batch.
	f, err := os.Open(filepath.Join(dir, "next"))
	if err != nil {
		t.Fatal(err)
	}
	part := make([]byte, 5)
	if n, _ := f.Read(part); n != 5 || string(part) != paths[7][:5] {
		t.Fatalf("partial read %q", part[:n])
	}
	rest, _ := readAll(f)
	f.Close()
	if string(part)+string(rest) != strings.Join(paths[7:14], "\n")+"\n" {
		t.Fatalf("second batch %q", string(part)+string(rest))
	}
	b, _ = os.ReadFile(filepath.Join(dir, "next"))
	if string(b) != strings.Join(paths[14:20], "\n")+"\n" {
		t.Fatalf("last batch %q", b)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "next")); err != nil || len(b) != 0 {
		t.Fatalf("end of epoch: %q %v, want 0 bytes once", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "next")); !strings.HasPrefix(string(b), paths[0]+"\n") {
		t.Fatalf("epoch 2 starts with %q", b)
	}
	st, _ := os.ReadFile(filepath.Join(dir, "status"))
	for _, k := range []string{"epoch=2\n", "position=7\n", "buffer_reads=", "source_reads=", "substitutions="} {
		if !strings.Contains(string(st), k) {
			t.Errorf("status lacks %q:\n%s", k, st)
		}
	}
	ents, err := os.ReadDir(jobsDir)
	if err != nil || len(ents) != 1 || ents[0].Name() != "j" {
		t.Fatalf("readdir jobs: %v %v", ents, err)
	}
	if _, err := os.Stat(filepath.Join(jobsDir, "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat of an unknown job: %v", err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("job dir after rmdir: %v", err)
	}
	if n, _ := strconv.Atoi(e.status()["jobs"]); n != 0 {
		t.Fatalf("status jobs=%d after rmdir", n)
	}
	// The name can be registered again.
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestJobsBelongToTheUserWhoMadeThem: on a node shared by several users, a
// job's config, batches and directory are its owner's; others may read its
// config and status. The ownership outlives the kernel's inode cache.
func TestJobsBelongToTheUserWhoMadeThem(t *testing.T) {
	src, _ := makeSamples(t, 12, 1000)
	e := newEnv(t, src, 1<<20)
	e.opts.bufferBytes = 1 << 20
	for d := filepath.Dir(e.mnt); d != "/" && d != "/tmp"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // let the other user reach the mount point
	}
	e.mount()
	uid, gid := testUser(t)
	jobs := filepath.Join(e.mnt, ".epochfs", "jobs")
	// as runs a shell command as the unprivileged user.
	as := func(script string) (string, error) {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	mine := filepath.Join(jobs, "users-job")
	if out, err := as(fmt.Sprintf("mkdir %s && printf 'batch_size=3\\nsampler=sequential\\n' > %s/config && head -n 3 %s/next", mine, mine, mine)); err != nil || strings.Count(out, "\n") != 2 {
		t.Fatalf("the user cannot run their own job: %v: %q", err, out)
	}
	// Forget the kernel's dentries and inodes: the next lookups come from
	// the daemon, which must still know the owner.
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"", "config", "next", "status"} {
		st, err := os.Stat(filepath.Join(mine, f))
		if err != nil {
			t.Fatal(err)
		}
		if s := st.Sys().(*syscall.Stat_t); s.Uid != uid || s.Gid != gid {
			t.Errorf("jobs/users-job/%s owned by %d:%d, want %d:%d", f, s.Uid, s.Gid, uid, gid)
		}
	}

	roots := filepath.Join(jobs, "roots-job")
	if err := os.Mkdir(roots, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(roots, "config"), []byte("batch_size=4\nsampler=sequential\n"), 0); err != nil {
		t.Fatal(err)
	}
	// A job's config names its subset, its status how many files its
	// owner sees under it: neither is another user's to read.
	for _, script := range []string{
		"printf 'batch_size=1\\n' > " + roots + "/config",
		"cat " + roots + "/next",
		"rmdir " + roots,
		"cat " + roots + "/config",
		"cat " + roots + "/status",
		"cat " + roots + "/rank/0/status",
	} {
		if out, err := as(script); err == nil || !strings.Contains(out, "Permission denied") && !strings.Contains(out, "Operation not permitted") {
			t.Errorf("another user's %q: %v: %q, want a permission error", script, err, out)
		}
	}
	if out, err := as("cat " + mine + "/config " + mine + "/status"); err != nil || !strings.Contains(out, "batch_size=3") || !strings.Contains(out, "epoch=") {
		t.Errorf("the user cannot read their own job's config and status: %v: %q", err, out)
	}
	// Root's job is untouched: its first batch is still the first 4 paths.
	b, err := os.ReadFile(filepath.Join(roots, "next"))
	if err != nil || strings.Count(string(b), "\n") != 4 {
		t.Fatalf("root's first batch %q, %v", b, err)
	}
	if out, err := as("rmdir " + mine); err != nil {
		t.Fatalf("the user cannot end their own job: %v: %q", err, out)
	}
}
