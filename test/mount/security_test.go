package mount

// The mount as its hostile users meet it: real unprivileged users (created
// with useradd and removed by the test) drive the mount with bash and
// coreutils, on a source directory they can write to, as on a shared
// project directory of a Lustre or GPFS site.

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/mounts"
	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/views"
	"golang.org/x/sys/unix"

	"github.com/epochfs/epochfs/internal/testenv"
)

// testUsers are unprivileged users of one test, in one shared group.
type testUsers struct {
	group string
	names []string
}

// newUsers creates n users (and a group "proj" of the first two) that the
// test removes again.
func newUsers(t *testing.T, n int) *testUsers {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Skip(t, "needs root to create users")
	}
	tag := fmt.Sprintf("%05d", os.Getpid()%100000)
	u := &testUsers{group: "efsg" + tag}
	if out, err := exec.Command("groupadd", u.group).CombinedOutput(); err != nil {
		t.Fatalf("groupadd: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("groupdel", u.group).Run() })
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("efs%s%c", tag, 'a'+i)
		args := []string{"--system", "--no-create-home", "--shell", "/bin/bash", "--user-group", name}
		if i < 2 {
			args = append([]string{"-G", u.group}, args...)
		}
		if out, err := exec.Command("useradd", args...).CombinedOutput(); err != nil {
			t.Fatalf("useradd: %v: %s", err, out)
		}
		u.names = append(u.names, name)
		t.Cleanup(func() { exec.Command("userdel", name).Run() })
	}
	return u
}

// as runs a bash script as user i with runuser (which sets the user's
// supplementary groups as a login does) and returns its output.
func (u *testUsers) as(i int, script string) (string, error) {
	out, err := exec.Command("runuser", "-u", u.names[i], "--", "bash", "-c", script).CombinedOutput()
	return string(out), err
}

func (u *testUsers) chown(t *testing.T, i int, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if out, err := exec.Command("chown", "-h", u.names[i]+":"+u.names[i], p).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v: %s", err, out)
		}
	}
}

// openTempDirs lets other users search the test's temp directories (go
// creates them 0700).
func openTempDirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		for p := d; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func write(t *testing.T, path string, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func TestModesOwnersAndGroupsAreTheSources(t *testing.T) {
	requireFUSE(t)
	u := newUsers(t, 3) // alice and bob in proj, carol not
	src := filepath.Join(t.TempDir(), "src")
	write(t, filepath.Join(src, "zero"), "nobody's", 0o000)
	write(t, filepath.Join(src, "rootonly"), "root's", 0o600)
	write(t, filepath.Join(src, "alice600"), "alice's", 0o600)
	write(t, filepath.Join(src, "proj640"), "project's", 0o640)
	write(t, filepath.Join(src, "sg/inside"), "setgid dir's", 0o640)
	write(t, filepath.Join(src, "open644"), "everyone's", 0o644)
	u.chown(t, 0, filepath.Join(src, "alice600"))
	for _, p := range []string{"proj640", "sg", "sg/inside"} {
		if out, err := exec.Command("chgrp", u.group, filepath.Join(src, p)).CombinedOutput(); err != nil {
			t.Fatalf("chgrp: %s", out)
		}
	}
	if err := syscall.Chmod(filepath.Join(src, "sg"), 0o2750); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, src, 64<<20)
	openTempDirs(t, src, e.mnt)
	e.mount()

	// Every mode, owner and group as find -printf shows them on the source.
	list := func(dir string) string {
		out, err := exec.Command("find", dir, "-mindepth", "1", "-printf", `%P %m %u %g\n`).Output()
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		sort.Strings(lines)
		return strings.Join(lines, "\n")
	}
	if got, want := list(e.mnt), list(src); got != want {
		t.Fatalf("through the mount:\n%s\non the source:\n%s", got, want)
	}
	for _, c := range []struct {
		user int
		file string
		ok   bool
	}{
		{0, "zero", false}, {1, "zero", false}, {2, "zero", false},
		{0, "rootonly", false}, {2, "rootonly", false},
		{0, "alice600", true}, {1, "alice600", false},
		{0, "proj640", true}, {1, "proj640", true}, {2, "proj640", false},
		{1, "sg/inside", true}, {2, "sg/inside", false},
		{2, "open644", true},
	} {
		out, err := u.as(c.user, "cat "+filepath.Join(e.mnt, c.file))
		if c.ok && err != nil {
			t.Errorf("user %d cannot read %s: %s", c.user, c.file, out)
		}
		if !c.ok && (err == nil || !strings.Contains(out, "Permission denied")) {
			t.Errorf("user %d read %s (mode as on the source): %q", c.user, c.file, out)
		}
	}
}

// sharedSource is a source whose directory proj/USER belongs to the user,
// and a root-only directory beside it with a secret.
func sharedSource(t *testing.T, u *testUsers, user int) (src, secretDir string) {
	base := t.TempDir()
	src = filepath.Join(base, "src")
	secretDir = filepath.Join(base, "rootonly")
	write(t, filepath.Join(secretDir, "secret.txt"), "ROOT-SECRET", 0o600)
	write(t, filepath.Join(secretDir, "f.txt"), "ROOT-SECRET", 0o600)
	os.Chmod(secretDir, 0o700)
	home := filepath.Join(src, "proj", "u")
	write(t, filepath.Join(home, "d/secret.txt"), "public", 0o644)
	write(t, filepath.Join(home, "d/f.txt"), "public", 0o644)
	write(t, filepath.Join(home, "f.txt"), "public", 0o644)
	write(t, filepath.Join(home, "resident.txt"), "public", 0o644)
	filepath.Walk(home, func(p string, _ os.FileInfo, _ error) error { u.chown(t, user, p); return nil })
	return src, secretDir
}

func TestASymlinkSwappedInAfterTheWalkIsNeverFollowed(t *testing.T) {
	requireFUSE(t)
	u := newUsers(t, 1)
	src, secret := sharedSource(t, u, 0)
	e := newEnv(t, src, 64<<20)
	openTempDirs(t, src, e.mnt)
	e.mount()
	home, mhome := filepath.Join(src, "proj/u"), filepath.Join(e.mnt, "proj/u")
	// One file resident before the swap: its copy is the old file's.
	if _, err := os.ReadFile(filepath.Join(e.mnt, "proj/u/resident.txt")); err != nil {
		t.Fatal(err)
	}
	e.settle()
	script := fmt.Sprintf(`set -e; cd %q
mv d d.old && ln -s %q d
mv f.txt f.old && ln -s %q f.txt
mv resident.txt r.old && ln -s %q resident.txt`, home, secret, filepath.Join(secret, "f.txt"), filepath.Join(secret, "f.txt"))
	if out, err := u.as(0, script); err != nil {
		t.Fatalf("swap: %v: %s", err, out)
	}
	// Neither the user nor root gets the target's bytes from the daemon
	// (once the catalog has the symlink, the kernel follows it as the
	// caller: the user then meets the target's own permissions, below).
	for _, f := range []string{"d/secret.txt", "f.txt", "resident.txt"} {
		out, _ := u.as(0, "cat "+filepath.Join(mhome, f))
		if strings.Contains(out, "ROOT-SECRET") {
			t.Fatalf("the user read the root-only target through %s: %q", f, out)
		}
	}
	// The catalog learns what replaced them (a refresh of the directory,
	// in the background): symlinks, which the kernel follows as the user.
	waitUntil(t, 20*time.Second, func() bool {
		fi, err := os.Lstat(filepath.Join(mhome, "d"))
		return err == nil && fi.Mode()&os.ModeSymlink != 0
	})
	out, err := u.as(0, "cat "+filepath.Join(mhome, "d/secret.txt"))
	if err == nil || !strings.Contains(out, "Permission denied") {
		t.Fatalf("the user followed the new symlink to a root-only file: %v %q", err, out)
	}
	if e.num("source_stuck") != 0 {
		t.Fatal("calls stuck")
	}
}

func waitUntil(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFIFOsDevicesAndSocketsQueuedByAUserStallNothing(t *testing.T) {
	requireFUSE(t)
	u := newUsers(t, 1)
	src, _ := sharedSource(t, u, 0)
	home := filepath.Join(src, "proj/u")
	for i := 0; i < 8; i++ {
		write(t, filepath.Join(home, fmt.Sprintf("p%d", i)), "x", 0o644)
	}
	write(t, filepath.Join(src, "root.bin"), strings.Repeat("r", 1<<16), 0o644)
	e := newEnv(t, src, 64<<20)
	e.opts.sourceTimeout = time.Minute
	openTempDirs(t, src, e.mnt)
	e.mount()
	// After the walk the user swaps their files for FIFOs (no writer:
	// an open for reading would block), root swaps one for a device
	// node and one for a socket.
	var fifos []string
	for i := 0; i < 8; i++ {
		fifos = append(fifos, fmt.Sprintf("p%d", i))
	}
	if out, err := u.as(0, fmt.Sprintf("cd %q && for f in %s; do rm $f && mkfifo $f; done", home, strings.Join(fifos, " "))); err != nil {
		t.Fatalf("mkfifo: %s", out)
	}
	os.Remove(filepath.Join(home, "f.txt"))
	if err := unix.Mknod(filepath.Join(home, "f.txt"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(home, "resident.txt"))
	l, err := net.Listen("unix", filepath.Join(home, "resident.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var paths []string
	for _, f := range append(fifos, "f.txt", "resident.txt") {
		paths = append(paths, "proj/u/"+f)
	}
	if out, err := u.as(0, fmt.Sprintf("printf '%%s\\n' %s > %q", strings.Join(paths, " "), filepath.Join(e.mnt, ".epochfs/warmup"))); err != nil {
		t.Fatalf("warmup as the user: %v: %s", err, out)
	}
	// Root's warmup behind them is placed long before any of them could
	// have timed out (a liveness bound: the source timeout is a minute).
	if err := os.WriteFile(filepath.Join(e.mnt, ".epochfs/warmup"), []byte("root.bin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, func() bool { return e.p.Stats().Queued == 0 })
	if got := e.cat.Find("root.bin"); got == nil || got.Tier() < 0 {
		t.Fatal("root's file is not resident")
	}
	if st := e.srcd.Stats(); st.Stuck != 0 || st.Timeouts != 0 {
		t.Fatalf("source calls stuck or timed out: %+v", st)
	}
	// And reading them through the mount neither blocks nor serves them.
	out, _ := u.as(0, fmt.Sprintf("timeout 10 cat %q; echo rc=$?", filepath.Join(e.mnt, "proj/u/p0")))
	if strings.Contains(out, "rc=124") || !strings.Contains(out, "No such file") {
		t.Fatalf("read of a file swapped for a FIFO: %q", out)
	}
}

// The source path's file system goes away under the mount (a bind mount
// detached with umount -l: the path is an empty directory of another file
// system). Nothing is dropped; resident files read, others fail with EIO;
// the listing stays; a refresh removes nothing; when the source is back
// everything reads without a remount.
func TestAnOutageOfTheSourceIsNotADeletion(t *testing.T) {
	requireFUSE(t)
	src, paths := makeTree(t, 1<<20)
	bind := filepath.Join(t.TempDir(), "pfs")
	if err := os.Mkdir(bind, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "--bind", src, bind).CombinedOutput(); err != nil {
		t.Fatalf("bind mount: %s", out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", bind).Run() })
	e := newEnv(t, bind, 64<<20)
	e.mount()
	resident := []string{"a/small.txt", "class1/img001.jpg"}
	for _, p := range resident {
		if _, err := os.ReadFile(filepath.Join(e.mnt, p)); err != nil {
			t.Fatal(err)
		}
	}
	e.settle()
	before := e.cat.Files()
	if out, err := exec.Command("umount", "-l", bind).CombinedOutput(); err != nil {
		t.Fatalf("umount -l: %s", out)
	}
	// The next check of the root's identity (at most a second away)
	// finds the outage.
	waitUntil(t, 10*time.Second, func() bool { return e.status()["source_state"] == "unavailable" })
	checkAll(t, src, e.mnt, resident)
	_, err := os.ReadFile(filepath.Join(e.mnt, "class2/img003.jpg"))
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("non-resident read during the outage: %v, want EIO", err)
	}
	if st := e.status(); st["source_state"] != "unavailable" || st["source_unavailable_since"] == "" {
		t.Fatalf("status during the outage: source_state=%q since=%q", st["source_state"], st["source_unavailable_since"])
	}
	ents, err := os.ReadDir(e.mnt)
	if err != nil || len(ents) == 0 {
		t.Fatalf("listing during the outage: %d entries, %v", len(ents), err)
	}
	if err := os.WriteFile(filepath.Join(e.mnt, ".epochfs/refresh"), []byte("all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, func() bool { return !e.p.Scrubber().Status().Running && e.p.Scrubber().Status().Finished > 0 })
	if got := e.cat.Files(); got != before {
		t.Fatalf("a refresh during the outage dropped %d of %d files", before-got, before)
	}
	// Back, and gone and back again: each time every file reads without a
	// remount. The time from the source's return to the first read of a
	// file with no copy is logged (docs/benchmarks.md, "Safe source
	// resolution"; a figure, not an assertion).
	var took []time.Duration
	for round := range 3 {
		if round > 0 {
			if out, err := exec.Command("umount", "-l", bind).CombinedOutput(); err != nil {
				t.Fatalf("umount -l: %s", out)
			}
			waitUntil(t, 10*time.Second, func() bool { return e.status()["source_state"] == "unavailable" })
		}
		if out, err := exec.Command("mount", "--bind", src, bind).CombinedOutput(); err != nil {
			t.Fatalf("bind mount again: %s", out)
		}
		back := time.Now()
		fresh := []string{"class2/img003.jpg", "class2/img004.jpg", "class1/img002.jpg"}[round]
		waitUntil(t, 10*time.Second, func() bool {
			_, err := os.ReadFile(filepath.Join(e.mnt, fresh))
			return err == nil
		})
		took = append(took, time.Since(back))
		if got := e.status()["source_state"]; got != "available" {
			t.Fatalf("round %d: read again but source_state=%s", round, got)
		}
		checkAll(t, src, e.mnt, []string{fresh})
		e.settle()
		if got := e.cat.Files(); got != before {
			t.Fatalf("round %d: %d of %d files left", round, got, before)
		}
	}
	checkAll(t, src, e.mnt, paths)
	t.Logf("time from the source's return to the first read of a file without a copy: %v (source identity checked at most once a second)", took)
}

// A user prepares the RAM tier's directory under /dev/shm before the
// prolog mounts (a reboot wiped /dev/shm): the mount is refused with one
// line and exit 2, and the root-owned directory the user's symlink points
// to is left as it was.
func TestATierDirectoryAUserPreparedIsRefused(t *testing.T) {
	src, _, base, mnt := binDirs(t, 1<<10)
	u := newUsers(t, 1)
	shm, err := os.MkdirTemp("/dev/shm", "epochfs-sec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	if err := syscall.Chmod(shm, 0o1777); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(base, "rootdir")
	if err := os.Mkdir(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	tierDir := filepath.Join(shm, "T")
	if out, err := u.as(0, fmt.Sprintf("mkdir %q && ln -s %q %q", tierDir, victim, filepath.Join(tierDir, "data"))); err != nil {
		t.Fatalf("as the user: %s", out)
	}
	linkTier := filepath.Join(shm, "L")
	if out, err := u.as(0, fmt.Sprintf("ln -s %q %q", victim, linkTier)); err != nil {
		t.Fatalf("as the user: %s", out)
	}
	for _, dir := range []string{tierDir, linkTier} {
		code, out := cli(t, "mount", "--state", filepath.Join(base, "state"), "--tier=mem="+dir+":64MiB", src, mnt)
		if code != 2 || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, dir) {
			t.Fatalf("mount on a tier a user prepared (%s): exit %d: %q", dir, code, out)
		}
		if mounted(mnt) {
			t.Fatal("mounted anyway")
		}
	}
	if st, _ := os.Stat(victim); st.Mode().Perm() != 0o755 {
		t.Fatalf("the symlink's target changed mode to %v", st.Mode())
	}
	if ents, _ := os.ReadDir(victim); len(ents) != 0 {
		t.Fatalf("the daemon wrote into the symlink's target: %v", ents)
	}
}

// One user cannot take every job slot: past max_jobs_per_user (16) their
// mkdir fails with ENOSPC, and the next user and root still register.
func TestOneUserCannotTakeEveryJobSlot(t *testing.T) {
	requireFUSE(t)
	u := newUsers(t, 2)
	src, _ := makeTree(t, 1<<10)
	e := newEnv(t, src, 64<<20)
	openTempDirs(t, src, e.mnt)
	e.mount()
	jobs := filepath.Join(e.mnt, ".epochfs/jobs")
	out, _ := u.as(0, fmt.Sprintf(`ok=0; for i in $(seq 1 40); do mkdir %q/a$i 2>/dev/null && ok=$((ok+1)); done; echo ok=$ok; mkdir %q/last`, jobs, jobs))
	if !strings.Contains(out, "ok=16") || !strings.Contains(out, "No space left on device") {
		t.Fatalf("one user's 40 mkdirs: %q, want 16 jobs and then ENOSPC", out)
	}
	if out, err := u.as(1, fmt.Sprintf("mkdir %q/b1 && cat %q/b1/next >/dev/null", jobs, jobs)); err != nil {
		t.Fatalf("the next user cannot register a job: %v: %s", err, out)
	}
	if err := os.Mkdir(filepath.Join(jobs, "root1"), 0o755); err != nil {
		t.Fatalf("root cannot register a job: %v", err)
	}
	st := e.status()
	uid0, _ := user.Lookup(u.names[0])
	if st["jobs.uid."+uid0.Uid] != "16" || st["jobs.uid.0"] != "1" || st["jobs"] != "18" {
		t.Fatalf("status: jobs=%s jobs.uid.%s=%s jobs.uid.0=%s", st["jobs"], uid0.Uid, st["jobs.uid."+uid0.Uid], st["jobs.uid.0"])
	}
	// The user's errors name the refusal; the other user's do not show it.
	mine, _ := u.as(0, "cat "+filepath.Join(e.mnt, ".epochfs/errors"))
	theirs, _ := u.as(1, "cat "+filepath.Join(e.mnt, ".epochfs/errors"))
	all, _ := os.ReadFile(filepath.Join(e.mnt, ".epochfs/errors"))
	if !strings.Contains(mine, "live jobs") || strings.Contains(theirs, "live jobs") || !strings.Contains(string(all), "live jobs") {
		t.Fatalf("errors: the user's own %q, another user's %q, root's %q", mine, theirs, all)
	}
}

// A batch config that would make the root daemon hold an oversized batch
// is refused when it is written, and changes nothing; a batch whose every
// sample was left out keeps the batch's shape.
func TestOversizedBatchesAreRefusedAndEmptyBatchesKeepTheirShape(t *testing.T) {
	requireFUSE(t)
	u := newUsers(t, 1)
	src := filepath.Join(t.TempDir(), "src")
	makeJPEGs(t, src, 4)
	write(t, filepath.Join(src, "bad", "corrupt.jpg"), "\xff\xd8\xff broken", 0o644)
	e := newEnv(t, src, 1<<30)
	e.opts.views = &views.Config{Pipeline: viewPipeline, Seed: 3, AugmentedBytes: 16 << 20}
	openTempDirs(t, src, e.mnt)
	e.mount()
	job := filepath.Join(e.mnt, ".epochfs/jobs/j")
	out, err := u.as(0, fmt.Sprintf(`mkdir %q && printf 'batch_size=8\n' > %q/config && printf 'batch_size=8\naugment=resize:2048x2048\noutput=float32_chw\n' > %q/config`, job, job, job))
	if err == nil || !strings.Contains(out, "Invalid argument") {
		t.Fatalf("an oversized batch config: %v %q, want EINVAL", err, out)
	}
	cfg, _ := u.as(0, "cat "+filepath.Join(job, "config"))
	if !strings.Contains(cfg, "batch_size=8") || strings.Contains(cfg, "2048") {
		t.Fatalf("the refused config changed the job's:\n%s", cfg)
	}
	errs, _ := u.as(0, "cat "+filepath.Join(e.mnt, ".epochfs/errors"))
	if !strings.Contains(errs, "max_batch_bytes") {
		t.Fatalf("errors lack the reason: %q", errs)
	}
	// A job of the corrupt file only: its batch has no sample, and x the
	// shape of the pipeline's output.
	if err := os.WriteFile(filepath.Join(job, "config"), []byte("batch_size=1\nsubset=bad\n"), 0); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(job, "batch"))
	if err != nil {
		t.Fatal(err)
	}
	x := readNPZ(t, b)["x"]
	if want := []int{0, 32, 32, 3}; fmt.Sprint(x.shape) != fmt.Sprint(want) {
		t.Fatalf("x of a batch with every sample left out: %v, want %v", x.shape, want)
	}
}

// A source file changes (same size, a new mtime) while a handle reads it
// from the source: every read of the handle returns the version it opened
// or fails with EIO; none blocks, and none returns bytes of the new
// version. The change lands in each phase of a read: after the open,
// between reads, and while the file is being copied into a tier.
func TestASourceFileChangedUnderAnOpenHandleNeverHangsNorMixes(t *testing.T) {
	requireFUSE(t)
	const size = 4 << 20
	for _, c := range []struct {
		name  string
		quota int64 // 1 KiB: never placed, read from the source
		after int   // chunks read before the change
	}{
		{"after the open", 1 << 10, 0},
		{"between reads", 1 << 10, 1},
		// At 1 MB/s the 4 MiB copy takes seconds: the reader follows it
		// and the change lands in the middle.
		{"during a copy", 1 << 30, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "src")
			old := bytes.Repeat([]byte("o"), size)
			write(t, filepath.Join(src, "f.bin"), string(old), 0o644)
			e := newEnv(t, src, c.quota)
			e.opts.noPassthrough = true
			e.opts.validate = placement.ValidateOpen // the next open sees the change
			e.opts.sourceBandwidth = 1e6
			e.mount()
			f, err := os.Open(filepath.Join(e.mnt, "f.bin"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			chunk := make([]byte, 1<<20)
			read := func(i int) error {
				done := make(chan error, 1)
				go func() {
					n, err := f.ReadAt(chunk, int64(i)*int64(len(chunk)))
					if err == nil && !bytes.Equal(chunk[:n], old[:n]) {
						err = fmt.Errorf("chunk %d holds bytes of the new version", i)
					}
					done <- err
				}()
				select {
				case err := <-done:
					return err
				case <-time.After(15 * time.Second):
					t.Fatalf("read of chunk %d still blocked after 15s", i)
				}
				return nil
			}
			for i := 0; i < c.after; i++ {
				if err := read(i); err != nil {
					t.Fatalf("chunk %d before the change: %v", i, err)
				}
			}
			write(t, filepath.Join(src, "f.bin"), strings.Repeat("n", size), 0o644)
			later := time.Now().Add(time.Hour)
			os.Chtimes(filepath.Join(src, "f.bin"), later, later)
			failed := false
			for i := c.after; i < size/len(chunk); i++ {
				err := read(i)
				switch {
				case err == nil && failed:
					t.Fatalf("chunk %d read after an earlier chunk failed", i)
				case err == nil:
				case errors.Is(err, syscall.EIO):
					failed = true
				default:
					t.Fatalf("chunk %d: %v", i, err)
				}
			}
			f.Close()
			// The next open reads the new version, whole.
			waitUntil(t, 10*time.Second, func() bool {
				b, err := os.ReadFile(filepath.Join(e.mnt, "f.bin"))
				return err == nil && bytes.Equal(b, []byte(strings.Repeat("n", size)))
			})
		})
	}
}

// A refresh that finds most of the dataset gone keeps it (max_drop) and
// says how to proceed; with --allow-drop it removes what is gone.
func TestARefreshThatWouldDropMuchOfTheDatasetStopsUntilAllowed(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<10)
	for i := range 30 {
		p := filepath.Join(src, "many", fmt.Sprintf("f%02d", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	binMount(t, src, mnt, filepath.Join(base, "state"), "--tier=disk="+filepath.Join(base, "tier")+":1GiB")
	total := len(paths) + 30
	for i := range 30 {
		os.Remove(filepath.Join(src, "many", fmt.Sprintf("f%02d", i)))
	}
	code, out := cli(t, "refresh", mnt)
	if code != 1 || !strings.Contains(out, "--allow-drop") || !strings.Contains(out, "max_drop") {
		t.Errorf("refresh with 30 of %d files gone: exit %d, %q; want exit 1 naming max_drop and --allow-drop", total, code, out)
	}
	des, _ := os.ReadDir(filepath.Join(mnt, "many"))
	limit := max(1, total/10)
	if len(des) < 30-limit {
		t.Errorf("after the refresh, many/ lists %d files: more than max_drop (%d of %d) were removed", len(des), limit, total)
	}
	if n, _ := strconv.Atoi(statusOf(t, mnt)["files_drop_held"]); n < 30-limit {
		t.Errorf("status files_drop_held = %d, want at least %d", n, 30-limit)
	}
	code, out = cli(t, "refresh", "--allow-drop", mnt)
	if code != 0 {
		t.Errorf("refresh --allow-drop: exit %d: %s", code, out)
	}
	if des, _ := os.ReadDir(filepath.Join(mnt, "many")); len(des) != 0 {
		t.Errorf("after refresh --allow-drop, many/ still lists %d files", len(des))
	}
	checkAll(t, src, mnt, paths)
}

// One user's warmup backlog is bounded: past max_warmup_per_user their
// next warmup document fails with EDQUOT and queues nothing, while other
// users and root still warm up.
func TestOneUsersWarmupBacklogIsBounded(t *testing.T) {
	requireFUSE(t)
	u := newUsers(t, 2)
	src := filepath.Join(t.TempDir(), "src")
	for i := range 4 {
		write(t, filepath.Join(src, "a", fmt.Sprint(i)), strings.Repeat("x", 4<<20), 0o644)
	}
	e := newEnv(t, src, 1<<30)
	e.opts.sourceBandwidth = 50 << 10 // copies outlast the test: the backlog stays
	e.opts.maxWarmupPerUser = 6 << 20
	openTempDirs(t, src, e.mnt)
	e.mount()
	warm := filepath.Join(e.mnt, ".epochfs/warmup")
	if out, err := u.as(0, fmt.Sprintf("echo a/0 > %q", warm)); err != nil {
		t.Fatalf("a first warmup of 4 MiB: %v: %s", err, out)
	}
	out, err := u.as(0, fmt.Sprintf("echo a/1 > %q", warm))
	if err == nil || !strings.Contains(out, "quota") {
		errs, _ := os.ReadFile(filepath.Join(e.mnt, ".epochfs/errors"))
		t.Fatalf("a second warmup past 6 MiB: %v %q, want EDQUOT; errors: %s", err, out, errs)
	}
	// The same from Python: the write raises EDQUOT.
	py := fmt.Sprintf(`/usr/bin/python3 -c 'import errno
try:
    with open(%q, "w") as f:
        f.write("a/2\n")
except OSError as e:
    print("errno", errno.errorcode[e.errno])'`, warm)
	if out, _ := u.as(0, py); !strings.Contains(out, "errno EDQUOT") {
		t.Fatalf("a warmup past the bound written from Python: %q, want EDQUOT", out)
	}
	if out, err := u.as(1, fmt.Sprintf("echo a/1 > %q", warm)); err != nil {
		t.Fatalf("another user's warmup: %v: %s", err, out)
	}
	if err := os.WriteFile(warm, []byte("all\n"), 0); err != nil {
		t.Fatalf("root's warmup of everything: %v", err)
	}
	uid0, _ := user.Lookup(u.names[0])
	if got := e.status()["warmup_bytes.uid."+uid0.Uid]; got != strconv.Itoa(4<<20) {
		t.Errorf("status warmup_bytes.uid.%s = %q, want the 4 MiB of a/0 (the refused document charged nothing)", uid0.Uid, got)
	}
	mine, _ := u.as(0, "cat "+filepath.Join(e.mnt, ".epochfs/errors"))
	if !strings.Contains(mine, "max_warmup_per_user") {
		t.Errorf("the user's errors do not name max_warmup_per_user: %q", mine)
	}
}

// unmount never says "unmounted" while the daemon still runs, even when it
// finds no record of it and the daemon does not answer: here its record
// is gone (a wiped runtime directory) and it is stopped (SIGSTOP).
func TestUnmountTellsTheTruthAboutADaemonItCannotAsk(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<10)
	binMount(t, src, mnt, filepath.Join(base, "state"), "--tier=disk="+filepath.Join(base, "tier")+":1GiB")
	checkAll(t, src, mnt, paths)
	pid, _ := strconv.Atoi(statusOf(t, mnt)["pid"])
	if pid <= 0 {
		t.Fatal("no pid in status")
	}
	rec := filepath.Join(mounts.RuntimeDir(), mounts.Key(mnt)+".json")
	if err := os.Remove(rec); err != nil {
		t.Fatalf("the daemon's record: %v", err)
	}
	syscall.Kill(pid, syscall.SIGSTOP)
	cont := sync.OnceFunc(func() { syscall.Kill(pid, syscall.SIGCONT) })
	t.Cleanup(cont)
	// --lazy: a plain unmount is busy with the CLI's own status read,
	// blocked in the stopped daemon. Over /dev/fuse that read is still
	// waiting in the kernel's queue when the CLI gives up, and its exit
	// takes it back; over io_uring the kernel has handed it to the
	// daemon's ring already, and the CLI can exit only once the daemon
	// answers: so the daemon is let go after a while, once the CLI has
	// had its say.
	type result struct {
		code int
		out  string
	}
	done := make(chan result, 1)
	go func() {
		code, out := cli(t, "unmount", "--lazy", "--timeout", "2s", mnt)
		done <- result{code, out}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		cont()
		r = <-done
	}
	code, out := r.code, r.out
	if code == 0 || strings.Contains(out, "unmounted "+mnt+"\n") || !strings.Contains(out, "still running") {
		t.Errorf("unmount --lazy with its daemon stopped: exit %d: %q; want a failure saying the daemon still runs", code, out)
	}
	cont()
	waitFor(t, func() bool { return !processAlive(pid) })
	if mounted(mnt) {
		t.Errorf("%s still mounted", mnt)
	}
}
