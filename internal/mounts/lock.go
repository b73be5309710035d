package mounts

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var (
	// ErrStateInUse: another live daemon holds the state directory.
	ErrStateInUse = errors.New("daemon: state directory in use")
	// ErrLocked: a lock taken without waiting is held (Lock).
	ErrLocked = errors.New("held by another process")
)

// LockName is the daemon's lock file in the state directory.
const LockName = "daemon.lock"

// StateInUseError is a state directory whose lock another process holds.
type StateInUseError struct {
	Dir string
	PID int // 0 if the holder has not written its pid yet
}

func (e *StateInUseError) Error() string {
	if e.PID <= 0 {
		return fmt.Sprintf("state directory %s is in use by another epochfs daemon (a previous mount still draining?): wait for it to exit", e.Dir)
	}
	return fmt.Sprintf("state directory %s is in use by epochfs daemon pid %d (a previous mount still draining?): wait for it to exit or stop it (kill %d)", e.Dir, e.PID, e.PID)
}

// Is makes every StateInUseError match ErrStateInUse.
func (e *StateInUseError) Is(target error) bool { return target == ErrStateInUse }

// tryLock takes the flock of path without waiting (wait false) or waiting
// (wait true). It fails with errWouldBlock when another process holds it.
func tryLock(path string, wait bool) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err == nil {
		return f, nil
	}
	f.Close()
	return nil, err
}

// ExitGrace is how long a process that no longer runs (killed, exiting)
// gets to finish its exit: the kernel closes its files, and drops its
// flocks, only then, which a loaded machine may take a while to schedule.
// tryLockState waits that long for such a holder of the lock, and the
// unmount command for its daemon.
const ExitGrace = 2 * time.Second

// tryLockState takes dir's lock without waiting on a live holder. It fails
// with a *StateInUseError when another running process holds it; a holder
// that no longer runs gets ExitGrace to let go, and one stuck in its exit
// (ProcExitingStuck) has the lock taken over.
func tryLockState(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockName)
	deadline := time.Now().Add(ExitGrace)
	for {
		f, err := tryLock(path, false)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("daemon: state directory %s: lock: %w", dir, err)
		}
		pid := LockPID(dir)
		start := ProcStart(pid)
		if pid > 0 && ProcExitingStuck(pid, start) {
			return takeOver(dir)
		}
		if pid > 0 && ProcRunning(pid, start) || time.Now().After(deadline) {
			return nil, &StateInUseError{Dir: dir, PID: pid}
		}
		// Gone, a zombie, or a new holder that has not written its pid
		// yet: ask again.
		time.Sleep(20 * time.Millisecond)
	}
}

// takeOver takes the lock of dir from a holder that has exited but cannot
// finish (ProcExitingStuck): its exit is stuck closing a file of a source
// that does not answer, and the kernel releases a flock only at the end of
// that exit. A new lock file, locked, replaces the old one: the holder
// runs no more code, and the mount command serializes mounts of a state
// directory (its mount.lock), so no two take over at once.
func takeOver(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockName)
	tmp := path + ".new"
	os.Remove(tmp)
	f, err := tryLock(tmp, false)
	if err != nil {
		return nil, fmt.Errorf("daemon: state directory %s: lock: %w", dir, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		f.Close()
		return nil, fmt.Errorf("daemon: state directory %s: lock: %w", dir, err)
	}
	return f, nil
}

// StateLock is a held STATE/daemon.lock.
type StateLock struct{ f *os.File }

// LockState takes dir's lock for the life of this process and writes this
// process's pid into it.
func LockState(dir string) (*StateLock, error) {
	f, err := tryLockState(dir)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("daemon: state directory %s: %w", dir, err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("daemon: state directory %s: %w", dir, err)
	}
	return &StateLock{f: f}, nil
}

// release drops the lock (the file stays, with the last holder's pid).
func (l *StateLock) Release() error { return l.f.Close() }

// CheckStateFree fails as New does when a live daemon holds dir's lock
// (a *StateInUseError), and holds nothing itself: the mount command checks
// before it starts a daemon, which then takes the lock for good.
func CheckStateFree(dir string) error {
	f, err := tryLockState(dir)
	if err != nil {
		return err
	}
	return f.Close()
}

// LockPID reads the pid in dir's lock file (0 if there is none yet).
func LockPID(dir string) int {
	data, err := os.ReadFile(filepath.Join(dir, LockName))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// FileLock is an exclusive flock(2) on a file, held until Release. The
// mount and unmount commands serialize on them (cmd/epochfs). Unlike
// daemon.lock, such a file may be removed by its holder (RemoveAndRelease):
// a process that opened the file before the removal and locks it after
// finds that the path no longer names what it locked, and tries again.
type FileLock struct {
	f    *os.File
	path string
}

// Lock takes the lock of path (creating the file), waiting for another
// holder when wait is true; without wait a held lock fails with
// ErrLocked.
func Lock(path string, wait bool) (*FileLock, error) {
	for {
		f, err := tryLock(path, wait)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("daemon: lock %s: %w", path, ErrLocked)
		}
		if err != nil {
			return nil, fmt.Errorf("daemon: lock %s: %w", path, err)
		}
		var held, named syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &held) == nil && syscall.Stat(path, &named) == nil &&
			held.Dev == named.Dev && held.Ino == named.Ino {
			return &FileLock{f: f, path: path}, nil
		}
		f.Close() // removed (and perhaps made anew) meanwhile
	}
}

// Release drops the lock; a nil lock is a no-op.
func (l *FileLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// RemoveAndRelease removes the lock file, then drops the lock: for a lock
// of something that is gone (an unmounted mount point).
func (l *FileLock) RemoveAndRelease() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := os.Remove(l.path)
	if rerr := l.Release(); err == nil {
		err = rerr
	}
	return err
}
