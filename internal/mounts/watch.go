package mounts

// Waiting for the mount table to change. A daemon that must notice its
// mount leaving its mount namespace could read /proc/self/mountinfo every
// few seconds, but on a node with hundreds of mounts (NFS, Lustre,
// containers) that is a parse of the whole table each time, for each
// daemon, while nothing changes. The kernel instead tells a reader of the
// table when it changed: poll(2) on an open mountinfo file returns
// POLLPRI (and POLLERR) once the namespace's mount table has changed
// since the file was opened or last polled (proc(5), /proc/pid/mounts).

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// TableWatch waits for changes of this process's mount table.
type TableWatch struct {
	fd int
}

// WatchTable starts watching this process's mount table. The file is
// opened with open(2), not os.Open: the Go runtime would add it to its own
// epoll set, whose poll of the file on each change takes the change for
// itself, and Wait would never see one.
func WatchTable() (*TableWatch, error) {
	fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("mounts: watch the mount table: %w", &os.PathError{Op: "open", Path: "/proc/self/mountinfo", Err: err})
	}
	return &TableWatch{fd: fd}, nil
}

// Wait waits up to d for the mount table to change, and reports whether
// it changed since the watch started or the last Wait that said so. An
// error (the poll failed) reports a change, so that a caller looks.
func (w *TableWatch) Wait(d time.Duration) (bool, error) {
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLPRI}}
	deadline := time.Now().Add(d)
	for {
		ms := max(int(time.Until(deadline).Milliseconds()), 0)
		n, err := unix.Poll(fds, ms)
		if errors.Is(err, unix.EINTR) {
			if time.Now().Before(deadline) {
				continue
			}
			return false, nil
		}
		if err != nil {
			return true, fmt.Errorf("mounts: wait for the mount table: %w", err)
		}
		return n > 0 && fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0, nil
	}
}

// Close ends the watch.
func (w *TableWatch) Close() error { return unix.Close(w.fd) }
