package mounts

// Finding the daemon of a mount point without asking it (it may be hung or
// dead): from the runtime record its mount wrote (record.go),
// checked against the process table and the mount's device number, and
// only failing that (a mount made without a record) from .epochfs/status
// with a short timeout.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/epochfs/epochfs/internal/status"
)

// StatusTimeout bounds the read of .epochfs/status that finds or checks
// the daemon of a mount.
const StatusTimeout = 2 * time.Second

// ErrStatusTimeout: the daemon did not answer a read of .epochfs/status.
var ErrStatusTimeout = fmt.Errorf("no answer within %s", StatusTimeout)

// FindDaemon returns the running daemon that serves (or, detached, still
// drains) mnt; the zero record if there is none. warn hears of a dead
// daemon whose connection could not be aborted.
func FindDaemon(mnt string, warn func(string)) Record {
	entry, mounted := FindMount(mnt)
	dev := entry.Dev
	r, ok := ReadRecord(mnt)
	if ok && r.Running() && (!mounted || r.Dev == dev) {
		return r
	}
	if !mounted {
		return Record{}
	}
	if ok && r.Dev == dev && os.Geteuid() == 0 {
		// Its daemon died (or is stuck on its way out, on a source that
		// does not answer): nobody answers the mount. Abort it before
		// anything touches it, so that no caller, this one included,
		// waits forever on a request handed to the dead daemon.
		if err := AbortConnection(dev); err != nil && warn != nil {
			warn(fmt.Sprintf("the mount's daemon (pid %d) is gone, and its connection cannot be aborted: %v", r.PID, err))
		}
	}
	st, err := StatusWithin(mnt, StatusTimeout)
	if err != nil {
		// No record and no answer (a runtime directory wiped, a daemon
		// stopped or hung): the process table still knows it.
		return DaemonByCmdline(mnt, entry.UserID)
	}
	pid, _ := strconv.Atoi(st["pid"])
	if pid <= 0 {
		return Record{}
	}
	r = Record{PID: pid, Start: ProcStart(pid), Mountpoint: mnt, Source: st["source"]}
	uid := max(entry.UserID, 0)
	if u, ok := ProcUID(pid); !r.Running() || !ok || int(u) != uid || !SameExecutable(pid) {
		return Record{} // not a daemon of this executable run by the mount's user
	}
	return r
}

// StatusWithin reads the mount's status, giving up after timeout (the
// daemon is hung: the read stays blocked in its goroutine).
func StatusWithin(mnt string, timeout time.Duration) (map[string]string, error) {
	type result struct {
		kv  map[string]string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		data, err := os.ReadFile(filepath.Join(mnt, ".epochfs", "status"))
		ch <- result{status.Parse(data).Map(), err}
	}()
	select {
	case r := <-ch:
		return r.kv, r.err
	case <-time.After(timeout):
		return nil, ErrStatusTimeout
	}
}

// DaemonByCmdline finds a daemon of mnt in the process table: a process
// of this executable started as "epochfs mount --foreground ... MNT" by
// the user uid who made the mount (trust.go). Another user's
// process of that name and arguments, or another program's, is not it.
func DaemonByCmdline(mnt string, uid int) Record {
	if uid < 0 {
		uid = 0
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range procs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if m, ok := ProcMountpoint(pid); !ok || m != mnt {
			continue
		}
		if u, ok := ProcUID(pid); !ok || int(u) != uid || !SameExecutable(pid) {
			continue
		}
		r := Record{PID: pid, Start: ProcStart(pid), Mountpoint: mnt}
		if r.Running() {
			return r
		}
	}
	return Record{}
}
