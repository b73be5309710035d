package mount

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestAJobResumesItsEpochOnARemountWithAnotherWorldSize drives state and
// resume as a job script would, in bash, as an unprivileged user: a job of
// 2 ranks reads part of an epoch, its state is saved, the mount goes and
// comes back (the daemon remembers nothing of the job), and a job of 3
// ranks resumed from the state finishes the epoch: every file once across
// both, apart from torch's padding. A truncated or forged state is refused
// with EINVAL and its reason in .epochfs/errors; another user can neither
// read the job's state nor write its resume.
func TestAJobResumesItsEpochOnARemountWithAnotherWorldSize(t *testing.T) {
	src, paths := makeSamples(t, 61, 500)
	e := newEnv(t, src, 1<<20)
	openToOthers(e)
	e.mount()
	out := t.TempDir()
	os.Chmod(out, 0o777)
	code, msg := shell(t, true, `set -e
J=$1/.epochfs/jobs
mkdir $J/a
printf 'batch_size=4\nseed=5\nworld_size=2\n' > $J/a/config
for i in 1 2 3 4; do cat $J/a/rank/0/next; cat $J/a/rank/1/next; done > $2/seen
cat $J/a/state > $2/state
cmp $2/state $J/a/rank/1/state
find $J/a -name state -printf '%s\n' | head -1 > $2/size
`, e.mnt, out)
	if code != 0 {
		t.Fatalf("the interrupted run: %d %s", code, msg)
	}
	if size, _ := os.ReadFile(filepath.Join(out, "size")); strings.TrimSpace(string(size)) == "0" {
		t.Fatal("find -printf shows the state as empty")
	}
	if err := os.Mkdir(filepath.Join(e.mnt, ".epochfs", "jobs", "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, msg = shell(t, true, `cat $2/state > $1/.epochfs/jobs/root/resume`, e.mnt, out)
	if code == 0 || !strings.Contains(msg, "ermission denied") {
		t.Fatalf("a user's write to root's job's resume: %d %q, want permission denied", code, msg)
	}
	// A state names files (a cluster job's, drawn ahead): its owner's only.
	code, msg = shell(t, true, `cat $1/.epochfs/jobs/root/state`, e.mnt)
	if code == 0 || !strings.Contains(msg, "ermission denied") {
		t.Fatalf("a user's read of root's job's state: %d %q, want permission denied", code, msg)
	}
	e.unmount()
	e.mount()

	code, msg = shell(t, true, `set -e
J=$1/.epochfs/jobs
mkdir $J/b
printf 'batch_size=3\nseed=5\nworld_size=3\n' > $J/b/config
if head -c 200 $2/state > $J/b/resume; then echo "a truncated state was taken"; exit 1; fi
if sed 's/seed 5/seed 6/' $2/state > $J/b/resume; then echo "a forged state was taken"; exit 1; fi
cat $2/state > $J/b/resume
grep -q '^resumed=' $J/b/status
for r in 0 1 2; do
  n=0
  while b=$(cat $J/b/rank/$r/next) && [ -n "$b" ]; do printf '%s\n' "$b"; n=$((n+1)); done > $2/rest$r
done
`, e.mnt, out)
	if code != 0 {
		t.Fatalf("the resumed run: %d %s", code, msg)
	}
	errs, _ := os.ReadFile(filepath.Join(e.mnt, ".epochfs", "errors"))
	if !strings.Contains(string(errs), "state: ") || !strings.Contains(string(errs), "check does not match") {
		t.Errorf(".epochfs/errors lacks the refused states' reasons:\n%s", errs)
	}
	count := map[string]int{}
	lines := func(name string) []string {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(b))
	}
	seen := lines("seen")
	for _, p := range seen {
		count[p]++
	}
	var counts []int
	for r := range 3 {
		rest := lines("rest" + string(rune('0'+r)))
		counts = append(counts, len(rest))
		for _, p := range rest {
			count[p]++
		}
	}
	if counts[0] != counts[1] || counts[1] != counts[2] {
		t.Fatalf("the resumed ranks got %v: want equal counts", counts)
	}
	repeats := 0
	for _, p := range paths {
		if count[p] == 0 {
			t.Fatalf("%s was never handed out in the interrupted epoch", p)
		}
		repeats += count[p] - 1
	}
	if left := len(paths) - len(seen); repeats != 3*counts[0]-left {
		t.Fatalf("%d repeats, want torch's padding %d", repeats, 3*counts[0]-left)
	}
}

// TestAStateResumesAfterARefreshOnTheSameMount: a job's state is saved,
// then a refresh removes three files (one handed out, two not) and adds
// two; a new job of another world size resumes from the state on the
// same mount: the resumed epoch hands out every file left that the state
// had not, none removed and none added, and counts the two removed ones
// it had not handed out as skipped; the next epoch has the added files.
func TestAStateResumesAfterARefreshOnTheSameMount(t *testing.T) {
	// Without a subset line, and with subset=all (what the Python
	// samplers write for a dataset at the mount's root).
	for _, subset := range []string{"", "subset=all\n"} {
		t.Run(strings.TrimSpace(subset), func(t *testing.T) { resumeAfterARefresh(t, subset) })
	}
}

func resumeAfterARefresh(t *testing.T, subset string) {
	src, paths := makeSamples(t, 60, 300)
	e := newEnv(t, src, 1<<20)
	e.mount()
	jobs := filepath.Join(e.mnt, ".epochfs", "jobs")
	old := filepath.Join(jobs, "old")
	makeJob(t, old, "batch_size=5\nseed=9\n"+subset)
	var seen []string
	for range 4 {
		b := mustRead(t, filepath.Join(old, "next"))
		seen = append(seen, strings.Fields(string(b))...)
	}
	state := mustRead(t, filepath.Join(old, "state"))
	handed := map[string]bool{}
	for _, p := range seen {
		handed[p] = true
	}
	removed := []string{seen[0]}
	for _, p := range paths {
		if len(removed) < 3 && !handed[p] {
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
	added := []string{"class0/new0.jpg", "class1/new1.jpg"}
	for _, p := range added {
		if err := os.WriteFile(filepath.Join(src, p), []byte("new "+p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	refresh(t, e.mnt, "all")
	if err := os.Remove(old); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(jobs, "new")
	makeJob(t, dir, "batch_size=4\nseed=9\nworld_size=2\n"+subset)
	if err := os.WriteFile(filepath.Join(dir, "resume"), state, 0); err != nil {
		t.Fatalf("resume after the refresh: %v\n%s", err, e.errorsFile())
	}
	left := 0
	for _, p := range paths {
		if !handed[p] && !gone[p] {
			left++
		}
	}
	count := map[string]int{}
	var rest [2][]string
	for r := range 2 {
		rest[r] = rankEpochOf(t, dir, r)
		for _, p := range rest[r] {
			count[p]++
			if gone[p] || slices.Contains(added, p) {
				t.Fatalf("the resumed epoch handed out %s (removed %v, added %v)", p, gone[p], slices.Contains(added, p))
			}
		}
	}
	if len(rest[0]) != (left+1)/2 || len(rest[1]) != (left+1)/2 {
		t.Fatalf("resumed ranks got %d and %d, want ceil(%d/2) each", len(rest[0]), len(rest[1]), left)
	}
	repeats := 0
	for _, p := range paths {
		if !handed[p] && !gone[p] && count[p] == 0 {
			t.Fatalf("%s was left out of the resumed epoch", p)
		}
		if handed[p] {
			repeats += count[p] // handed out before the state: padding only
		} else if count[p] > 1 {
			repeats += count[p] - 1
		}
	}
	if pad := 2*((left+1)/2) - left; repeats != pad {
		t.Fatalf("%d samples came again, want torch's padding %d", repeats, pad)
	}
	if st := kv(mustRead(t, filepath.Join(dir, "status"))); st["skipped"] != "2" {
		t.Errorf("status skipped=%s, want the 2 removed files the state had not handed out", st["skipped"])
	}
	next := map[string]bool{}
	for r := range 2 {
		for _, p := range rankEpochOf(t, dir, r) {
			next[p] = true
		}
	}
	for _, p := range added {
		if !next[p] {
			t.Errorf("the epoch after the resumed one lacks %s, added by the refresh", p)
		}
	}
}

// TestAStateSavedAfterARemovalIsRefusedWithItsReason: a refresh removed
// a file before the job started; the job saves its state, a refresh adds
// a file, and a new job on the same mount cannot resume from the state
// (a documented limit, docs/ctl.md "resume": the state does not say which
// files were gone when it was saved): EINVAL, and errors says why.
func TestAStateSavedAfterARemovalIsRefusedWithItsReason(t *testing.T) {
	src, paths := makeSamples(t, 40, 300)
	e := newEnv(t, src, 1<<20)
	e.mount()
	if err := os.Remove(filepath.Join(src, paths[7])); err != nil {
		t.Fatal(err)
	}
	refresh(t, e.mnt, "all")
	jobs := filepath.Join(e.mnt, ".epochfs", "jobs")
	old := filepath.Join(jobs, "old")
	makeJob(t, old, "batch_size=4\nseed=5\n")
	mustRead(t, filepath.Join(old, "next"))
	state := mustRead(t, filepath.Join(old, "state"))
	if err := os.WriteFile(filepath.Join(src, "class0/added.jpg"), []byte("added"), 0o644); err != nil {
		t.Fatal(err)
	}
	refresh(t, e.mnt, "all")
	if err := os.Remove(old); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(jobs, "new")
	makeJob(t, dir, "batch_size=4\nseed=5\n")
	err := os.WriteFile(filepath.Join(dir, "resume"), state, 0)
	if !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("resume: %v, want EINVAL", err)
	}
	if why := e.errorsFile(); !strings.Contains(why, "after files of the job were removed before it was saved") {
		t.Fatalf("errors does not say why: %s", why)
	}
}

// makeJob makes the job directory dir and writes its config.
func makeJob(t *testing.T, dir, config string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(config), 0); err != nil {
		t.Fatal(err)
	}
}
