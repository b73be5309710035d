package main

// The daemon's identity on disk. Two files let other commands find a daemon
// without asking it anything, so they work when it is hung or dead:
//
//   - STATE/daemon.lock, held with flock(2) by the daemon for its whole life
//     and holding its pid. A mount takes it before it opens the tiers and
//     the catalog: a held lock is a live daemon (perhaps one still draining
//     a lazily detached mount), which owns the catalog and the tiers' temp
//     files; a file nobody holds was left by a dead daemon and is simply
//     taken over (the kernel drops a flock when its holder exits). The file
//     is never removed: removing a lock file races with a process that has
//     just opened it.
//   - RUNTIME/KEY.json, the runtime record of one mount: the daemon's pid
//     and start time, its state directory, the mount point and the mount's
//     device number. RUNTIME is /run/epochfs for root and
//     $XDG_RUNTIME_DIR/epochfs (else /tmp/epochfs-UID) for other users; KEY
//     is the mount point, escaped. `epochfs unmount` reads it to learn which
//     process serves a mount point, then waits for that process to exit.
//     The pid with the start time names one process even after the pid is
//     reused; the device number tells the record's mount from a later mount
//     on the same path. A daemon removes its record when it exits and
//     removes the records of dead daemons when it starts.

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockName is the daemon's lock file in the state directory.
const lockName = "daemon.lock"

// stateLock is a held STATE/daemon.lock.
type stateLock struct{ f *os.File }

// stateInUseError is a state directory whose lock another process holds.
type stateInUseError struct {
	dir string
	pid int // 0 if the holder has not written its pid yet
}

func (e *stateInUseError) Error() string {
	if e.pid <= 0 {
		return fmt.Sprintf("state directory %s is in use by another epochfs daemon (a previous mount still draining?): wait for it to exit", e.dir)
	}
	return fmt.Sprintf("state directory %s is in use by epochfs daemon pid %d (a previous mount still draining?): wait for it to exit or stop it (kill %d)", e.dir, e.pid, e.pid)
}

// tryLockState takes dir's lock without waiting. It fails with a
// *stateInUseError (exit 1) when another live process holds it.
func tryLockState(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, runtimeErr("state directory %s: %v", dir, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err == nil {
		return f, nil
	}
	f.Close()
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, &exitError{code: exitRuntime, err: &stateInUseError{dir: dir, pid: lockPID(path)}}
	}
	return nil, runtimeErr("state directory %s: lock %s: %v", dir, path, err)
}

// lockState takes dir's lock for the life of this process and writes this
// process's pid into it.
func lockState(dir string) (*stateLock, error) {
	f, err := tryLockState(dir)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, runtimeErr("state directory %s: %v", dir, err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, runtimeErr("state directory %s: %v", dir, err)
	}
	return &stateLock{f: f}, nil
}

// release drops the lock (the file stays, with the last holder's pid).
func (l *stateLock) release() error { return l.f.Close() }

// checkStateFree fails as lockState does when a live daemon holds dir's
// lock, and holds nothing itself: the mount command checks before it
// starts a daemon, which then takes the lock for good.
func checkStateFree(dir string) error {
	f, err := tryLockState(dir)
	if err != nil {
		return err
	}
	return f.Close()
}

// lockPID reads the pid in a lock file (0 if there is none yet).
func lockPID(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// daemonRecord is the runtime record of one mount; the zero value is "no
// daemon known".
type daemonRecord struct {
	PID        int    `json:"pid"`
	Start      uint64 `json:"start"` // /proc/PID/stat start time, clock ticks since boot
	StateDir   string `json:"state_dir"`
	Mountpoint string `json:"mountpoint"`
	Dev        string `json:"dev"` // the mount's device number, MAJOR:MINOR as in mountinfo
}

// runtimeDir is where this user's daemons keep their records.
func runtimeDir() string {
	if os.Geteuid() == 0 {
		return "/run/epochfs"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "epochfs")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("epochfs-%d", os.Geteuid()))
}

// makeRuntimeDir creates the runtime directory and checks that it is a
// directory of this user's (it may live in a shared /tmp).
func makeRuntimeDir() (string, error) {
	dir := runtimeDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !st.IsDir() || !ok || int(sys.Uid) != os.Geteuid() {
		return "", fmt.Errorf("%s is not a directory of uid %d", dir, os.Geteuid())
	}
	return dir, nil
}

// recordName is the file name of mnt's record: the mount point escaped
// into one path element (a hash when that is too long for a name).
func recordName(mnt string) string {
	name := url.PathEscape(strings.TrimPrefix(filepath.Clean(mnt), "/"))
	if len(name) > 200 {
		h := fnv.New64a()
		h.Write([]byte(mnt))
		name = fmt.Sprintf("%016x", h.Sum64())
	}
	return name + ".json"
}

// writeRecord writes r atomically, after removing the records of daemons
// that are gone, and returns its path.
func writeRecord(r daemonRecord) (string, error) {
	dir, err := makeRuntimeDir()
	if err != nil {
		return "", err
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if old, ok := loadRecord(p); ok && !old.running() {
			os.Remove(p)
		}
	}
	data, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, recordName(r.Mountpoint))
	tmp, err := os.CreateTemp(dir, ".record-*")
	if err != nil {
		return "", err
	}
	_, werr := tmp.Write(append(data, '\n'))
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return "", werr
	}
	return path, nil
}

// removeRecord removes the record at path if it is still r's: a later
// daemon on the same mount point may have replaced it.
func removeRecord(path string, r daemonRecord) {
	if cur, ok := loadRecord(path); ok && cur.PID == r.PID && cur.Start == r.Start {
		os.Remove(path)
	}
}

func loadRecord(path string) (daemonRecord, bool) {
	var r daemonRecord
	data, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(data, &r) != nil || r.PID <= 0 {
		return daemonRecord{}, false
	}
	return r, true
}

// readRecord finds mnt's record: in this user's runtime directory, and for
// root also in every user's (root may unmount a user's mount).
func readRecord(mnt string) (daemonRecord, bool) {
	dirs := []string{runtimeDir()}
	if os.Geteuid() == 0 {
		more, _ := filepath.Glob("/run/user/*/epochfs")
		dirs = append(dirs, more...)
	}
	name := recordName(mnt)
	for _, d := range dirs {
		if r, ok := loadRecord(filepath.Join(d, name)); ok && r.Mountpoint == mnt {
			return r, true
		}
	}
	return daemonRecord{}, false
}

// running reports whether the recorded daemon still runs.
func (r daemonRecord) running() bool { return r.PID > 0 && procRunning(r.PID, r.Start) }

// logPath is where the recorded daemon logs, for messages.
func (r daemonRecord) logPath() string {
	if r.StateDir == "" {
		return "its log"
	}
	return filepath.Join(r.StateDir, "epochfs.log")
}

// procStart returns the start time of process pid (field 22 of
// /proc/PID/stat, clock ticks since boot), 0 if there is no such process.
func procStart(pid int) uint64 {
	fields := procStat(fmt.Sprintf("/proc/%d/stat", pid))
	if len(fields) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(fields[19], 10, 64)
	return v
}

// procRunning reports whether process pid, started at start, still runs:
// some thread of it is not a zombie. A thread blocked in a request the
// source never answers (a hung FUSE or NFS source) outlives the exit of
// the others and keeps the process's descriptors, and so its locks: the
// whole thread group is checked, not only its leader.
func procRunning(pid int, start uint64) bool {
	if start == 0 || procStart(pid) != start {
		return false
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	for _, t := range tasks {
		f := procStat(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if len(f) > 0 && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// procStat returns the fields of a /proc stat file after the command name
// (the first is the state, field 3), nil if it cannot be read.
func procStat(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}
