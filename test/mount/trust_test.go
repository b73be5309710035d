package mount

// The second round of the mount's hostile users: descriptors kept on an
// ended job's files, copies of files whose permissions the source revoked,
// documents held open to grow the daemon. Real unprivileged users
// (useradd, runuser) drive the mount with bash and Debian's Python.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/mounts"
	"github.com/epochfs/epochfs/internal/views"
)

// heldJobFiles is run as the attacker: it makes jobs/NAME, keeps O_PATH
// descriptors on its files (and a write descriptor on its config, a read
// one on its next), ends the job, says "ready", and once told "go" (another
// user made a job of the same name meanwhile) tries each of them through
// /proc/self/fd. It prints one "file: result" line each.
const heldJobFiles = `
import os, sys
job = sys.argv[1]
os.mkdir(job)
with open(job + "/config", "w") as f:
    f.write("batch_size=2\n")
paths = ["state", "config", "resume", "status", "rank/0/pause", "rank/0/state", "rank/0/status", "next", "rank/0/next"]
fds = {p: os.open(job + "/" + p, os.O_PATH) for p in paths}
wconfig = os.open(job + "/config", os.O_WRONLY)
rnext = os.open(job + "/next", os.O_RDONLY)
os.rmdir(job)
print("ready", flush=True)
sys.stdin.readline()

def attempt(name, fn):
    try:
        r = fn()
        print(f"{name}: OK {r!r}", flush=True)
    except OSError as e:
        print(f"{name}: {os.strerror(e.errno)}", flush=True)

def read(p):
    fd = os.open(f"/proc/self/fd/{fds[p]}", os.O_RDONLY)
    try:
        return os.read(fd, 1 << 20)
    finally:
        os.close(fd)

def write(p, data):
    fd = os.open(f"/proc/self/fd/{fds[p]}", os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)

for p in ["state", "rank/0/state", "status", "rank/0/status", "config", "next", "rank/0/next"]:
    attempt("read " + p, lambda p=p: read(p))
attempt("stat config", lambda: os.stat(f"/proc/self/fd/{fds['config']}").st_size)
attempt("write config", lambda: write("config", b"batch_size=1\nseed=99\nsubset=secret\n"))
attempt("write pause", lambda: write("rank/0/pause", b"86400\n"))
attempt("write resume", lambda: write("resume", b"epochfs-state 1\n"))
attempt("held config", lambda: (os.write(wconfig, b"seed=99\n"), os.close(wconfig)))
attempt("held next", lambda: os.read(rnext, 4096))
`

// TestAnEndedJobsFilesNeverReachTheNextJobOfItsName: user B keeps
// descriptors on jobs/X's files and removes the job; user A makes jobs/X.
// Through them B reads nothing of A's job and changes nothing of it:
// every open, stat, read and write fails (ENOENT), and A's job is as A
// made it.
func TestAnEndedJobsFilesNeverReachTheNextJobOfItsName(t *testing.T) {
	requireFUSE(t)
	requireDebianPython(t)
	u := newUsers(t, 2) // a, b
	src, _ := makeTree(t, 1<<10)
	e := newEnv(t, src, 64<<20)
	openTempDirs(t, src, e.mnt)
	e.mount()
	jobs := filepath.Join(e.mnt, ".epochfs/jobs")
	for _, owner := range []string{"user", "root"} {
		t.Run(owner, func(t *testing.T) {
			name := "resumable-" + owner
			cmd := exec.Command("runuser", "-u", u.names[1], "--", "/usr/bin/python3", "-c", heldJobFiles, name)
			cmd.Dir = jobs
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer stdin.Close()
			lines := bufio.NewScanner(stdout)
			if !lines.Scan() || lines.Text() != "ready" {
				t.Fatalf("the attacker did not get ready: %q", lines.Text())
			}
			// The next job of the name, A's or root's, configured and read.
			dir := filepath.Join(jobs, name)
			setup := fmt.Sprintf(`set -e; mkdir %[1]q; printf 'batch_size=3\nseed=5\nsampler=sequential\n' > %[1]q/config; head -n 3 %[1]q/next >/dev/null`, dir)
			var out string
			var err error
			if owner == "user" {
				out, err = u.as(0, setup)
			} else {
				var b []byte
				b, err = exec.Command("bash", "-c", setup).CombinedOutput()
				out = string(b)
			}
			if err != nil {
				t.Fatalf("the next job: %v: %s", err, out)
			}
			io.WriteString(stdin, "go\n")
			results := map[string]string{}
			for lines.Scan() {
				k, v, _ := strings.Cut(lines.Text(), ": ")
				results[k] = v
			}
			want := []string{"read state", "read rank/0/state", "read status", "read rank/0/status", "read config",
				"read next", "read rank/0/next", "stat config", "write config", "write pause", "write resume", "held config", "held next"}
			for _, k := range want {
				if r, ok := results[k]; !ok || r != "No such file or directory" {
					t.Errorf("%s through a descriptor kept on the ended job: %q, want ENOENT", k, r)
				}
			}
			// A's job is as A made it: its config, its place, no pause.
			cfg := asOwner(t, u, owner, "cat "+dir+"/config")
			if !strings.Contains(cfg, "batch_size=3") || !strings.Contains(cfg, "seed=5") || strings.Contains(cfg, "99") {
				t.Errorf("the next job's config: %q", cfg)
			}
			st := kv([]byte(asOwner(t, u, owner, "cat "+dir+"/status "+dir+"/rank/0/status")))
			if st["position"] != "3" || st["resume"] != "none" || st["paused_until"] != "none" {
				t.Errorf("the next job's status: position=%s resume=%s paused_until=%s", st["position"], st["resume"], st["paused_until"])
			}
		})
	}
}

// asOwner runs a bash script as the job's owner: user 0 or root.
func asOwner(t *testing.T, u *testUsers, owner, script string) string {
	t.Helper()
	if owner == "user" {
		out, err := u.as(0, script)
		if err != nil {
			t.Fatalf("%s: %v: %s", script, err, out)
		}
		return out
	}
	b, err := exec.Command("bash", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", script, err, b)
	}
	return string(b)
}

// heldDocuments is run as a user: it opens warmup n times and writes size
// bytes of one unfinished line to each, keeping them all open, and prints
// what each write answered; then it closes them.
const heldDocuments = `
import os, sys
path, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fds = []
for i in range(n):
    fd = os.open(path, os.O_WRONLY)
    fds.append(fd)
    chunk = b"x" * (1 << 20)
    left, res = size, "OK"
    try:
        while left > 0:
            left -= os.write(fd, chunk[:min(left, len(chunk))])
    except OSError as e:
        res = os.strerror(e.errno)
    print(f"{i}: {res}", flush=True)
for fd in fds:
    try:
        os.close(fd)
    except OSError:
        pass
`

// TestOneUsersOpenDocumentsAreBoundedTogether: a user's documents held
// open share one budget: past it a write fails with EDQUOT, the reason in
// the user's errors, and once they are closed the user writes again.
// Root's are not counted.
func TestOneUsersOpenDocumentsAreBoundedTogether(t *testing.T) {
	requireFUSE(t)
	requireDebianPython(t)
	u := newUsers(t, 2)
	src, _ := makeTree(t, 1<<10)
	e := newEnv(t, src, 64<<20)
	e.opts.docBudget = 24 << 20
	openTempDirs(t, src, e.mnt)
	e.mount()
	// A job's resume (a state document: long lines, up to 16 MiB) held
	// open four times; warmup's lines are paths, refused past 64 KiB.
	for i := range 2 {
		if out, err := u.as(i, "mkdir "+filepath.Join(e.mnt, ".epochfs/jobs/j"+strconv.Itoa(i))); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	resume := func(i int) string { return filepath.Join(e.mnt, ".epochfs/jobs/j"+strconv.Itoa(i), "resume") }
	out, err := exec.Command("runuser", "-u", u.names[0], "--", "/usr/bin/python3", "-c", heldDocuments, resume(0), "4", fmt.Sprint(10<<20)).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := string(out)
	if !strings.Contains(got, "0: OK") || !strings.Contains(got, "1: OK") || !strings.Contains(got, "2: Disk quota exceeded") || !strings.Contains(got, "3: Disk quota exceeded") {
		t.Fatalf("four held documents of 10 MiB in a budget of 24 MiB: %q; want two, then EDQUOT", got)
	}
	mine, _ := u.as(0, "cat "+filepath.Join(e.mnt, ".epochfs/errors"))
	theirs, _ := u.as(1, "cat "+filepath.Join(e.mnt, ".epochfs/errors"))
	if !strings.Contains(mine, "one user may") || strings.Contains(theirs, "one user may") {
		t.Fatalf("errors: the user's %q, the other's %q", mine, theirs)
	}
	// Everything was given back: the same user, and another, write again.
	waitUntil(t, 10*time.Second, func() bool { return e.fsys.DocBytes() == 0 })
	for i := range 2 {
		out, err := exec.Command("runuser", "-u", u.names[i], "--", "/usr/bin/python3", "-c", heldDocuments, resume(i), "2", fmt.Sprint(10<<20)).CombinedOutput()
		if err != nil || strings.Count(string(out), "OK") != 2 {
			t.Fatalf("user %d after the documents were closed: %v: %q", i, err, out)
		}
	}
	// Root's documents are not counted.
	cmd := exec.Command("/usr/bin/python3", "-c", heldDocuments, resume(0), "4", fmt.Sprint(10<<20))
	if out, err := cmd.CombinedOutput(); err != nil || strings.Count(string(out), "OK") != 4 {
		t.Fatalf("root: %v: %q", err, out)
	}
	// A warmup line is a path: one of 1 MiB is refused at 64 KiB.
	out, _ = exec.Command("runuser", "-u", u.names[0], "--", "/usr/bin/python3", "-c", heldDocuments,
		filepath.Join(e.mnt, ".epochfs/warmup"), "1", fmt.Sprint(1<<20)).CombinedOutput()
	if !strings.Contains(string(out), "0: Invalid argument") {
		t.Fatalf("a warmup line of 1 MiB: %q, want EINVAL", out)
	}
}

// TestACopyHonoursTheSourcesOwnerAndModeAsAnOpenDoes: a walked file whose
// mode its owner revokes on the source, and one a writer replaces by a
// root-only file of the same size and mtime, are copied by another user's
// warmup; that user then reads neither through the mount, and the mount
// shows the new owner and mode.
func TestACopyHonoursTheSourcesOwnerAndModeAsAnOpenDoes(t *testing.T) {
	requireFUSE(t)
	u := newUsers(t, 2) // a owns the project directory; b reads it
	src := filepath.Join(t.TempDir(), "src")
	home := filepath.Join(src, "proj")
	write(t, filepath.Join(home, "revoked.txt"), "A-PRIVATE-DATA", 0o644)
	write(t, filepath.Join(home, "swapped.txt"), "public-bytes", 0o644)
	write(t, filepath.Join(home, "other.txt"), "public", 0o644)
	u.chown(t, 0, home, filepath.Join(home, "revoked.txt"), filepath.Join(home, "other.txt"))
	u.chown(t, 1, filepath.Join(home, "swapped.txt"))
	e := newEnv(t, src, 64<<20)
	openTempDirs(t, src, e.mnt)
	e.mount()
	mhome := filepath.Join(e.mnt, "proj")
	// b sees both files as they were walked.
	if out, err := u.as(1, "stat -c %a "+mhome+"/revoked.txt "+mhome+"/swapped.txt"); err != nil || out != "644\n644\n" {
		t.Fatalf("before: %v %q", err, out)
	}
	// a revokes; a writer (root here: hard links to another's file need
	// root) swaps in a root-only file of the same size and mtime.
	if out, err := u.as(0, "chmod 600 "+filepath.Join(home, "revoked.txt")); err != nil {
		t.Fatalf("chmod: %v %s", err, out)
	}
	swap := fmt.Sprintf(`set -e; cd %q; printf 'ROOT-SECRET!' > .tmp; chmod 600 .tmp; touch -r swapped.txt .tmp; mv .tmp swapped.txt`, home)
	if out, err := exec.Command("bash", "-c", swap).CombinedOutput(); err != nil {
		t.Fatalf("swap: %v %s", err, out)
	}
	warm := fmt.Sprintf("printf 'proj/revoked.txt\\nproj/swapped.txt\\nproj/other.txt\\n' > %q/.epochfs/warmup", e.mnt)
	if out, err := u.as(1, warm); err != nil {
		t.Fatalf("b's warmup: %v %s", err, out)
	}
	e.settle()
	for _, f := range []string{"revoked.txt", "swapped.txt"} {
		out, err := u.as(1, "cat "+filepath.Join(mhome, f))
		if err == nil || strings.Contains(out, "PRIVATE") || strings.Contains(out, "SECRET") || !strings.Contains(out, "Permission denied") {
			t.Errorf("b read %s after its copy: %v %q, want Permission denied", f, err, out)
		}
	}
	if out, err := u.as(1, "cat "+filepath.Join(mhome, "other.txt")); err != nil || out != "public" {
		t.Errorf("b's readable file: %v %q", err, out)
	}
	// The mount shows the source's owner and mode now.
	out, err := u.as(1, "stat -c '%a %U' "+mhome+"/revoked.txt "+mhome+"/swapped.txt")
	if err != nil || out != fmt.Sprintf("600 %s\n600 root\n", u.names[0]) {
		t.Errorf("attributes after the copies: %v %q", err, out)
	}
	// Their owners read them.
	if out, err := u.as(0, "cat "+filepath.Join(mhome, "revoked.txt")); err != nil || out != "A-PRIVATE-DATA" {
		t.Errorf("a reads its own file: %v %q", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(mhome, "swapped.txt")); err != nil || string(b) != "ROOT-SECRET!" {
		t.Errorf("root reads the new file: %v %q", err, b)
	}
}

// TestAJobsViewsShowOnlyWhatItsOwnerMayList: a user's job's augmented/
// lists and looks up only the directories and files its owner could list
// and open: root's 0700 directory and another user's 0600 file are not
// there, exactly as names that do not exist.
func TestAJobsViewsShowOnlyWhatItsOwnerMayList(t *testing.T) {
	requireFUSE(t)
	u := newUsers(t, 1)
	src := filepath.Join(t.TempDir(), "src")
	paths := makeJPEGs(t, src, 4)
	jpeg := mustRead(t, filepath.Join(src, paths[0]))
	write(t, filepath.Join(src, "secret/projX/topsecret_1.jpg"), string(jpeg), 0o644)
	os.Chmod(filepath.Join(src, "secret"), 0o700)
	write(t, filepath.Join(src, "class0/private.jpg"), string(jpeg), 0o600)
	e := newEnv(t, src, 1<<30)
	e.opts.views = &views.Config{Pipeline: viewPipeline, Seed: 3, DecodedBytes: 1 << 20, AugmentedBytes: 1 << 20}
	openTempDirs(t, src, e.mnt)
	e.mount()
	job := filepath.Join(e.mnt, ".epochfs/jobs/j")
	if out, err := u.as(0, "mkdir "+job); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	aug := filepath.Join(job, "augmented")
	// The names the user may list on the source: secret/ itself (its
	// parent is readable), nothing in it (it is not).
	out, _ := u.as(0, "cd "+aug+" && find . 2>&1 | sort")
	if strings.Contains(out, "projX") || strings.Contains(out, "private") || !strings.Contains(out, paths[0]+".npy") ||
		!strings.Contains(out, "Permission denied") {
		t.Fatalf("the user's job lists %q", out)
	}
	for _, p := range []string{"secret/projX", "secret/projX/topsecret_1.jpg.npy", "class0/private.jpg.npy", "nosuch", "class0/nosuch.jpg.npy"} {
		out, _ := u.as(0, "stat "+filepath.Join(aug, p)+" 2>&1")
		if !strings.Contains(out, "No such file or directory") {
			t.Errorf("stat augmented/%s as the job's owner: %q, want ENOENT", p, out)
		}
	}
	// Root's job sees every file.
	root := filepath.Join(e.mnt, ".epochfs/jobs/r")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "augmented/secret/projX/topsecret_1.jpg.npy")); err != nil {
		t.Errorf("root's job: %v", err)
	}
}

// TestAResumeAnswersTheSameForHiddenAndMissingPaths: a user's unread line
// naming a file hidden from them is refused with the words of one that
// names no file.
func TestAResumeAnswersTheSameForHiddenAndMissingPaths(t *testing.T) {
	requireFUSE(t)
	u := newUsers(t, 1)
	src, _ := makeTree(t, 1<<10)
	write(t, filepath.Join(src, "secret/projX/topsecret_1.jpg"), "x", 0o644)
	os.Chmod(filepath.Join(src, "secret"), 0o700)
	e := newEnv(t, src, 64<<20)
	openTempDirs(t, src, e.mnt)
	e.mount()
	jobs := filepath.Join(e.mnt, ".epochfs/jobs")
	script := fmt.Sprintf(`set -e; cd %q; mkdir a b
printf 'batch_size=2\nseed=3\n' > a/config; printf 'batch_size=2\nseed=3\n' > b/config
head -n 2 a/next >/dev/null; cat a/state > /tmp/state.$$
for p in secret/projX/topsecret_1.jpg secret/projX/nosuch.jpg; do
  { cat /tmp/state.$$; echo "unread $p"; } > b/resume 2>/dev/null || true
  tail -n 1 ../errors | sed 's/^[^ ]* //'
done
rm -f /tmp/state.$$`, jobs)
	out, err := u.as(0, script)
	if err != nil {
		t.Fatalf("%v %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "not a sample of the job") ||
		strings.ReplaceAll(lines[0], "topsecret_1", "nosuch") != lines[1] {
		t.Fatalf("the answers for a hidden and a missing path differ: %q", lines)
	}
}

// TestAnOversizedEncodedBatchOpensNothing: a view=encoded batch whose
// files add up to more than max_batch_bytes is refused from the catalog's
// sizes, before any of its files is opened on the source.
func TestAnOversizedEncodedBatchOpensNothing(t *testing.T) {
	requireFUSE(t)
	u := newUsers(t, 1)
	src := filepath.Join(t.TempDir(), "src")
	for i := range 64 {
		write(t, filepath.Join(src, "d", fmt.Sprintf("f%02d.bin", i)), strings.Repeat("x", 64<<10), 0o644)
	}
	e := newEnv(t, src, 1) // nothing fits a tier: every read is a source open
	e.opts.views = &views.Config{Pipeline: viewPipeline, MaxBatchBytes: 1 << 20}
	openTempDirs(t, src, e.mnt)
	e.mount()
	job := filepath.Join(e.mnt, ".epochfs/jobs/j")
	opens := e.num("source_opens")
	out, err := u.as(0, fmt.Sprintf(`mkdir %[1]q && printf 'batch_size=32\nview=encoded\n' > %[1]q/config && cat %[1]q/batch > /dev/null`, job))
	if err == nil || !strings.Contains(out, "Invalid argument") {
		t.Fatalf("a batch of 2 MiB of files over a bound of 1 MiB: %v %q, want EINVAL", err, out)
	}
	if got := e.num("source_opens"); got != opens {
		t.Fatalf("the refused batch opened %d files on the source", got-opens)
	}
	// One that fits is read.
	out, err = u.as(0, fmt.Sprintf(`printf 'batch_size=8\nview=encoded\n' > %[1]q/config && cat %[1]q/batch | wc -c`, job))
	if n, _ := strconv.Atoi(strings.TrimSpace(out)); err != nil || n < 8*64<<10 {
		t.Fatalf("a batch that fits: %v %q", err, out)
	}
}

// TestRootTrustsOnlyRootsRecordsAndItsOwnDaemons: a record a user plants
// in their runtime directory is not root's to wait for or list, a
// process of the user's named epochfs with a daemon's arguments does not
// keep root's next mount from clearing a dead mount, and a user's
// `epochfs list` shows root's serving mount as serving.
func TestRootTrustsOnlyRootsRecordsAndItsOwnDaemons(t *testing.T) {
	u := newUsers(t, 1)
	src, _, base, mnt := binDirs(t, 1<<10)
	state := filepath.Join(base, "state")
	openTempDirs(t, src, mnt, filepath.Dir(binPath))
	tierFlag := "--tier=disk=" + filepath.Join(base, "tier") + ":1GiB"
	binMount(t, src, mnt, state, tierFlag)
	pid, _ := strconv.Atoi(statusOf(t, mnt)["pid"])
	uid, _ := userIDs(t, u.names[0])

	// A user's list shows root's mount as it is.
	if out, err := u.as(0, binPath+" list --json"); err != nil || !strings.Contains(out, `"state": "serving"`) {
		t.Errorf("the user's list: %v %s", err, out)
	}

	// A fake daemon: a program of the user's named epochfs, started as
	// "epochfs mount --foreground SRC MNT", and a record naming it for a
	// mount point that is not mounted.
	home := filepath.Join(base, "home")
	os.MkdirAll(home, 0o755)
	u.chown(t, 0, home)
	fake := filepath.Join(home, "epochfs")
	os.WriteFile(filepath.Join(base, "fake.go"), []byte("package main\n\nimport \"time\"\n\nfunc main() { time.Sleep(time.Minute) }\n"), 0o644)
	if out, err := exec.Command("go", "build", "-o", fake, filepath.Join(base, "fake.go")).CombinedOutput(); err != nil {
		t.Fatalf("build the fake: %v %s", err, out)
	}
	os.Chmod(fake, 0o755)
	run := fmt.Sprintf("/run/user/%d", uid)
	if err := os.MkdirAll(run, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(run) })
	u.chown(t, 0, run)
	ghost := filepath.Join(base, "ghost")
	script := fmt.Sprintf(`set -e; export XDG_RUNTIME_DIR=%[1]q; mkdir -p %[1]q/epochfs
%[2]q mount --foreground %[3]q %[4]q >/dev/null 2>&1 &
p=$!; sleep 0.2
start=$(awk '{print $22}' /proc/$p/stat)
printf '{"pid":%%d,"start":%%s,"state_dir":"/x","mountpoint":"%%s","dev":"0:1"}\n' $p $start %[5]q > %[1]q/epochfs/%[6]s.json
echo $p`, run, fake, src, mnt, ghost, mounts.Key(ghost))
	out, err := u.as(0, script)
	if err != nil {
		t.Fatalf("plant: %v %s", err, out)
	}
	fakePID, _ := strconv.Atoi(strings.TrimSpace(out))
	t.Cleanup(func() { syscall.Kill(fakePID, syscall.SIGKILL) })

	code, out := cli(t, "list", "--json")
	if code != 0 || strings.Contains(out, "ghost") {
		t.Errorf("root's list shows the planted record: %d %s", code, out)
	}
	start := time.Now()
	if code, out := cli(t, "unmount", ghost); code != 0 || !strings.Contains(out, "not mounted") {
		t.Errorf("root's unmount of a point the planted record names: exit %d after %v: %s", code, time.Since(start), out)
	}

	// Root's mount dies; root's next mount clears it, whatever the
	// user's fake says.
	syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, func() bool { return !processAlive(pid) })
	if code, out := cli(t, "mount", "--state", state, tierFlag, src, mnt); code != 0 {
		t.Fatalf("root's mount over the dead one: exit %d: %s", code, out)
	}
	if st := statusOf(t, mnt); st["pid"] == "" || st["pid"] == strconv.Itoa(pid) {
		t.Fatalf("status after the remount: pid %s", st["pid"])
	}
}

// userIDs returns a user's uid and gid.
func userIDs(t *testing.T, name string) (int, int) {
	t.Helper()
	out, err := exec.Command("id", "-u", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	out, _ = exec.Command("id", "-g", name).Output()
	gid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return uid, gid
}

// TestASourceMountedAgainUnderTheMountIsANewSource: the source's file
// system is detached and another mounted at its path (same type, same
// root inode): the daemon reads the new mount, says so in status, and
// serves the new files' bytes, not the detached ones'.
func TestASourceMountedAgainUnderTheMountIsANewSource(t *testing.T) {
	requireFUSE(t)
	src := filepath.Join(t.TempDir(), "src")
	os.Mkdir(src, 0o755)
	mountTmpfs := func() {
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", src).CombinedOutput(); err != nil {
			t.Fatalf("mount tmpfs: %v %s", err, out)
		}
	}
	mountTmpfs()
	t.Cleanup(func() {
		for range 3 { // every tmpfs stacked or left detached there
			if exec.Command("umount", "-l", src).Run() != nil {
				break
			}
		}
	})
	write(t, filepath.Join(src, "d/a.txt"), "old content", 0o644)
	write(t, filepath.Join(src, "d/b.txt"), "old b", 0o644)
	e := newEnv(t, src, 64<<20)
	e.mount()
	if b, err := os.ReadFile(filepath.Join(e.mnt, "d/a.txt")); err != nil || string(b) != "old content" {
		t.Fatalf("before: %v %q", err, b)
	}
	e.settle()
	if out, err := exec.Command("umount", "-l", src).CombinedOutput(); err != nil {
		t.Fatalf("umount -l: %v %s", err, out)
	}
	mountTmpfs()
	write(t, filepath.Join(src, "d/a.txt"), "the new mount's content", 0o644)
	write(t, filepath.Join(src, "d/c.txt"), "added", 0o644)
	waitUntil(t, 20*time.Second, func() bool { return e.status()["source_mounts"] == "1" })
	if e.status()["source_mounted_at"] == "" {
		t.Error("no source_mounted_at")
	}
	waitUntil(t, 20*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(e.mnt, "d/a.txt"))
		return err == nil && string(b) == "the new mount's content"
	})
	waitUntil(t, 20*time.Second, func() bool {
		_, errC := os.Stat(filepath.Join(e.mnt, "d/c.txt"))
		_, errB := os.Stat(filepath.Join(e.mnt, "d/b.txt"))
		return errC == nil && errors.Is(errB, os.ErrNotExist)
	})
}

// TestUnmountNamesTheNamespaceThatStillHoldsTheMount: another mount
// namespace made while the mount existed holds it after the unmount: the
// daemon keeps serving it there. The unmount's error, the next mount's
// refusal and the daemon's log name that namespace and a process in it,
// not the source; once it lets go, the daemon exits.
func TestUnmountNamesTheNamespaceThatStillHoldsTheMount(t *testing.T) {
	src, _, base, mnt := binDirs(t, 1<<10)
	state := filepath.Join(base, "state")
	tierFlag := "--tier=disk=" + filepath.Join(base, "tier") + ":1GiB"
	binMount(t, src, mnt, state, tierFlag)
	pid, _ := strconv.Atoi(statusOf(t, mnt)["pid"])
	holder := exec.Command("unshare", "--mount", "--propagation", "private", "sleep", "120")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()
	// The namespace exists once sleep runs in it.
	waitFor(t, func() bool {
		ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", holder.Process.Pid))
		self, _ := os.Readlink("/proc/self/ns/mnt")
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", holder.Process.Pid))
		return ns != "" && ns != self && strings.TrimSpace(string(comm)) == "sleep"
	})
	code, out := cli(t, "unmount", "--timeout", "3s", mnt)
	if code != 1 || !strings.Contains(out, "another mount namespace still holds it") || !strings.Contains(out, fmt.Sprintf("pid %d sleep", holder.Process.Pid)) || strings.Contains(out, "source") {
		t.Fatalf("unmount while another namespace holds the mount: exit %d: %s", code, out)
	}
	code, out = cli(t, "mount", "--state", state, tierFlag, src, mnt)
	if code == 0 || !strings.Contains(out, "another mount namespace") {
		t.Errorf("the next mount: exit %d: %s", code, out)
	}
	if code == 0 {
		cli(t, "unmount", mnt)
	}
	waitFor(t, func() bool {
		log, _ := os.ReadFile(filepath.Join(state, "epochfs.log"))
		return strings.Contains(string(log), "another mount namespace still holds it")
	})
	holder.Process.Kill()
	holder.Wait()
	waitFor(t, func() bool { return !processAlive(pid) })
}
