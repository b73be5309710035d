package faultfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The sshfs source is a real sshd in a network namespace of its own,
// serving the directory over internal-sftp on the namespace's 127.0.0.1, and
// a real sshfs client started with `nsenter --net` so that it reaches that
// address while its mount stays in the test's mount namespace (`ip netns
// exec` would put the mount in a private one).
//
// sshfs runs with -o reconnect. Without it, sshfs answers a lost connection
// by unmounting itself and exiting: the mount point turns back into the
// empty directory under it, and the source's files look deleted (ENOENT),
// not failing. With it, every request made while sshd is gone tries one
// connection, is refused, and answers EIO; once sshd is back the next
// request reconnects. No ServerAliveInterval: a stopped server stays a hang
// until Resume instead of turning into a reconnect after a few seconds.
//
// Caching is off as far as sshfs allows: dir_cache=no, entry, attribute and
// negative timeouts 0, no kernel_cache (an open drops the file's cached
// pages).

// sshfsOpts are the -o options of the client; the caller adds the key and
// the mount's name.
var sshfsOpts = []string{
	"ro", "reconnect", "allow_other",
	"dir_cache=no", "entry_timeout=0", "attr_timeout=0", "negative_timeout=0",
	"StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "BatchMode=yes", "LogLevel=ERROR",
}

const sshdConfig = `ListenAddress 127.0.0.1:22
HostKey %[1]s/host_key
PidFile none
AuthorizedKeysFile %[1]s/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
Subsystem sftp internal-sftp
`

// sshdPath is where Debian's openssh-server installs sshd; sshd must be
// started by its absolute path (it re-executes itself).
const sshdPath = "/usr/sbin/sshd"

// privsepDir is sshd's privilege separation directory, which openssh-server
// normally creates at boot. StartSSHFS creates it when missing and leaves it
// (other sshds may use it).
const privsepDir = "/run/sshd"

var nsSeq atomic.Int64

// StartSSHFS mounts dir over sshfs from a private sshd (see the package
// comment) and returns once the mount answers. It skips when /dev/fuse,
// root, sshd, sshfs, ssh-keygen, ip or nsenter is missing (fails with
// EPOCHFS_REQUIRE_FUSE=1). PID is the sshfs client's.
func StartSSHFS(t testing.TB, dir string) *FS {
	t.Helper()
	requireFUSE(t, sshdPath, "sshfs", "ssh", "ssh-keygen", "ip", "nsenter")
	f, err := newFS(t, "sshfs", dir)
	if err != nil {
		t.Fatalf("faultfs: sshfs: %v", err)
	}
	s := &sshSource{base: f.base, mnt: f.mnt, ns: fmt.Sprintf("faultfs-%d-%d", os.Getpid(), nsSeq.Add(1))}
	s.nsPath = filepath.Join("/run/netns", s.ns)
	if err := run("ip", "netns", "add", s.ns); err != nil {
		t.Fatalf("faultfs: sshfs: %v", err)
	}
	f.src = s // from here on the cleanup deletes the namespace
	if err := s.setup(f.dir); err != nil {
		t.Fatalf("faultfs: sshfs: %v", err)
	}
	return f
}

// sshSource is the sshd and sshfs of one StartSSHFS.
type sshSource struct {
	base   string
	mnt    string
	ns     string
	nsPath string
	nsLink string // the namespace as /proc/PID/ns/net names it
	sshd   *child // the listener; nil while down
	sshfs  *child
	isDown bool
	hung   []int // processes Hang stopped
}

// child is a process this process started, waited for in the background.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

func startChild(cmd *exec.Cmd, logPath string) (*child, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// kill SIGKILLs the process and waits for it.
func (c *child) kill() error {
	c.cmd.Process.Signal(syscall.SIGKILL)
	return waitClosed(c.exited, stepTimeout, fmt.Sprintf("%s to die", c.cmd.Path))
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func (s *sshSource) setup(dir string) error {
	var st syscall.Stat_t
	if err := syscall.Stat(s.nsPath, &st); err != nil {
		return fmt.Errorf("stat %s: %w", s.nsPath, err)
	}
	s.nsLink = fmt.Sprintf("net:[%d]", st.Ino)
	if err := run("ip", "-n", s.ns, "link", "set", "lo", "up"); err != nil {
		return err
	}
	for _, k := range []string{"host_key", "client_key"} {
		if err := run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "faultfs", "-f", filepath.Join(s.base, k)); err != nil {
			return err
		}
	}
	pub, err := os.ReadFile(filepath.Join(s.base, "client_key.pub"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.base, "authorized_keys"), pub, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.base, "sshd_config"), fmt.Appendf(nil, sshdConfig, s.base), 0o600); err != nil {
		return err
	}
	if err := os.MkdirAll(privsepDir, 0o755); err != nil {
		return err
	}
	if err := s.startSSHD(); err != nil {
		return err
	}
	opts := append([]string{"fsname=faultfs-sshfs", "IdentityFile=" + filepath.Join(s.base, "client_key")}, sshfsOpts...)
	cmd := exec.Command("nsenter", "--net="+s.nsPath, "sshfs", "-f", "-o", strings.Join(opts, ","), "root@127.0.0.1:"+dir, s.mnt)
	if s.sshfs, err = startChild(cmd, filepath.Join(s.base, "sshfs.log")); err != nil {
		return err
	}
	deadline := time.Now().Add(readyTimeout)
	for !isMounted(s.mnt) {
		if isClosed(s.sshfs.exited) {
			return fmt.Errorf("sshfs exited (%v) before mounting", s.sshfs.cmd.ProcessState)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sshfs did not mount %s in %v", s.mnt, readyTimeout)
		}
		time.Sleep(pollEvery)
	}
	// sshfs mounts while ssh is still connecting. A first failure of
	// that connection makes sshfs exit even with -o reconnect, and a hang
	// before it exists hangs the handshake, not the session: wait for one
	// answer from the server.
	return probe(s.mnt)
}

// probe stats the mount's root, which sshfs asks the server for, and
// returns once it has an answer.
func probe(mnt string) error {
	errc := make(chan error, 1)
	// A broken server may block the stat until the cleanup kills sshfs;
	// the goroutine then returns.
	go func() {
		_, err := os.Stat(mnt)
		errc <- err
	}()
	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("first request through the mount: %w", err)
		}
		return nil
	case <-time.After(readyTimeout):
		return fmt.Errorf("first request through the mount: no answer in %v", readyTimeout)
	}
}

// startSSHD starts a listener and waits until it listens: sshd -e logs
// "Server listening on ..." after listen(2).
func (s *sshSource) startSSHD() error {
	logPath := filepath.Join(s.base, "sshd.log")
	var from int64
	if st, err := os.Stat(logPath); err == nil {
		from = st.Size()
	}
	cmd := exec.Command("nsenter", "--net="+s.nsPath, sshdPath, "-D", "-e", "-f", filepath.Join(s.base, "sshd_config"))
	c, err := startChild(cmd, logPath)
	if err != nil {
		return err
	}
	s.sshd = c
	deadline := time.Now().Add(readyTimeout)
	for {
		data, _ := os.ReadFile(logPath)
		if int64(len(data)) > from && bytes.Contains(data[from:], []byte("Server listening on 127.0.0.1 port 22")) {
			return nil
		}
		if isClosed(c.exited) {
			return fmt.Errorf("sshd exited (%v): %s", c.cmd.ProcessState, tail(data[min(from, int64(len(data))):], 1024))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sshd did not listen in %v", readyTimeout)
		}
		time.Sleep(pollEvery)
	}
}

// server lists sshd's processes: the listener and every session under it
// (the per-connection sshd and its internal-sftp child).
func (s *sshSource) server() []int {
	if s.sshd == nil || isClosed(s.sshd.exited) {
		return nil
	}
	return append([]int{s.sshd.pid()}, descendants(s.sshd.pid())...)
}

func (s *sshSource) pid() int { return s.sshfs.pid() }

// down kills sshd, listener and sessions, like a server that died: sshfs
// sees the connection reset, and its reconnects are refused.
func (s *sshSource) down() error {
	if s.isDown {
		return nil
	}
	procs := s.server()
	for _, p := range procs {
		syscall.Kill(p, syscall.SIGKILL)
	}
	if s.sshd != nil {
		if err := waitClosed(s.sshd.exited, stepTimeout, "sshd to die"); err != nil {
			return err
		}
	}
	s.sshd, s.hung, s.isDown = nil, nil, true
	return waitGone(procs)
}

func (s *sshSource) up() error {
	if !s.isDown {
		return nil
	}
	if err := s.startSSHD(); err != nil {
		return err
	}
	s.isDown = false
	// sshfs reconnects at the next request: make it now, so that the
	// source is in the state Start leaves it in (a session to hang).
	return probe(s.mnt)
}

// hang stops sshd's processes. The listener stops too, so that nothing
// that reconnects gets an answer either. On a down source there is nothing
// to stop: requests keep failing.
func (s *sshSource) hang() error {
	procs := s.server()
	for _, p := range procs {
		if err := syscall.Kill(p, syscall.SIGSTOP); err != nil {
			return fmt.Errorf("stop %d: %w", p, err)
		}
	}
	s.hung = append(s.hung, procs...)
	return waitStopped(procs, true)
}

func (s *sshSource) resume() error {
	procs := s.hung
	for _, p := range procs {
		syscall.Kill(p, syscall.SIGCONT)
	}
	s.hung = nil
	return waitStopped(procs, false)
}

// kill kills the sshfs client. Its ssh child then reads end of file and
// exits; the server's session ends with it.
func (s *sshSource) kill() error {
	return s.sshfs.kill()
}

// stop ends every process in the namespace (continued first, so that they
// can), unmounts, and deletes the namespace.
func (s *sshSource) stop() error {
	var errs []error
	if s.nsLink != "" {
		for _, p := range inNetns(s.nsLink) {
			syscall.Kill(p, syscall.SIGCONT)
		}
	}
	if s.sshfs != nil && !isClosed(s.sshfs.exited) {
		// An unmount ends sshfs; a busy mount is detached by the
		// caller once sshfs is gone.
		if isMounted(s.mnt) {
			syscall.Unmount(s.mnt, 0)
		}
		s.sshfs.cmd.Process.Signal(syscall.SIGTERM)
		if waitClosed(s.sshfs.exited, stepTimeout, "") != nil {
			errs = append(errs, fmt.Errorf("sshfs ignored SIGTERM for %v", stepTimeout))
			if err := s.sshfs.kill(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if s.sshd != nil {
		if err := s.sshd.kill(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.nsLink != "" {
		// What is left are processes this source started but whose
		// parent is gone: the ssh client under sshfs, sessions.
		left := inNetns(s.nsLink)
		for _, p := range left {
			syscall.Kill(p, syscall.SIGKILL)
		}
		if err := waitGone(left); err != nil {
			errs = append(errs, err)
		}
	}
	if err := run("ip", "netns", "del", s.ns); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
