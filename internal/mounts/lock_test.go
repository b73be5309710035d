package mounts

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestStateLockIsExclusiveAndNamesItsHolder(t *testing.T) {
	dir := t.TempDir()
	l, err := LockState(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = CheckStateFree(dir)
	var inUse *StateInUseError
	if !errors.As(err, &inUse) || inUse.PID != os.Getpid() || !errors.Is(err, ErrStateInUse) {
		t.Fatalf("check of a held lock: %v, want ErrStateInUse by pid %d", err, os.Getpid())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	// Released (as by the holder's death): free, and taken over.
	if err := CheckStateFree(dir); err != nil {
		t.Fatalf("check of a released lock: %v", err)
	}
	l, err = LockState(dir)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
}

func TestRecordNamesOfDifferentMountPointsDiffer(t *testing.T) {
	seen := map[string]string{}
	for _, m := range []string{"/mnt/a/b", "/mnt/a_b", "/mnt/a%2Fb", "/mnt/a-b", "/mnt/a b", "/" + strings.Repeat("x", 300), "/" + strings.Repeat("x", 301)} {
		n := Key(m) + ".json"
		if strings.Contains(n, "/") || len(n) > 255 {
			t.Errorf("%q: name %q is not one path element", m, n)
		}
		if o, dup := seen[n]; dup {
			t.Errorf("%q and %q share the record name %q", m, o, n)
		}
		seen[n] = m
	}
}

func TestProcRunningTellsAReusedPidFromItsProcess(t *testing.T) {
	pid := os.Getpid()
	start := ProcStart(pid)
	if start == 0 || !ProcRunning(pid, start) {
		t.Fatalf("this process: start %d, running %v", start, ProcRunning(pid, start))
	}
	if ProcRunning(pid, start+1) {
		t.Fatal("a different start time counts as the same process")
	}
}

func TestAFileLockRemovedByItsHolderIsNotTakenOnTheOldFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	a, err := Lock(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(path, false); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v, want ErrLocked", err)
	}
	// A waiter that opened the file before its removal.
	got := make(chan *FileLock, 1)
	go func() {
		l, err := Lock(path, true)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(50 * time.Millisecond) // let it block (a wait, not an assertion)
	if err := a.RemoveAndRelease(); err != nil {
		t.Fatal(err)
	}
	b := <-got
	// b holds the file now at path; nobody else may take it.
	if _, err := Lock(path, false); !errors.Is(err, ErrLocked) {
		t.Fatalf("lock while the waiter holds it: %v, want ErrLocked", err)
	}
	b.Release()
}

// TestALockOfAHolderThatNoLongerRunsIsWaitedFor: the pid in the lock file
// names a process that is gone, and the flock is let go a moment later (a
// killed daemon whose exit the kernel has not finished): the next daemon
// waits for it instead of refusing the state directory.
func TestALockOfAHolderThatNoLongerRunsIsWaitedFor(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, LockName)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("flock", path, "sleep", "0.5")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Wait()
	for deadline := time.Now().Add(5 * time.Second); ; {
		f, err := tryLock(path, false)
		if err != nil {
			break // flock(1) holds it
		}
		f.Close()
		if time.Now().After(deadline) {
			t.Fatal("flock(1) did not take the lock within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(gone.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := LockState(dir)
	if err != nil {
		t.Fatalf("lock of a state directory whose holder is gone: %v", err)
	}
	defer l.Release()
	if got := LockPID(dir); got != os.Getpid() {
		t.Fatalf("lock file names pid %d, want %d", got, os.Getpid())
	}
}
