package mount

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Jobs of several ranks through a real mount: rank directories follow the
// config's world_size, belong to the job's owner, and hand out torch's
// DistributedSampler counts; a rank two epochs ahead waits in its read.

// rankEpoch reads rank r's batches with cat until the 0-byte read.
func rankEpoch(t *testing.T, asUser bool, dir string, r int) []string {
	t.Helper()
	var out []string
	for i := 0; ; i++ {
		code, b := shell(t, asUser, `cat "$1"`, filepath.Join(dir, "rank", fmt.Sprint(r), "next"))
		if code != 0 {
			t.Fatalf("cat rank/%d/next: exit %d: %s", r, code, b)
		}
		if b == "" {
			return out
		}
		out = append(out, strings.Split(strings.TrimSuffix(b, "\n"), "\n")...)
		if i > 1000 {
			t.Fatal("the epoch does not end")
		}
	}
}

func TestRankDirectoriesFollowWorldSizeAndBelongToTheJobsOwner(t *testing.T) {
	src, paths := makeSamples(t, 22, 300)
	e := newEnv(t, src, 1<<20)
	e.opts.bufferBytes = 1 << 20
	openToOthers(e)
	e.mount()
	uid, gid := testUser(t)
	dir := filepath.Join(e.mnt, ".epochfs", "jobs", "ddp")
	// The user registers the job; bash writes the config a line per call.
	if code, out := shell(t, true, `mkdir "$1" && printf 'batch_size=3\nsampler=random\nworld_size=4\n' > "$1/config"`, dir); code != 0 {
		t.Fatalf("the user's mkdir and config: exit %d: %s", code, out)
	}
	if code, out := shell(t, true, `ls "$1/rank" | tr '\n' ' '; ls "$1/rank/2" | tr '\n' ' '`, dir); code != 0 || out != "0 1 2 3 batch next pause state status " {
		t.Fatalf("ls rank, rank/2: exit %d: %q", code, out)
	}
	// Forget the kernel's dentries: ownership comes from the daemon.
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"rank", "rank/0", "rank/3", "rank/3/next", "rank/1/status"} {
		st, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if s := st.Sys().(*syscall.Stat_t); s.Uid != uid || s.Gid != gid {
			t.Errorf("%s owned by %d:%d, want the job's owner %d:%d", p, s.Uid, s.Gid, uid, gid)
		}
	}
	if st, _ := os.Stat(filepath.Join(dir, "rank/3/next")); st.Mode().Perm() != 0o600 {
		t.Errorf("rank/3/next mode %v, want 0600", st.Mode())
	}
	// The job's own next has no batches with four ranks.
	code, out := shell(t, true, `cat "$1/next"`, dir)
	if code == 0 || !strings.Contains(out, "Invalid argument") || !strings.Contains(e.errorsFile(), "rank/R/next") {
		t.Fatalf("cat next of a 4-rank job: exit %d: %q; errors:\n%s", code, out, e.errorsFile())
	}
	for _, p := range []string{"rank/4", "rank/04", "rank/-1", "rank/x"} {
		if _, err := os.Stat(filepath.Join(dir, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stat %s: %v, want ENOENT", p, err)
		}
	}
	// Two epochs: 6 paths per rank (ceil(22/4)), together every path, two
	// of them twice (the padding).
	for ep := 1; ep <= 2; ep++ {
		count := map[string]int{}
		for r := range 4 {
			got := rankEpoch(t, true, dir, r)
			if len(got) != 6 {
				t.Fatalf("epoch %d rank %d: %d paths, want 6", ep, r, len(got))
			}
			for _, p := range got {
				count[p]++
			}
		}
		extra := 0
		for _, p := range paths {
			if count[p] == 0 {
				t.Fatalf("epoch %d: %s not handed out", ep, p)
			}
			extra += count[p] - 1
		}
		if extra != 2 || len(count) != len(paths) {
			t.Fatalf("epoch %d: %d paths handed out twice, %d distinct; want 2 and %d", ep, extra, len(count), len(paths))
		}
	}
	st := kv(mustRead(t, filepath.Join(dir, "status")))
	if st["world_size"] != "4" || st["per_rank"] != "6" || st["padded"] != "4" || st["ranks_lost"] != "none" {
		t.Fatalf("job status: %v", st)
	}
	rs := kv(mustRead(t, filepath.Join(dir, "rank/2/status")))
	if rs["rank"] != "2" || rs["epoch"] != "2" || rs["quota"] != "6" || rs["state"] != "ended" {
		t.Fatalf("rank 2 status: %v", rs)
	}
	// Another user (root's job here) cannot take a rank's batches.
	roots := filepath.Join(e.mnt, ".epochfs", "jobs", "roots")
	if err := os.Mkdir(roots, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(roots, "config"), []byte("world_size=2\n"), 0); err != nil {
		t.Fatal(err)
	}
	if code, out := shell(t, true, `cat "$1/rank/0/next"`, roots); code == 0 || !strings.Contains(out, "Permission denied") {
		t.Fatalf("the user reading root's rank: exit %d: %q", code, out)
	}
	// A config of fewer ranks takes the others' directories away.
	if code, out := shell(t, true, `printf 'world_size=2\ndrop_last=true\n' > "$1/config"`, dir); code != 0 {
		t.Fatalf("world_size=2: exit %d: %s", code, out)
	}
	// An open fails at once; the kernel may keep the entry for a jiffy
	// or two (the shortest entry time there is).
	if _, err := os.Open(filepath.Join(dir, "rank/2/next")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open of rank/2/next after world_size=2: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "rank/2")); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("rank/2 still there 10 s after world_size=2")
		}
	}
	if code, out := shell(t, true, `ls "$1/rank" | tr '\n' ' '`, dir); code != 0 || out != "0 1 " {
		t.Fatalf("ls rank after world_size=2: %q", out)
	}
	if got := append(rankEpoch(t, true, dir, 0), rankEpoch(t, true, dir, 1)...); len(got) != 22 || len(slices.Compact(slices.Sorted(slices.Values(got)))) != 22 {
		t.Fatalf("drop_last over 2 ranks: %d paths", len(got))
	}
	// drop_last over more ranks than files is refused.
	code, out = shell(t, true, `printf 'world_size=23\ndrop_last=true\n' > "$1/config"`, dir)
	if code == 0 || !strings.Contains(e.errorsFile(), "every rank would get none") {
		t.Fatalf("drop_last with 23 ranks over 22 files: exit %d: %q\n%s", code, out, e.errorsFile())
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestARankTwoEpochsAheadWaitsInItsRead: rank 0 ends two epochs while rank
// 1 has not read; its next read waits (the reader is not answered) until
// rank 1 has its share of epoch 1, and a waiting reader can be killed.
func TestARankTwoEpochsAheadWaitsInItsRead(t *testing.T) {
	src, _ := makeSamples(t, 8, 300)
	e := newEnv(t, src, 1<<20)
	e.opts.bufferBytes = 1 << 20
	e.mount()
	dir := filepath.Join(e.mnt, ".epochfs", "jobs", "ahead")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte("batch_size=2\nworld_size=2\n"), 0); err != nil {
		t.Fatal(err)
	}
	rankEpoch(t, false, dir, 0)
	rankEpoch(t, false, dir, 0)
	// A killed waiter goes away at once.
	killed := exec.Command("cat", filepath.Join(dir, "rank/0/next"))
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	waiter := exec.Command("cat", filepath.Join(dir, "rank/0/next"))
	out := &strings.Builder{}
	waiter.Stdout = out
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- waiter.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for kv(mustRead(t, filepath.Join(dir, "rank/0/status")))["state"] != "waiting" {
		if time.Now().After(deadline) {
			t.Fatalf("rank 0's readers are not waiting: %s", mustRead(t, filepath.Join(dir, "rank/0/status")))
		}
		time.Sleep(10 * time.Millisecond)
	}
	killed.Process.Kill()
	kdone := make(chan error, 1)
	go func() { kdone <- killed.Wait() }()
	select {
	case <-kdone:
	case <-time.After(10 * time.Second):
		t.Fatal("a killed reader waiting for the slowest rank did not exit")
	}
	select {
	case err := <-exited:
		t.Fatalf("rank 0 read epoch 3 while rank 1 had not started epoch 1: %v %q", err, out.String())
	default:
	}
	if st := kv(mustRead(t, filepath.Join(dir, "rank/0/status"))); st["epoch"] != "2" || st["state"] != "waiting" {
		t.Fatalf("the waiting rank: %v", st)
	}
	if got := rankEpoch(t, false, dir, 1); len(got) != 4 {
		t.Fatalf("rank 1: %d paths", len(got))
	}
	select {
	case err := <-exited:
		if err != nil || strings.Count(out.String(), "\n") != 2 {
			t.Fatalf("the waiting read: %v %q", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting rank was not let go after rank 1 finished epoch 1")
	}
}

// A refresh that removes and adds files under a running job: from then on
// no rank is handed a removed file (not from batches drawn ahead, not as
// padding), each rank still gets its quota in the epoch running (padding
// stands in for the removed files, so data-parallel ranks keep equal
// counts) and no added file; the next epoch hands out every file left and
// every file added once, and the job's status counts the skips.
func TestARunningJobFollowsARefreshAtItsNextEpoch(t *testing.T) {
	// 6 of 80 files removed: under placement.max_drop (10 %), so the
	// refresh removes them rather than holding them.
	src, paths := makeSamples(t, 80, 300)
	e := newEnv(t, src, 1<<20)
	e.opts.bufferBytes = 1 << 20
	e.mount()
	dir := filepath.Join(e.mnt, ".epochfs", "jobs", "ddp")
	if code, out := shell(t, false, `mkdir "$1" && printf 'batch_size=4\nsampler=ods\nworld_size=2\nseed=5\n' > "$1/config"`, dir); code != 0 {
		t.Fatalf("mkdir and config: exit %d: %s", code, out)
	}
	const quota = 40
	// A batch of each rank, then remove 6 files: the first two handed
	// out and four not yet.
	got := make([][]string, 2)
	for r := range 2 {
		_, b := shell(t, false, `cat "$1"`, filepath.Join(dir, "rank", fmt.Sprint(r), "next"))
		got[r] = strings.Split(strings.TrimSuffix(b, "\n"), "\n")
	}
	handed := map[string]bool{}
	for _, g := range got {
		for _, p := range g {
			handed[p] = true
		}
	}
	removed := []string{got[0][0], got[1][0]}
	for _, p := range paths {
		if len(removed) < 6 && !handed[p] {
			removed = append(removed, p)
		}
	}
	gone := map[string]bool{}
	for _, p := range removed {
		if err := os.Remove(filepath.Join(src, p)); err != nil {
			t.Fatal(err)
		}
		gone[p] = true
	}
	var added []string
	for i := range 4 {
		p := fmt.Sprintf("class%d/new%d.jpg", i%2, i)
		if err := os.WriteFile(filepath.Join(src, p), []byte("new "+p), 0o644); err != nil {
			t.Fatal(err)
		}
		added = append(added, p)
	}
	refresh(t, e.mnt, "all")
	seen := map[string]bool{}
	for p := range handed {
		seen[p] = true
	}
	for r := range 2 {
		rest := rankEpoch(t, false, dir, r)
		if n := len(got[r]) + len(rest); n != quota {
			t.Errorf("epoch 1: rank %d got %d paths, want its quota %d", r, n, quota)
		}
		for _, p := range rest {
			if gone[p] {
				t.Errorf("epoch 1: rank %d was handed %s after the refresh removed it", r, p)
			}
			if slices.Contains(added, p) {
				t.Errorf("epoch 1: rank %d was handed %s, added while the epoch ran", r, p)
			}
			seen[p] = true
		}
	}
	for _, p := range paths {
		if !gone[p] && !seen[p] {
			t.Errorf("epoch 1: %s never handed out", p)
		}
	}
	// The next epoch is over the 74 files left and the 4 added: 39 each,
	// once.
	next := map[string]int{}
	for r := range 2 {
		ep := rankEpoch(t, false, dir, r)
		if len(ep) != (len(paths)-len(removed)+len(added))/2 {
			t.Errorf("epoch 2: rank %d got %d paths, want %d", r, len(ep), (len(paths)-len(removed)+len(added))/2)
		}
		for _, p := range ep {
			if gone[p] {
				t.Errorf("epoch 2: rank %d was handed the removed %s", r, p)
			}
			next[p]++
		}
	}
	for _, p := range append(paths, added...) {
		if !gone[p] && next[p] != 1 {
			t.Errorf("epoch 2: %s handed out %d times, want once", p, next[p])
		}
	}
	st := kv(mustRead(t, filepath.Join(dir, "status")))
	if n, _ := strconv.Atoi(st["skipped"]); n < 4 {
		t.Errorf("job status skipped=%s, want at least the 4 removed files not handed out before", st["skipped"])
	}
}

// TestAPausedRankOutlivesItsLease: with a lease of 1 s, rank 1 of a job
// writes "3" to its pause (bash, as the job's user) and reads nothing
// for 2 s while rank 0 reads: it is not lost (state=paused); a bad pause
// is refused with EINVAL and its reason in errors; once the pause and a
// lease have passed without a read, it is lost.
func TestAPausedRankOutlivesItsLease(t *testing.T) {
	src, _ := makeSamples(t, 400, 300)
	e := newEnv(t, src, 1<<20)
	e.opts.lease = time.Second
	openToOthers(e)
	e.mount()
	dir := filepath.Join(e.mnt, ".epochfs", "jobs", "val")
	code, out := shell(t, true, `set -e
mkdir "$1"
printf 'batch_size=2\nworld_size=2\n' > "$1/config"
cat "$1/rank/0/next" "$1/rank/1/next" >/dev/null
echo 3 > "$1/rank/1/pause"
if echo soon > "$1/rank/1/pause"; then echo "a bad pause was taken"; exit 1; fi
grep '^state=' "$1/rank/1/status"`, dir)
	if code != 0 || !strings.Contains(out, "state=paused") {
		t.Fatalf("pause: exit %d: %s", code, out)
	}
	if errs := e.errorsFile(); !strings.Contains(errs, "pause") || !strings.Contains(errs, "soon") {
		t.Errorf(".epochfs/errors lacks the bad pause:\n%s", errs)
	}
	for range 10 { // 2 s of rank 0 reading
		if _, err := os.ReadFile(filepath.Join(dir, "rank", "0", "next")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st := kv(mustRead(t, filepath.Join(dir, "rank", "1", "status"))); st["state"] != "paused" {
		t.Fatalf("rank 1 during its pause: state=%s, want paused", st["state"])
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.ReadFile(filepath.Join(dir, "rank", "0", "next")); err != nil {
			t.Fatal(err)
		}
		if st := kv(mustRead(t, filepath.Join(dir, "rank", "1", "status"))); st["state"] == "lost" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("rank 1 was never lost after its pause")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
