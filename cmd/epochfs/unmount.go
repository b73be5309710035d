package main

// `epochfs unmount` succeeds only once the daemon that served the mount has
// exited: until then it holds the state directory (its lock and the
// catalog), and a mount of the same state directory would fail. The daemon
// is found without asking it, since it may be hung or dead: from the
// runtime record its mount wrote (daemon.go), checked against the process
// table and the mount's device number, and only failing that (a mount made
// without a record) from .epochfs/status with a short timeout. A mount
// whose daemon is dead has no daemon to wait for.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const unmountSynopsis = "unmount [--lazy] [--timeout DURATION] MOUNTPOINT"

// defaultUnmountTimeout is how long unmount waits for the daemon to exit.
// It is longer than the daemon's own bounded shutdown (twice
// defaultShutdownTimeout), so only a daemon that still serves open files
// of a lazily detached mount outlasts it.
const defaultUnmountTimeout = 30 * time.Second

// statusTimeout bounds the read of .epochfs/status that finds the daemon of
// a mount without a runtime record.
const statusTimeout = 2 * time.Second

func runUnmount(args []string, stdout, stderr io.Writer) error {
	f := newFlagSet("unmount", unmountSynopsis, stderr)
	lazy := f.Bool("lazy", false, "detach now even if files are open or the daemon is dead")
	timeout := f.Duration("timeout", defaultUnmountTimeout, "how long to wait for the daemon to exit")
	pos, err := parseFlags(f, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("want one MOUNTPOINT")
	}
	if *timeout <= 0 {
		return usageErr("--timeout %s: want a positive duration", *timeout)
	}
	mnt, _ := filepath.Abs(pos[0])
	d := findDaemon(mnt)
	detached := *lazy
	switch {
	case isMountpoint(mnt):
		if err := unmount(mnt, *lazy); err != nil {
			return err
		}
	case d.PID > 0:
		// Detached earlier and still draining: wait for it as after an
		// unmount, so that a retry tells when it is gone.
		detached = true
	default:
		return usageErr("%s is not mounted", mnt)
	}
	if d.PID > 0 && !waitExit(d, *timeout) {
		if detached {
			return runtimeErr("%s is detached but its daemon (pid %d) is still running: files are still open on it or the source does not answer; it exits when they are closed (see %s)", mnt, d.PID, d.logPath())
		}
		return runtimeErr("%s is unmounted but its daemon (pid %d) is still running: it is still closing (the source does not answer?) (see %s)", mnt, d.PID, d.logPath())
	}
	fmt.Fprintf(stdout, "epochfs: unmounted %s\n", mnt)
	return nil
}

func unmount(mnt string, lazy bool) error {
	if os.Geteuid() == 0 {
		flags := 0
		if lazy {
			flags = syscall.MNT_DETACH
		}
		err := syscall.Unmount(mnt, flags)
		if errors.Is(err, syscall.EBUSY) {
			return runtimeErr("%s is busy (a process has files open there); close them or use --lazy", mnt)
		}
		if err != nil {
			return runtimeErr("unmount %s: %v", mnt, err)
		}
		return nil
	}
	a := []string{"-u"}
	if lazy {
		a = append(a, "-z")
	}
	out, err := exec.Command("fusermount3", append(a, mnt)...).CombinedOutput()
	if err != nil {
		return runtimeErr("fusermount3: %s", strings.TrimSpace(string(out)))
	}
	return nil
}

// findDaemon returns the running daemon that serves (or, detached, still
// drains) mnt; the zero record if there is none.
func findDaemon(mnt string) daemonRecord {
	dev, mounted := mountDev(mnt)
	if r, ok := readRecord(mnt); ok && r.running() && (!mounted || r.Dev == dev) {
		return r
	}
	if !mounted {
		return daemonRecord{}
	}
	pid := statusPID(mnt)
	if pid <= 0 {
		return daemonRecord{}
	}
	r := daemonRecord{PID: pid, Start: procStart(pid), Mountpoint: mnt}
	if !r.running() {
		return daemonRecord{}
	}
	return r
}

// statusPID reads the daemon's pid from the mount's status (0 if the
// daemon does not answer in time: hung, or dead).
func statusPID(mnt string) int {
	ch := make(chan int, 1)
	go func() {
		kv, err := readStatus(mnt)
		if err != nil {
			ch <- 0
			return
		}
		pid, _ := strconv.Atoi(kv["pid"])
		ch <- pid
	}()
	select {
	case pid := <-ch:
		return pid
	case <-time.After(statusTimeout):
		return 0
	}
}

// waitExit waits up to timeout for the daemon to exit and reports whether
// it did.
func waitExit(d daemonRecord, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for d.running() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}
