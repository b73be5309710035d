package mounts

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// A mount's command starts its daemon in the background (Daemonize) and
// returns once the daemon reports on a pipe, its descriptor 3, that the
// mount answers ("ok") or why it failed ("err CODE MESSAGE", CODE the exit
// code the command is to return). The daemon's half is Readiness.

// ReadyFD is the descriptor the daemon reports on.
const ReadyFD = 3

// A DaemonError is a daemon's report that it could not mount, with the
// exit code it chose.
type DaemonError struct {
	Code int
	Msg  string
}

func (e *DaemonError) Error() string { return e.Msg }

// Daemonize starts this program with args (which must include
// --ready-fd=3) in its own session, its output appended to logPath, and
// waits until it reports the mount at mnt ready (its pid) or fails: a
// *DaemonError with fusermount3's reason in place of the daemon's when the
// log has one, or an error when it exited without a word.
func Daemonize(args []string, mnt, logPath string) (int, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("log file: %w", err)
	}
	defer logf.Close()
	var logStart int64
	if st, err := logf.Stat(); err == nil {
		logStart = st.Size()
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{pw} // descriptor 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// A service manager waiting for our readiness hears it from us, not
	// from the daemon (it is not the unit's main process).
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "NOTIFY_SOCKET=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	// The child resolves relative paths from here, then moves to "/".
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start daemon: %w", err)
	}
	pw.Close()
	line, _ := bufio.NewReader(pr).ReadString('\n')
	pr.Close()
	line = strings.TrimSpace(line)
	switch {
	case line == "ok":
		pid := cmd.Process.Pid
		cmd.Process.Release()
		return pid, nil
	case strings.HasPrefix(line, "err "):
		cmd.Wait()
		code, msg, _ := strings.Cut(strings.TrimPrefix(line, "err "), " ")
		c, _ := strconv.Atoi(code)
		if why := FusermountReason(logPath, logStart); why != "" {
			msg = UnprivilegedMountMessage(mnt, why, logPath)
		}
		return 0, &DaemonError{Code: c, Msg: msg}
	default:
		cmd.Wait()
		return 0, errors.New("the daemon exited before the mount was ready; see " + logPath)
	}
}

// Readiness is the daemon's half: it reports once, on the descriptor its
// parent gave, that the mount answers or why it failed. A nil Readiness
// (no parent waits) reports nothing.
type Readiness struct{ f *os.File }

// OpenReadiness is the report on descriptor fd; nil when fd < 0.
func OpenReadiness(fd int) *Readiness {
	if fd < 0 {
		return nil
	}
	return &Readiness{f: os.NewFile(uintptr(fd), "ready")}
}

// Ready reports the mount ready.
func (r *Readiness) Ready() {
	if r == nil || r.f == nil {
		return
	}
	fmt.Fprintln(r.f, "ok")
	r.close()
}

// Fail reports that the mount failed with err, for the exit code code.
func (r *Readiness) Fail(code int, err error) {
	if r == nil || r.f == nil {
		return
	}
	fmt.Fprintf(r.f, "err %d %s\n", code, strings.ReplaceAll(err.Error(), "\n", " "))
	r.close()
}

func (r *Readiness) close() {
	r.f.Close()
	r.f = nil
}
