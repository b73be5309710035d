package mount

// `epochfs mount` and `epochfs unmount` as job prologs and epilogs call
// them: twice, concurrently, after a crash, per job.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestMountOfAMountedSourceIsANoOpAndOfAnotherSourceExitsTwo(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<20)
	state := filepath.Join(base, "state")
	tierFlag := "--tier=mem=" + filepath.Join(base, "tier") + ":1GiB"
	binMount(t, src, mnt, state, tierFlag)
	pid := daemonPID(t, mnt)

	code, out := cli(t, "mount", "--state", state, tierFlag, src, mnt)
	if code != 0 || !strings.Contains(out, "already mounted") || !strings.Contains(out, strconv.Itoa(pid)) {
		t.Fatalf("second mount of the same source: exit %d, want 0 saying already mounted by pid %d: %s", code, pid, out)
	}
	if daemonPID(t, mnt) != pid {
		t.Fatal("the second mount replaced the daemon")
	}
	// Another configuration of the same source: kept, with a warning.
	code, out = cli(t, "mount", "--state", state, "--tier=mem="+filepath.Join(base, "tier")+":2GiB", src, mnt)
	if code != 0 || !strings.Contains(out, "another configuration") {
		t.Fatalf("mount with another configuration: exit %d, want 0 with a warning: %s", code, out)
	}

	other := filepath.Join(base, "other")
	os.Mkdir(other, 0o755)
	os.WriteFile(filepath.Join(other, "x"), []byte("x"), 0o644)
	code, out = cli(t, "mount", "--state", filepath.Join(base, "state2"), "--tier=mem="+filepath.Join(base, "tier2")+":1GiB", other, mnt)
	if code != 2 || !strings.Contains(out, "already mounted from "+src) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("mount of another source on the mount point: exit %d, want 2 and one line naming %s: %s", code, src, out)
	}
	// The state directory belongs to the mount at mnt.
	mnt2 := filepath.Join(base, "mnt2")
	os.Mkdir(mnt2, 0o755)
	code, out = cli(t, "mount", "--state", state, "--tier=mem="+filepath.Join(base, "tier3")+":1GiB", src, mnt2)
	if code != 2 || !strings.Contains(out, "in use by the epochfs mount of "+src+" at "+mnt) {
		t.Fatalf("mount of a state directory another mount uses: exit %d, want 2 naming the mount: %s", code, out)
	}
	if mounted(mnt2) {
		t.Fatal("the refused mount mounted")
	}
	checkAll(t, src, mnt, paths)
}

func TestConcurrentMountsSerializeAndAllSucceedWithOneDaemon(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<20)
	state := filepath.Join(base, "state")
	tierFlag := "--tier=mem=" + filepath.Join(base, "tier") + ":1GiB"
	t.Cleanup(func() {
		if mounted(mnt) {
			cli(t, "unmount", "--lazy", mnt)
		}
	})
	const n = 4
	codes := make([]int, n)
	outs := make([]string, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], outs[i] = cli(t, "mount", "--user-ref", fmt.Sprint("job", i), "--state", state, tierFlag, src, mnt)
		}()
	}
	wg.Wait()
	mountedBy := 0
	for i := 0; i < n; i++ {
		if codes[i] != 0 {
			t.Errorf("mount %d: exit %d: %s", i, codes[i], outs[i])
		}
		if strings.Contains(outs[i], "mounted at") && !strings.Contains(outs[i], "already") {
			mountedBy++
		}
	}
	if mountedBy != 1 {
		t.Fatalf("%d of %d concurrent mounts mounted, want exactly 1:\n%s", mountedBy, n, strings.Join(outs, ""))
	}
	checkAll(t, src, mnt, paths)
	// Every job is a user: the mount goes with the last.
	for i := 0; i < n; i++ {
		code, out := cli(t, "unmount", "--user-ref", fmt.Sprint("job", i), mnt)
		if code != 0 {
			t.Fatalf("unmount --user-ref job%d: exit %d: %s", i, code, out)
		}
		if last := i == n-1; mounted(mnt) == last {
			t.Fatalf("after the unmount of job%d of %d: mounted %v: %s", i, n, mounted(mnt), out)
		}
	}
	if left := runtimeFiles(mnt); len(left) > 0 {
		t.Fatalf("files of the unmounted %s left in /run/epochfs: %v", mnt, left)
	}
}

// runtimeFiles lists /run/epochfs's files of the mount point mnt (its
// record, lock and users).
func runtimeFiles(mnt string) []string {
	key := strings.ReplaceAll(strings.TrimPrefix(mnt, "/"), "/", "%2F")
	left, _ := filepath.Glob(filepath.Join("/run/epochfs", key+".*"))
	return left
}

func TestADeadMountIsClearedAndMountedAgain(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<20)
	state := filepath.Join(base, "state")
	tierFlag := "--tier=mem=" + filepath.Join(base, "tier") + ":1GiB"
	binMount(t, src, mnt, state, tierFlag, "--user-ref", "1")
	checkAll(t, src, mnt, paths)
	// Every copy installed and recorded: a crash loses the records not yet
	// written (a busy catalog writes a batch per 250 ms).
	waitFor(t, func() bool {
		st := statusOf(t, mnt)
		return st["files_resident"] == st["files_total"] && st["catalog_pending"] == "0"
	})
	pid := daemonPID(t, mnt)
	syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, func() bool { return !daemonRunning(pid) })
	// ENOTCONN; ECONNABORTED when the open reached the kernel while it
	// was still aborting the connection of the killed daemon.
	if _, err := os.ReadFile(filepath.Join(mnt, "a/small.txt")); !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ECONNABORTED) {
		t.Fatalf("read on the dead mount: %v, want ENOTCONN", err)
	}
	code, out := cli(t, "mount", "--user-ref", "2", "--state", state, tierFlag, src, mnt)
	if code != 0 || !strings.Contains(out, "cleared the dead epochfs mount") {
		t.Fatalf("mount over a dead mount: exit %d: %s", code, out)
	}
	checkAll(t, src, mnt, paths)
	if st := statusOf(t, mnt); st["source_opens"] != "0" {
		t.Fatalf("the remount read %s files from the source, want 0 (the copies are reused)", st["source_opens"])
	}
	// Job 1 ran on the dead mount; its epilog leaves job 2's mount alone.
	if code, out := cli(t, "unmount", "--user-ref", "1", mnt); code != 0 || !mounted(mnt) {
		t.Fatalf("unmount --user-ref of the earlier job: exit %d, mounted %v: %s", code, mounted(mnt), out)
	}
	if code, out := cli(t, "unmount", "--user-ref", "2", mnt); code != 0 || mounted(mnt) {
		t.Fatalf("unmount --user-ref of the last job: exit %d, mounted %v: %s", code, mounted(mnt), out)
	}
}

func TestKeptMountIsNeverUnmountedByAUserButByAPlainUnmount(t *testing.T) {
	src, _, base, mnt := binDirs(t, 1<<10)
	state := filepath.Join(base, "state")
	binMount(t, src, mnt, state, "--tier=mem="+filepath.Join(base, "tier")+":1GiB", "--keep", "--user-ref", "a")
	code, out := cli(t, "unmount", "--user-ref", "a", mnt)
	if code != 0 || !strings.Contains(out, "kept") || !mounted(mnt) {
		t.Fatalf("unmount --user-ref of a kept mount: exit %d, mounted %v: %s", code, mounted(mnt), out)
	}
	// An unknown user changes nothing either.
	if code, out := cli(t, "unmount", "--user-ref", "never-mounted", mnt); code != 0 || !mounted(mnt) {
		t.Fatalf("unmount --user-ref of an unknown user: exit %d, mounted %v: %s", code, mounted(mnt), out)
	}
	if code, out := cli(t, "unmount", mnt); code != 0 || mounted(mnt) {
		t.Fatalf("plain unmount of a kept mount: exit %d, mounted %v: %s", code, mounted(mnt), out)
	}
	// The next mount starts with no user and not kept.
	binMount(t, src, mnt, state, "--tier=mem="+filepath.Join(base, "tier")+":1GiB", "--user-ref", "b")
	if code, out := cli(t, "unmount", "--user-ref", "b", mnt); code != 0 || mounted(mnt) {
		t.Fatalf("unmount --user-ref of the only user after a kept mount: exit %d, mounted %v: %s", code, mounted(mnt), out)
	}
	if left := runtimeFiles(mnt); len(left) > 0 {
		t.Fatalf("files of the unmounted %s left in /run/epochfs: %v", mnt, left)
	}
}

// userBinary copies the epochfs binary where the test user can run it.
func userBinary(t *testing.T) string {
	t.Helper()
	dir := userDir(t)
	data, err := os.ReadFile(binPath)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "epochfs")
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// userDir is a temp directory the test user can reach.
func userDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != "/" && d != "/tmp"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	return dir
}

// asUser runs the binary bin as the test user.
func asUser(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	uid, gid := testUser(t)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/"}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

func TestAUserUnmountingRootsMountIsToldWhoCanUnmountIt(t *testing.T) {
	requireFUSE(t)
	src, _ := makeTree(t, 1<<10)
	base := userDir(t)
	mnt := filepath.Join(base, "mnt")
	os.Mkdir(mnt, 0o755)
	binMount(t, src, mnt, filepath.Join(base, "state"), "--tier=mem="+filepath.Join(base, "tier")+":1GiB")
	code, out := asUser(t, userBinary(t), "unmount", mnt)
	if code != 1 || !strings.Contains(out, "mounted by root") || !strings.Contains(out, "sudo epochfs unmount "+mnt) || strings.Contains(out, "mtab") {
		t.Fatalf("a user's unmount of root's mount: exit %d, want 1 saying root mounted it and how to unmount: %s", code, out)
	}
	if !mounted(mnt) {
		t.Fatal("the refused unmount unmounted")
	}
	if code, out := cli(t, "unmount", mnt); code != 0 {
		t.Fatalf("root's unmount: exit %d: %s", code, out)
	}
}

func TestAnUnprivilegedMountThatCannotWorkSaysWhyAndWhatToDo(t *testing.T) {
	requireFUSE(t)
	uid, gid := testUser(t)
	base := userDir(t)
	bin := userBinary(t)
	src := filepath.Join(base, "src")
	os.Mkdir(src, 0o755)
	os.WriteFile(filepath.Join(src, "x"), []byte("x"), 0o644)
	own := func(p string) {
		os.MkdirAll(p, 0o755)
		if err := os.Chown(p, int(uid), int(gid)); err != nil {
			t.Fatal(err)
		}
	}
	own(filepath.Join(base, "state"))
	own(filepath.Join(base, "tier"))
	args := func(mnt string) []string {
		return []string{"mount", "--state", filepath.Join(base, "state"), "--tier=mem=" + filepath.Join(base, "tier") + ":1GiB", src, mnt}
	}
	// A mount point the user may not write: refused before anything starts.
	rootOwned := filepath.Join(base, "root-owned")
	os.Mkdir(rootOwned, 0o755)
	code, out := asUser(t, bin, args(rootOwned)...)
	if code != 2 || !strings.Contains(out, "not writable by uid") || !strings.Contains(out, "mount as root") {
		t.Fatalf("unprivileged mount on a root directory: exit %d, want 2 saying why and what to do: %s", code, out)
	}
	// A sticky directory the user may write but does not own: fusermount3
	// refuses, and the command says what it said, not its exit status.
	sticky := filepath.Join(base, "sticky")
	os.Mkdir(sticky, 0o755)
	os.Chmod(sticky, 0o777|os.ModeSticky)
	code, out = asUser(t, bin, args(sticky)...)
	if mounted(sticky) {
		syscall.Unmount(sticky, syscall.MNT_DETACH)
		t.Fatal("fusermount3 mounted on a sticky directory of root's")
	}
	// Where /dev/fuse is closed to users (this machine: mode 0600) that
	// is fusermount3's reason; elsewhere the sticky directory is.
	want := fmt.Sprintf("use a mount point owned and writable by uid %d", uid)
	if st, err := os.Stat("/dev/fuse"); err == nil && st.Mode().Perm()&0o006 != 0o006 {
		want = "may not use /dev/fuse"
	}
	if code != 1 || strings.Contains(out, "exited with code") || !strings.Contains(out, "fusermount3: ") || !strings.Contains(out, want) || !strings.Contains(out, "mount as root") {
		t.Fatalf("unprivileged mount refused by fusermount3: exit %d, want its reason and %q: %s", code, want, out)
	}
	if strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("want one line, got:\n%s", out)
	}
}

// A mount made for no job (by hand, or by the systemd unit, without
// --user-ref) is never unmounted by a job's epilog: a job that joins it
// (prolog: mount --user-ref) and leaves (epilog: unmount --user-ref) leaves
// it mounted, as does the epilog of a job that never joined; a plain
// unmount ends it.
func TestAMountMadeByHandOutlivesTheJobsThatUseIt(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<10)
	state := filepath.Join(base, "state")
	tierFlag := "--tier=mem=" + filepath.Join(base, "tier") + ":1GiB"
	binMount(t, src, mnt, state, tierFlag)
	for _, job := range []string{"101", "102"} {
		if code, out := cli(t, "mount", "--user-ref", job, "--state", state, tierFlag, src, mnt); code != 0 {
			t.Fatalf("prolog of job %s: exit %d: %s", job, code, out)
		}
		checkAll(t, src, mnt, paths)
		if code, out := cli(t, "unmount", "--user-ref", job, mnt); code != 0 || !mounted(mnt) {
			t.Fatalf("epilog of job %s unmounted the mount made by hand (exit %d): %s", job, code, out)
		}
	}
	code, out := cli(t, "unmount", "--user-ref", "103", mnt)
	if code != 0 || !mounted(mnt) || !strings.Contains(out, "not used by 103") {
		t.Fatalf("epilog of a job that never joined: exit %d, mounted %v: %s", code, mounted(mnt), out)
	}
	checkAll(t, src, mnt, paths)
	if code, out := cli(t, "unmount", mnt); code != 0 || mounted(mnt) {
		t.Fatalf("plain unmount: exit %d, mounted %v: %s", code, mounted(mnt), out)
	}
	if left := runtimeFiles(mnt); len(left) > 0 {
		t.Fatalf("files of the unmounted %s left in /run/epochfs: %v", mnt, left)
	}
}

// A plain unmount ends the mount's users and its keep as soon as the mount
// is gone from the mount point, even while its daemon still drains files
// held open on the detached mount: the next mount there starts afresh, so
// a job's epilog unmounts it.
func TestADetachedMountLeavesNoKeepBehind(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<10)
	state := filepath.Join(base, "state")
	tierFlag := "--tier=mem=" + filepath.Join(base, "tier") + ":1GiB"
	binMount(t, src, mnt, state, tierFlag) // by hand: kept
	f, err := os.Open(filepath.Join(mnt, paths[0]))
	if err != nil {
		t.Fatal(err)
	}
	if code, out := cli(t, "unmount", "--lazy", "--timeout", "200ms", mnt); code != 1 || mounted(mnt) {
		f.Close()
		t.Fatalf("lazy unmount with a file open: exit %d, mounted %v: %s; want exit 1 (daemon draining), detached", code, mounted(mnt), out)
	}
	f.Close()
	// The next job's prolog, retrying while the daemon drains (no plain
	// unmount in between).
	mountWhenDrained(t, "--user-ref", "job7", "--state", state, tierFlag, src, mnt)
	if code, out := cli(t, "unmount", "--user-ref", "job7", mnt); code != 0 || mounted(mnt) {
		t.Fatalf("the job's epilog after a mount that was kept and detached: exit %d, mounted %v: %s", code, mounted(mnt), out)
	}
}

// mountWhenDrained runs `epochfs mount ARGS` until it succeeds, as a
// prolog does while an earlier daemon of the mount still drains (up to
// 30 s); any other refusal fails the test.
func mountWhenDrained(t *testing.T, args ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out := cli(t, append([]string{"mount"}, args...)...)
		if code == 0 {
			return
		}
		if time.Now().After(deadline) || !strings.Contains(out, "still draining") {
			t.Fatalf("mount %v: exit %d: %s", args, code, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
