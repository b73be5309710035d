package main

// Finding the daemon of a mount point without asking it (it may be hung or
// dead): from the runtime record its mount wrote (internal/daemon/record.go),
// checked against the process table and the mount's device number, and
// only failing that (a mount made without a record) from .epochfs/status
// with a short timeout.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/epochfs/epochfs/internal/daemon"
)

// statusTimeout bounds the read of .epochfs/status that finds or checks
// the daemon of a mount.
const statusTimeout = 2 * time.Second

var errStatusTimeout = fmt.Errorf("no answer within %s", statusTimeout)

// findDaemon returns the running daemon that serves (or, detached, still
// drains) mnt; the zero record if there is none.
func findDaemon(mnt string) daemon.Record {
	entry, mounted := daemon.FindMount(mnt)
	dev := entry.Dev
	r, ok := daemon.ReadRecord(mnt)
	if ok && r.Running() && (!mounted || r.Dev == dev) {
		return r
	}
	if !mounted {
		return daemon.Record{}
	}
	if ok && r.Dev == dev && os.Geteuid() == 0 {
		// Its daemon died (or is stuck on its way out, on a source that
		// does not answer): nobody answers the mount. Abort it before
		// anything touches it, so that no caller, this one included,
		// waits forever on a request handed to the dead daemon.
		if err := daemon.AbortConnection(dev); err != nil {
			fmt.Fprintf(os.Stderr, "epochfs: warning: the mount's daemon (pid %d) is gone, and its connection cannot be aborted: %v\n", r.PID, err)
		}
	}
	st, err := statusWithin(mnt, statusTimeout)
	if err != nil {
		// No record and no answer (a runtime directory wiped, a daemon
		// stopped or hung): the process table still knows it.
		return daemonByCmdline(mnt, entry.UserID)
	}
	pid, _ := strconv.Atoi(st["pid"])
	if pid <= 0 {
		return daemon.Record{}
	}
	r = daemon.Record{PID: pid, Start: daemon.ProcStart(pid), Mountpoint: mnt, Source: st["source"]}
	uid := max(entry.UserID, 0)
	if u, ok := daemon.ProcUID(pid); !r.Running() || !ok || int(u) != uid || !daemon.SameExecutable(pid) {
		return daemon.Record{} // not a daemon of this executable run by the mount's user
	}
	return r
}

// statusWithin reads the mount's status, giving up after timeout (the
// daemon is hung: the read stays blocked in its goroutine).
func statusWithin(mnt string, timeout time.Duration) (map[string]string, error) {
	type result struct {
		kv  map[string]string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		kv, err := readStatus(mnt)
		ch <- result{kv, err}
	}()
	select {
	case r := <-ch:
		return r.kv, r.err
	case <-time.After(timeout):
		return nil, errStatusTimeout
	}
}

// daemonByCmdline finds a daemon of mnt in the process table: a process
// of this executable started as "epochfs mount --foreground ... MNT" by
// the user uid who made the mount (internal/daemon/trust.go). Another user's
// process of that name and arguments, or another program's, is not it.
func daemonByCmdline(mnt string, uid int) daemon.Record {
	if uid < 0 {
		uid = 0
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range procs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if m, ok := daemon.ProcMountpoint(pid); !ok || m != mnt {
			continue
		}
		if u, ok := daemon.ProcUID(pid); !ok || int(u) != uid || !daemon.SameExecutable(pid) {
			continue
		}
		r := daemon.Record{PID: pid, Start: daemon.ProcStart(pid), Mountpoint: mnt}
		if r.Running() {
			return r
		}
	}
	return daemon.Record{}
}
