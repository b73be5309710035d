package mount

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/epochfs/epochfs/internal/mounts"
)

// daemonRunning reports whether some thread of process pid is not a
// zombie: a daemon whose last thread is gone holds no lock any more.
func daemonRunning(pid int) bool {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return false
	}
	for _, task := range tasks {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X' {
			return true
		}
	}
	return false
}

// daemonPID is the pid the mount's status names.
func daemonPID(t *testing.T, mnt string) int {
	t.Helper()
	pid, _ := strconv.Atoi(statusOf(t, mnt)["pid"])
	if pid <= 0 {
		t.Fatal("no pid in status")
	}
	return pid
}

// holdOpen starts a process that keeps path open until it is killed, as a
// training job that has not closed its files; it is killed at the end.
func holdOpen(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "600")
	cmd.ExtraFiles = []*os.File{f}
	err = cmd.Start()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopHolder(cmd) })
	return cmd
}

// stopHolder kills a holdOpen process (by its pid) and reaps it.
func stopHolder(cmd *exec.Cmd) {
	if cmd.ProcessState == nil {
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// lockFile is the daemon's lock in a state directory.
func lockFile(state string) string { return filepath.Join(state, "daemon.lock") }

// lockHeld reports whether a process holds state's lock (if none does,
// this takes it for an instant).
func lockHeld(t *testing.T, state string) bool {
	t.Helper()
	f, err := os.OpenFile(lockFile(state), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}

// lockPID is the pid written in state's lock.
func lockPID(t *testing.T, state string) int {
	t.Helper()
	data, err := os.ReadFile(lockFile(state))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// recordOf returns the pid in the runtime record naming mnt (0 if none).
func recordOf(mnt string) int {
	paths, _ := filepath.Glob("/run/epochfs/*.json")
	for _, p := range paths {
		var r struct {
			PID        int    `json:"pid"`
			Mountpoint string `json:"mountpoint"`
		}
		data, err := os.ReadFile(p)
		if err == nil && json.Unmarshal(data, &r) == nil && r.Mountpoint == mnt {
			return r.PID
		}
	}
	return 0
}

func TestUnmountOfABusyMountFailsAndLeavesItServing(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<20)
	state := filepath.Join(base, "state")
	binMount(t, src, mnt, state, "--tier=mem="+filepath.Join(base, "tier")+":1GiB")
	pid := daemonPID(t, mnt)
	holder := holdOpen(t, filepath.Join(mnt, "a/small.txt"))

	code, out := cli(t, "unmount", mnt)
	if code != 1 || !strings.Contains(out, "busy") || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("unmount of a busy mount: exit %d, want 1 and one line saying busy: %q", code, out)
	}
	if !mounted(mnt) || !daemonRunning(pid) {
		t.Fatalf("after a refused unmount: mounted %v, daemon running %v", mounted(mnt), daemonRunning(pid))
	}
	checkAll(t, src, mnt, paths)

	stopHolder(holder)
	if code, out := cli(t, "unmount", mnt); code != 0 || !strings.Contains(out, "unmounted") {
		t.Fatalf("unmount once nothing is open: exit %d: %s", code, out)
	}
	if daemonRunning(pid) {
		t.Fatalf("unmount said unmounted while daemon %d still runs", pid)
	}
}

func TestLazyUnmountWithAFileOpenReportsTheDrainingDaemonAndItsLock(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<20)
	state := filepath.Join(base, "state")
	tierFlag := "--tier=mem=" + filepath.Join(base, "tier") + ":1GiB"
	binMount(t, src, mnt, state, tierFlag)
	checkAll(t, src, mnt, paths)
	waitFor(t, func() bool { st := statusOf(t, mnt); return st["files_resident"] == st["files_total"] })
	pid := daemonPID(t, mnt)
	holder := holdOpen(t, filepath.Join(mnt, "class2/img004.jpg"))

	// Detached at once, but the daemon serves the open file: not done.
	code, out := cli(t, "unmount", "--lazy", "--timeout", "2s", mnt)
	if code != 1 {
		t.Fatalf("lazy unmount with a file open: exit %d, want 1: %s", code, out)
	}
	for _, want := range []string{fmt.Sprintf("daemon (pid %d) is still running", pid), filepath.Join(state, "epochfs.log")} {
		if !strings.Contains(out, want) {
			t.Errorf("message %q lacks %q", out, want)
		}
	}
	if strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("want one line, got:\n%s", out)
	}
	if mounted(mnt) || !daemonRunning(pid) {
		t.Fatalf("after the lazy unmount: mounted %v (want false), daemon running %v (want true)", mounted(mnt), daemonRunning(pid))
	}
	// A retry tells the same while the daemon drains.
	if code, out := cli(t, "unmount", "--timeout", "1s", mnt); code != 1 || !strings.Contains(out, fmt.Sprintf("pid %d", pid)) {
		t.Fatalf("unmount of the detached, draining mount: exit %d, want 1 naming pid %d: %s", code, pid, out)
	}

	// The state directory is the draining daemon's: a second mount says
	// so, whether it daemonizes or stays in the foreground, and mounts
	// nothing.
	mnt2 := filepath.Join(base, "mnt2")
	os.Mkdir(mnt2, 0o755)
	want := fmt.Sprintf("state directory %s is in use by epochfs daemon pid %d", state, pid)
	for _, fg := range [][]string{nil, {"--foreground"}} {
		args := append(append([]string{"mount"}, fg...), "--state", state, tierFlag, src, mnt2)
		code, out := cli(t, args...)
		if code != 1 || !strings.Contains(out, want) || strings.Contains(out, "directory lock") {
			t.Errorf("mount %v of a draining daemon's state: exit %d, want 1 and %q:\n%s", fg, code, want, out)
		}
		if fg == nil && strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Errorf("want one line, got:\n%s", out)
		}
		if mounted(mnt2) {
			syscall.Unmount(mnt2, syscall.MNT_DETACH)
			t.Fatal("the refused mount mounted")
		}
	}
	if lockPID(t, state) != pid {
		t.Fatalf("the refused mounts rewrote the lock: pid %d, want %d", lockPID(t, state), pid)
	}

	// The last file closes: the daemon exits by itself and frees the state.
	stopHolder(holder)
	waitFor(t, func() bool { return !daemonRunning(pid) })
	if lockHeld(t, state) || recordOf(mnt) != 0 {
		t.Fatalf("after the daemon's exit: lock held %v, runtime record %d", lockHeld(t, state), recordOf(mnt))
	}
	if code, out := cli(t, "unmount", mnt); code != 0 || !strings.Contains(out, "not mounted; nothing to do") {
		t.Fatalf("unmount with no mount and no daemon: exit %d, want 0 with a note: %s", code, out)
	}
	if code, out := cli(t, "unmount", "--strict", mnt); code != 2 || !strings.Contains(out, "not mounted") {
		t.Fatalf("unmount --strict with no mount and no daemon: exit %d, want 2: %s", code, out)
	}
	binMount(t, src, mnt2, state, tierFlag)
	checkAll(t, src, mnt2, paths)
	if st := statusOf(t, mnt2); st["source_opens"] != "0" || st["files_resident"] != st["files_total"] {
		t.Fatalf("remount: %s source opens (want 0), %s of %s resident", st["source_opens"], st["files_resident"], st["files_total"])
	}
	pid2 := daemonPID(t, mnt2)
	if code, out := cli(t, "unmount", mnt2); code != 0 || daemonRunning(pid2) {
		t.Fatalf("unmount: exit %d, daemon running %v: %s", code, daemonRunning(pid2), out)
	}
}

func TestUnmountSaysUnmountedOnlyOnceTheDaemonHasExited(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 32<<20)
	state := filepath.Join(base, "state")
	cfg := filepath.Join(base, "c.toml")
	// A slow source: the big copy is still in flight at the unmount, and
	// the daemon has it to cancel and the catalog to close.
	os.WriteFile(cfg, []byte("[placement]\nsource_bandwidth = \"8MiB/s\"\n"), 0o644)
	for _, lazy := range []bool{false, true} {
		binMount(t, src, mnt, state, "--config", cfg, "--tier=disk="+filepath.Join(base, "tier")+":1GiB")
		checkAll(t, src, mnt, paths)
		pid := daemonPID(t, mnt)
		if recordOf(mnt) != pid || lockPID(t, state) != pid || !lockHeld(t, state) {
			t.Fatalf("a running daemon %d: runtime record %d, lock pid %d, held %v", pid, recordOf(mnt), lockPID(t, state), lockHeld(t, state))
		}
		args := []string{"unmount", mnt}
		if lazy {
			args = []string{"unmount", "--lazy", mnt}
		}
		code, out := cli(t, args...)
		if code != 0 || !strings.Contains(out, "unmounted") {
			t.Fatalf("%v: exit %d: %s", args, code, out)
		}
		if daemonRunning(pid) || processAlive(pid) {
			t.Fatalf("%v said unmounted while daemon %d still runs", args, pid)
		}
		if mounted(mnt) || lockHeld(t, state) || recordOf(mnt) != 0 {
			t.Fatalf("%v: mounted %v, lock held %v, runtime record %d", args, mounted(mnt), lockHeld(t, state), recordOf(mnt))
		}
	}
}

func TestSIGKILLedDaemonsLockIsTakenOverByTheNextMount(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<20)
	state := filepath.Join(base, "state")
	tierFlag := "--tier=mem=" + filepath.Join(base, "tier") + ":1GiB"
	binMount(t, src, mnt, state, tierFlag)
	checkAll(t, src, mnt, paths)
	pid := daemonPID(t, mnt)
	syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, func() bool { return !daemonRunning(pid) })
	// The kernel may close a dead process's last files a moment after its
	// threads are gone (a deferred close): the lock is free soon, not at once.
	waitFor(t, func() bool { return !lockHeld(t, state) })
	if lockPID(t, state) != pid || lockHeld(t, state) {
		t.Fatalf("a killed daemon's lock: pid %d (want %d), held %v (want false)", lockPID(t, state), pid, lockHeld(t, state))
	}
	// Nothing is open: a plain unmount clears the dead mount.
	if code, out := cli(t, "unmount", mnt); code != 0 || mounted(mnt) {
		t.Fatalf("unmount of a dead mount: exit %d, mounted %v: %s", code, mounted(mnt), out)
	}
	binMount(t, src, mnt, state, tierFlag)
	pid2 := daemonPID(t, mnt)
	if lockPID(t, state) != pid2 || !lockHeld(t, state) || recordOf(mnt) != pid2 {
		t.Fatalf("the new daemon %d: lock pid %d, held %v, runtime record %d", pid2, lockPID(t, state), lockHeld(t, state), recordOf(mnt))
	}
	checkAll(t, src, mnt, paths)
	if code, out := cli(t, "unmount", mnt); code != 0 {
		t.Fatalf("unmount: exit %d: %s", code, out)
	}
}

// hangingSource serves a directory through FUSE from the test process;
// reads of the file named hang block until release is closed (or the
// reader is interrupted): a source that stops answering.
type hangingSource struct {
	hang    string
	release chan struct{}
	unblock sync.Once
	waiting atomic.Int32 // reads blocked now
	open    atomic.Int32 // file handles not yet released
}

type hangingNode struct {
	fusefs.LoopbackNode
	s    *hangingSource
	name string
}

var _ = (fusefs.NodeOpener)((*hangingNode)(nil))

func (n *hangingNode) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return fh, fl, errno
	}
	n.s.open.Add(1)
	return &hangingFile{FileHandle: fh, s: n.s, hang: n.name == n.s.hang}, fl, 0
}

type hangingFile struct {
	fusefs.FileHandle
	s    *hangingSource
	hang bool
}

var (
	_ = (fusefs.FileReader)((*hangingFile)(nil))
	_ = (fusefs.FileReleaser)((*hangingFile)(nil))
	_ = (fusefs.FileGetattrer)((*hangingFile)(nil))
)

func (f *hangingFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if f.hang {
		f.s.waiting.Add(1)
		defer f.s.waiting.Add(-1)
		select {
		case <-f.s.release:
		case <-ctx.Done():
			return nil, syscall.EINTR
		}
	}
	return f.FileHandle.(fusefs.FileReader).Read(ctx, dest, off)
}

func (f *hangingFile) Release(ctx context.Context) syscall.Errno {
	defer f.s.open.Add(-1)
	return f.FileHandle.(fusefs.FileReleaser).Release(ctx)
}

func (f *hangingFile) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.FileHandle.(fusefs.FileGetattrer).Getattr(ctx, out)
}

// answer lets blocked and later reads of the hanging file through.
func (s *hangingSource) answer() { s.unblock.Do(func() { close(s.release) }) }

// mountHangingSource mounts dir at mnt with reads of hang blocked; the
// cleanup releases them and unmounts.
func mountHangingSource(t *testing.T, dir, mnt, hang string) *hangingSource {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	s := &hangingSource{hang: hang, release: make(chan struct{})}
	root := &fusefs.LoopbackRoot{Path: dir, Dev: uint64(st.Dev)}
	//lint:ignore SA1019 the hanging node needs its name, which NodeWrapChilder's WrapChild does not get
	root.NewNode = func(r *fusefs.LoopbackRoot, _ *fusefs.Inode, name string, _ *syscall.Stat_t) fusefs.InodeEmbedder {
		return &hangingNode{LoopbackNode: fusefs.LoopbackNode{RootData: r}, s: s, name: name}
	}
	rootNode := &hangingNode{LoopbackNode: fusefs.LoopbackNode{RootData: root}, s: s}
	root.RootNode = rootNode
	server, err := fusefs.Mount(mnt, rootNode, &fusefs.Options{
		MountOptions: fuse.MountOptions{DirectMount: true, Name: "hangingsrc", FsName: dir},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.answer()
		// Every handle released before the unmount: a release still
		// queued at the unmount would leave its descriptor open here.
		waitFor(t, func() bool { return s.open.Load() == 0 })
		if err := server.Unmount(); err != nil {
			t.Errorf("unmount the hanging source: %v", err)
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	return s
}

func TestDaemonExitsWithinItsShutdownDeadlineWhenTheSourceHangs(t *testing.T) {
	dir, paths, base, mnt := binDirs(t, 4<<20)
	src := filepath.Join(base, "src")
	os.Mkdir(src, 0o755)
	hs := mountHangingSource(t, dir, src, "big.bin")
	state := filepath.Join(base, "state")
	tierFlag := "--tier=disk=" + filepath.Join(base, "tier") + ":1GiB"
	// In the foreground, to see the daemon's exit code.
	d := startForeground(t, mnt, "--shutdown-timeout=1s", "--state", state, tierFlag, src, mnt)
	var small []string
	for _, p := range paths {
		if p != "big.bin" {
			small = append(small, p)
		}
	}
	checkAll(t, dir, mnt, small)
	waitFor(t, func() bool { return statusOf(t, mnt)["files_resident"] == strconv.Itoa(len(small)) })
	// A copy of big.bin starts and blocks in its first read of the source.
	if code, out := cli(t, "warmup", mnt, "big.bin"); code != 0 {
		t.Fatalf("warmup: exit %d: %s", code, out)
	}
	waitFor(t, func() bool { return hs.waiting.Load() > 0 })
	pid := d.cmd.Process.Pid

	// Nothing is open on the mount: the kernel lets it go, and the daemon
	// abandons the copy stuck on the source (source calls are never
	// waited for past a shutdown): it exits cleanly, well within its
	// shutdown deadline.
	code, out := cli(t, "unmount", mnt)
	if code != 0 || !strings.Contains(out, "unmounted") || daemonRunning(pid) {
		t.Fatalf("unmount with the source hung: exit %d, daemon running %v: %s", code, daemonRunning(pid), out)
	}
	if err := d.wait(); err != nil {
		t.Fatalf("daemon exit with a copy stuck on the source: %v, want 0\n%s", err, d.log.String())
	}
	if strings.Contains(d.log.String(), "waiting_for") {
		t.Fatalf("the shutdown waited on the hung source:\n%s", d.log.String())
	}
	if lockHeld(t, state) {
		t.Fatal("the exited daemon's lock is still held")
	}

	// The source answers again: a new mount reuses what was recorded.
	hs.answer()
	binMount(t, src, mnt, state, tierFlag)
	st := statusOf(t, mnt)
	if st["files_resident"] != strconv.Itoa(len(small)) {
		t.Fatalf("after the stuck shutdown: %s files resident, want %d", st["files_resident"], len(small))
	}
	checkAll(t, dir, mnt, paths)
	if st := statusOf(t, mnt); st["source_opens"] != "1" {
		t.Fatalf("remount read %s files from the source, want only big.bin", st["source_opens"])
	}
	if code, out := cli(t, "unmount", mnt); code != 0 {
		t.Fatalf("unmount: exit %d: %s", code, out)
	}
}

func TestSIGTERMWithAFileOpenDetachesAndExitsWithinTheDeadline(t *testing.T) {
	src, _, base, mnt := binDirs(t, 1<<20)
	state := filepath.Join(base, "state")
	d := startForeground(t, mnt, "--shutdown-timeout=1s", "--state", state,
		"--tier=mem="+filepath.Join(base, "tier")+":1GiB", src, mnt)
	holder := holdOpen(t, filepath.Join(mnt, "a/small.txt"))
	// A signal asks the daemon to go: it detaches the busy mount, waits
	// its deadline for the open file, and exits.
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.wait(); err != nil {
		t.Fatalf("daemon exit after SIGTERM with a file open: %v\n%s", err, d.log.String())
	}
	if mounted(mnt) || lockHeld(t, state) || recordOf(mnt) != 0 {
		t.Fatalf("after SIGTERM: mounted %v, lock held %v, runtime record %d", mounted(mnt), lockHeld(t, state), recordOf(mnt))
	}
	if !strings.Contains(d.log.String(), "files are still open on the detached mount") {
		t.Errorf("the log does not say why the daemon left files open:\n%s", d.log.String())
	}
	stopHolder(holder)
}

// foregroundDaemon is `epochfs mount --foreground` run by a test, to see
// the daemon's exit code and its log.
type foregroundDaemon struct {
	cmd    *exec.Cmd
	log    bytes.Buffer // its stderr
	exited bool
}

// startForeground runs `epochfs mount --foreground args...` and waits for
// mnt to be mounted; cleanup detaches the mount and kills the daemon
// unless the test waited for it.
func startForeground(t *testing.T, mnt string, args ...string) *foregroundDaemon {
	t.Helper()
	d := &foregroundDaemon{cmd: exec.Command(binPath, append([]string{"mount", "--foreground"}, args...)...)}
	d.cmd.Stderr = &d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if mounted(mnt) {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		if !d.exited {
			d.cmd.Process.Kill()
			d.cmd.Wait()
		}
	})
	waitFor(t, func() bool { return mounted(mnt) })
	waitWalked(t, mnt)
	return d
}

// wait waits for the daemon to exit.
func (d *foregroundDaemon) wait() error {
	err := d.cmd.Wait()
	d.exited = true
	return err
}

// TestAMountPointsLockFileGoesWithItsMount: the lock file a mount and an
// unmount of a mount point serialize on (RUNTIME/KEY.lock) is removed once
// the mount is gone, whether `epochfs unmount` or umount(8) ended it; a
// node whose jobs mount at new paths does not gather them.
func TestAMountPointsLockFileGoesWithItsMount(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<10)
	lock := filepath.Join(mounts.RuntimeDir(), mounts.Key(mnt)+".lock")
	for _, how := range []string{"epochfs unmount", "umount"} {
		binMount(t, src, mnt, filepath.Join(base, "state"), "--tier=mem="+filepath.Join(base, "tier")+":64MiB")
		checkAll(t, src, mnt, paths)
		if _, err := os.Stat(lock); err != nil {
			t.Fatalf("mounted: the mount point's lock file: %v", err)
		}
		pid := daemonPID(t, mnt)
		if how == "umount" {
			if err := syscall.Unmount(mnt, 0); err != nil {
				t.Fatalf("umount: %v", err)
			}
		} else if code, out := cli(t, "unmount", mnt); code != 0 {
			t.Fatalf("unmount: exit %d: %s", code, out)
		}
		waitFor(t, func() bool { return !daemonRunning(pid) })
		if _, err := os.Stat(lock); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("after %s and the daemon's exit, the lock file %s: %v (want it removed)", how, lock, err)
		}
	}
}
