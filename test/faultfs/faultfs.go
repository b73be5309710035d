// Package faultfs gives epochfs's end-to-end tests a source file system that
// they can make fail, hang or die, built from real parts.
//
// Two sources share one control surface, *FS:
//
//   - Start mounts the faultfs binary (cmd/faultfs), a go-fuse loopback of a
//     directory with no kernel caching of entries or attributes, so every
//     stat, open and read reaches the process. Down makes every request
//     answer EIO, Hang stops the process (SIGSTOP), Kill kills it (SIGKILL:
//     the mount answers ENOTCONN).
//   - StartSSHFS mounts the directory over sshfs from a real sshd that runs in
//     a network namespace of its own. Down kills sshd (the listener and the
//     session serving the mount; sshfs answers EIO), Hang stops them, Kill
//     kills the sshfs client.
//
// Both mounts are read-only, like the source epochfs mounts: a test changes
// the source by writing Dir(), never through Mnt(). Neither mount's
// /proc/mounts line contains "epochfs" (the epochfs tests count their own
// mounts by that string), which is why the mount points live in a directory
// of their own under $TMPDIR and not in t.TempDir(), whose name is the
// test's.
//
// Every method is synchronous: when it returns the fault is in place (Down:
// new requests fail; Hang: every process of the server is stopped; Kill: the
// process is gone). Methods are for the test's goroutine. The cleanup
// registered by Start and StartSSHFS works whatever state a test left the
// source in, and fails the test if a mount, a process or a namespace is
// left behind.
//
// What a user of the mount sees (kernel 6.18, sshfs 3.7.3, OpenSSH 9.2; the
// package's tests check or log each):
//
//   - Down: every stat, open, readdir and read fails with EIO, also a read
//     of a file opened before Down. faultfs answers at once; sshfs tries one
//     connection per request, is refused, and answers in about 10 ms.
//   - Hang: nothing times out by itself (sshfs runs without
//     ServerAliveInterval). With faultfs the request waits in the kernel's
//     queue, unread, and a SIGKILL of the caller ends it. With sshfs the
//     client has read the request and waits for the stopped sshd, so the
//     kernel must wait for the answer: a killed caller stays in state D
//     until Resume, Down or Close. A goroutine blocked in such a read cannot
//     be cancelled either: a daemon must abandon it, not wait for it.
//   - Down while hung: sshfs's blocked requests fail with EIO at once;
//     faultfs applies the command when Resume continues it.
//   - Kill: ENOTCONN for everything, the mount point itself included.
//   - Close while hung: faultfs answers the blocked reads (with data);
//     sshfs's are aborted (ECONNABORTED) unless the continued sshd answers
//     before the unmount.
//   - sshfs without -o reconnect would unmount itself when its connection
//     drops, and the files would look deleted (ENOENT on the empty mount
//     point): this package runs it with reconnect, so Down is an error and
//     Up a recovery.
package faultfs

import (
	"bufio"
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

	"github.com/epochfs/epochfs/internal/testenv"
)

// Liveness bounds: how long a step may take before the harness gives up.
// They bound waits on a broken setup, they do not assert speed.
const (
	readyTimeout = 60 * time.Second
	stepTimeout  = 20 * time.Second
)

// FS is one mounted source.
type FS struct {
	t    testing.TB
	kind string // "faultfs" or "sshfs"
	dir  string
	mnt  string
	base string // holds mnt and the logs (and, for sshfs, keys and config)
	src  source
	done bool // cleanup has run
}

// source is what differs between the two kinds.
type source interface {
	pid() int
	down() error
	up() error
	hang() error
	resume() error
	kill() error
	// stop ends every process of the source, whatever its state, and
	// removes what the source made besides the mount (a namespace).
	stop() error
}

// Mnt is the mount point: the source as a user of it sees it.
func (f *FS) Mnt() string { return f.mnt }

// Dir is the directory the mount serves (absolute). Tests change the source
// here.
func (f *FS) Dir() string { return f.dir }

// PID is the FUSE server's process: the faultfs binary, or the sshfs client.
func (f *FS) PID() int { return f.src.pid() }

// Down makes the source fail: every request that reaches the server from
// now on answers an error (EIO for both kinds). Requests already being
// served may still complete. Down on a down source does nothing.
//
// faultfs: on a hung (stopped) faultfs the command is queued and takes
// effect, in order, when Resume continues the process. sshfs: sshd dies, so
// Down also ends a hang.
func (f *FS) Down() { f.do("down", f.src.down) }

// Up undoes Down: requests succeed again. For sshfs a new sshd starts, and
// sshfs reconnects at the next request.
func (f *FS) Up() { f.do("up", f.src.up) }

// Hang stops the server's processes (SIGSTOP) and returns once all are
// stopped. A request then waits until Resume; whether its caller can be
// killed meanwhile depends on the kind (see the package's tests).
func (f *FS) Hang() { f.do("hang", f.src.hang) }

// Resume continues the processes Hang stopped; waiting requests are then
// answered.
func (f *FS) Resume() { f.do("resume", f.src.resume) }

// Kill kills the FUSE server (SIGKILL) and waits for it. The mount stays, and
// every operation on it fails with ENOTCONN, until the cleanup detaches it.
func (f *FS) Kill() { f.do("kill", f.src.kill) }

// Restart brings a killed faultfs back at its mount point, as a PFS
// client that died and was mounted again: the dead mount is detached and
// a new process mounts the directory there (another mount to its users;
// the kernel may give it the dead one's device number). faultfs only,
// after Kill.
func (f *FS) Restart() {
	f.t.Helper()
	p, ok := f.src.(*loopSource)
	if !ok || !isClosed(p.exited) {
		f.t.Fatalf("faultfs: Restart of a %s source that was not killed", f.kind)
	}
	p.ctl.Close()
	if err := syscall.Unmount(f.mnt, syscall.MNT_DETACH); err != nil && isMounted(f.mnt) {
		f.t.Fatalf("faultfs: detach the dead mount %s: %v", f.mnt, err)
	}
	bin, err := binary()
	if err != nil {
		f.t.Fatalf("faultfs: %v", err)
	}
	np, err := startLoop(bin, f.dir, f.mnt, filepath.Join(f.base, "faultfs.log"))
	if err != nil {
		f.t.Fatalf("faultfs: restart: %v", err)
	}
	f.src = np
	if err := np.waitReady(); err != nil {
		f.t.Fatalf("faultfs: restart: %v", err)
	}
	if !isMounted(f.mnt) {
		f.t.Fatalf("faultfs: restarted, but %s is not in /proc/mounts", f.mnt)
	}
}

// Close runs the cleanup now instead of at the end of the test: it
// continues, stops and unmounts the source whatever its state. Cleanups run
// in reverse order, so a daemon mounted over this source is stopped before
// the source's own cleanup continues a hung source; a daemon that cannot
// stop while its reads of the source are blocked then waits forever. A test
// that may end with the source hung registers t.Cleanup(src.Close) after
// mounting the daemon: the source then goes first, is continued (which
// answers the blocked reads) and unmounted (later reads fail). Close is
// idempotent; no other method may be called after it.
func (f *FS) Close() { f.cleanup() }

// Delay makes every request of the FUSE operation op (lowercase: "lookup",
// "getattr", "open", "read", "opendir", "readdir", ...) wait d before it is
// served; 0 ends the delay. faultfs only.
func (f *FS) Delay(op string, d time.Duration) {
	f.do("delay", func() error {
		p, ok := f.src.(*loopSource)
		if !ok {
			return errors.New("delays are a faultfs feature")
		}
		return p.command(fmt.Sprintf("delay %s %s", op, d))
	})
}

// Counts returns the requests the source has served since it started, by
// operation (the names of Delay). faultfs only.
func (f *FS) Counts() map[string]int64 {
	m := map[string]int64{}
	f.do("counts", func() error {
		p, ok := f.src.(*loopSource)
		if !ok {
			return errors.New("counts are a faultfs feature")
		}
		l, err := p.ask("counts")
		if err != nil {
			return err
		}
		fields := strings.Fields(l)
		if len(fields) == 0 || fields[0] != "counts" {
			return fmt.Errorf("faultfs answered %q to counts", l)
		}
		for _, kv := range fields[1:] {
			k, v, _ := strings.Cut(kv, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("faultfs counts %q: %w", kv, err)
			}
			m[k] = n
		}
		return nil
	})
	return m
}

func (f *FS) do(what string, op func() error) {
	f.t.Helper()
	if f.done {
		f.t.Fatalf("faultfs: %s %s after cleanup", what, f.kind)
	}
	if err := op(); err != nil {
		f.t.Fatalf("faultfs: %s %s: %v", what, f.kind, err)
	}
}

// newFS makes the directory that holds the mount point, and registers the
// cleanup, which from then on runs whatever happens next.
func newFS(t testing.TB, kind, dir string) (*FS, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(abs); err != nil {
		return nil, err
	} else if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", abs)
	}
	base, err := os.MkdirTemp("", "faultfs-"+kind+"-")
	if err != nil {
		return nil, err
	}
	f := &FS{t: t, kind: kind, dir: abs, base: base, mnt: filepath.Join(base, "mnt")}
	if err := os.Mkdir(f.mnt, 0o755); err != nil {
		os.RemoveAll(base)
		return nil, err
	}
	t.Cleanup(f.cleanup)
	return f, nil
}

// cleanup stops the source, detaches a mount that is still there, and
// removes the temporary directory. It reports what it could not undo.
func (f *FS) cleanup() {
	if f.done {
		return
	}
	f.done = true
	t := f.t
	if f.src != nil {
		if err := f.src.stop(); err != nil {
			t.Errorf("faultfs: stop %s: %v", f.kind, err)
		}
	}
	if isMounted(f.mnt) {
		if err := syscall.Unmount(f.mnt, syscall.MNT_DETACH); err != nil {
			t.Errorf("faultfs: detach %s: %v", f.mnt, err)
		}
	}
	if t.Failed() {
		f.dumpLogs()
	}
	if isMounted(f.mnt) {
		// Never remove through a mount: keep everything for a look.
		t.Errorf("faultfs: %s is still mounted; %s left in place", f.mnt, f.base)
		return
	}
	if err := os.Remove(f.mnt); err != nil {
		t.Errorf("faultfs: remove mount point: %v", err)
		return
	}
	if err := os.RemoveAll(f.base); err != nil {
		t.Errorf("faultfs: remove %s: %v", f.base, err)
	}
}

// dumpLogs shows the servers' stderr in the test log.
func (f *FS) dumpLogs() {
	logs, _ := filepath.Glob(filepath.Join(f.base, "*.log"))
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err == nil && len(data) > 0 {
			f.t.Logf("faultfs: %s:\n%s", filepath.Base(l), tail(data, 4096))
		}
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// requireFUSE skips without /dev/fuse or root, and fails instead when
// EPOCHFS_REQUIRE_FUSE=1 (CI).
func requireFUSE(t testing.TB, tools ...string) {
	t.Helper()
	var missing []string
	if _, err := os.Stat("/dev/fuse"); err != nil {
		missing = append(missing, "/dev/fuse")
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	testenv.Skip(t, "faultfs: missing %s", strings.Join(missing, ", "))
}

// The faultfs binary, built once per test process.
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	errBuild  error
)

func binary() (string, error) {
	buildOnce.Do(func() {
		binDir, errBuild = os.MkdirTemp("", "faultfs-bin-")
		if errBuild != nil {
			return
		}
		binPath = filepath.Join(binDir, "faultfs")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/epochfs/epochfs/test/faultfs/cmd/faultfs").CombinedOutput()
		if err != nil {
			errBuild = fmt.Errorf("go build faultfs: %w\n%s", err, out)
		}
	})
	return binPath, errBuild
}

// RemoveBinary removes the faultfs binary built by this test process. Call
// it from TestMain after m.Run; without it one small temporary directory
// stays behind.
func RemoveBinary() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// Start mounts a faultfs loopback of dir on a new mount point and returns
// once the mount answers. It skips without /dev/fuse or root (fails with
// EPOCHFS_REQUIRE_FUSE=1).
//
// The harness drives the binary through its --control stdin ("down", "up")
// and reads its acknowledgements on stdout, so Down and Up return once the
// mode has switched, and a command given while the process is stopped is
// applied, in order, when it continues. The binary unmounts and exits when
// stdin closes, so a test process that dies without running its cleanups
// leaves no faultfs mount behind (unless it was hung at the time).
func Start(t testing.TB, dir string) *FS {
	t.Helper()
	requireFUSE(t, "go")
	bin, err := binary()
	if err != nil {
		t.Fatalf("faultfs: %v", err)
	}
	f, err := newFS(t, "faultfs", dir)
	if err != nil {
		t.Fatalf("faultfs: %v", err)
	}
	p, err := startLoop(bin, f.dir, f.mnt, filepath.Join(f.base, "faultfs.log"))
	if err != nil {
		t.Fatalf("faultfs: %v", err)
	}
	f.src = p
	if err := p.waitReady(); err != nil {
		t.Fatalf("faultfs: %v", err)
	}
	if !isMounted(f.mnt) {
		t.Fatalf("faultfs: ready, but %s is not in /proc/mounts", f.mnt)
	}
	return f
}

// loopSource is a running faultfs binary.
type loopSource struct {
	cmd     *exec.Cmd
	ctl     *os.File    // its stdin
	lines   chan string // its stdout, line by line; closed at EOF
	exited  chan struct{}
	hung    bool
	pending []string // acknowledgements due when a hung process continues
}

func startLoop(bin, dir, mnt, logPath string) (*loopSource, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd := exec.Command(bin, "--control", dir, mnt)
	// Files, not writers: no copying goroutine, so Wait returns when the
	// process exits, even if something it started still holds a pipe.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, logf
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	p := &loopSource{cmd: cmd, ctl: inW, lines: make(chan string, 64), exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		outR.Close()
		close(p.lines)
	}()
	return p, nil
}

func (p *loopSource) pid() int { return p.cmd.Process.Pid }

// expect waits for the next line on stdout to be want.
func (p *loopSource) expect(want string) error {
	select {
	case l, ok := <-p.lines:
		if !ok {
			return fmt.Errorf("faultfs exited (%v) before saying %q", p.cmd.ProcessState, want)
		}
		if l != want {
			return fmt.Errorf("faultfs said %q, want %q", l, want)
		}
		return nil
	case <-time.After(readyTimeout):
		return fmt.Errorf("faultfs did not say %q in %v", want, readyTimeout)
	}
}

func (p *loopSource) waitReady() error { return p.expect("ready") }

func (p *loopSource) command(c string) error {
	if p.exited == nil || isClosed(p.exited) {
		return errors.New("faultfs is not running")
	}
	if _, err := fmt.Fprintln(p.ctl, c); err != nil {
		return err
	}
	if p.hung {
		p.pending = append(p.pending, c)
		return nil
	}
	return p.expect(c)
}

// ask sends a command and returns the line it answered.
func (p *loopSource) ask(c string) (string, error) {
	if p.exited == nil || isClosed(p.exited) || p.hung {
		return "", errors.New("faultfs is not running")
	}
	if _, err := fmt.Fprintln(p.ctl, c); err != nil {
		return "", err
	}
	select {
	case l, ok := <-p.lines:
		if !ok {
			return "", fmt.Errorf("faultfs exited (%v) before answering %q", p.cmd.ProcessState, c)
		}
		return l, nil
	case <-time.After(readyTimeout):
		return "", fmt.Errorf("faultfs did not answer %q in %v", c, readyTimeout)
	}
}

func (p *loopSource) down() error { return p.command("down") }
func (p *loopSource) up() error   { return p.command("up") }

func (p *loopSource) hang() error {
	if isClosed(p.exited) {
		return errors.New("faultfs is not running")
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	p.hung = true
	return waitStopped([]int{p.pid()}, true)
}

func (p *loopSource) resume() error {
	if isClosed(p.exited) {
		return errors.New("faultfs is not running")
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	p.hung = false
	if err := waitStopped([]int{p.pid()}, false); err != nil {
		return err
	}
	for len(p.pending) > 0 {
		c := p.pending[0]
		p.pending = p.pending[1:]
		if err := p.expect(c); err != nil {
			return err
		}
	}
	return nil
}

func (p *loopSource) kill() error {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !isClosed(p.exited) {
		return err
	}
	p.hung, p.pending = false, nil
	return waitClosed(p.exited, stepTimeout, "faultfs to die")
}

// stop: SIGCONT, then SIGTERM (the binary unmounts, or detaches a busy
// mount, and exits); SIGKILL if it has not exited in time.
func (p *loopSource) stop() error {
	defer p.ctl.Close()
	if isClosed(p.exited) {
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Signal(syscall.SIGTERM)
	if waitClosed(p.exited, stepTimeout, "") == nil {
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	if err := waitClosed(p.exited, stepTimeout, "faultfs to die after SIGKILL"); err != nil {
		return err
	}
	return fmt.Errorf("faultfs ignored SIGTERM for %v; killed", stepTimeout)
}
