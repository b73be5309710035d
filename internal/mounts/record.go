package mounts

// The daemon's identity on disk. Two files let other commands find a daemon
// without asking it anything, so they work when it is hung or dead:
//
//   - STATE/daemon.lock, held with flock(2) by the daemon for its whole life
//     and holding its pid (lock.go). New takes it before it opens the tiers
//     and the catalog: a held lock is a live daemon (perhaps one still
//     draining a lazily detached mount), which owns the catalog and the
//     tiers' temp files; a file nobody holds was left by a dead daemon and
//     is simply taken over (the kernel drops a flock when its holder
//     exits). The file is never removed: removing a lock file races with a
//     process that has just opened it.
//   - RUNTIME/KEY.json, the runtime record of one mount: the daemon's pid
//     and start time, its state directory, source and configuration, the
//     mount point and the mount's device number. RUNTIME is /run/epochfs
//     for root and $XDG_RUNTIME_DIR/epochfs (else /tmp/epochfs-UID) for
//     other users; KEY is the mount point, escaped. `epochfs mount` reads it
//     to tell a live mount of the same dataset (nothing to do) from a dead
//     one (cleared and mounted again); `epochfs unmount` to learn which
//     process serves a mount point, then to wait for that process to exit.
//     The pid with the start time names one process even after the pid is
//     reused; the device number tells the record's mount from a later mount
//     on the same path. A daemon removes its record when it exits and
//     removes the records of dead daemons when it starts.

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Record is the runtime record of one mount; the zero value is "no daemon
// known".
type Record struct {
	PID        int    `json:"pid"`
	Start      uint64 `json:"start"` // /proc/PID/stat start time, clock ticks since boot
	StateDir   string `json:"state_dir"`
	Mountpoint string `json:"mountpoint"`
	Dev        string `json:"dev"` // the mount's device number, MAJOR:MINOR as in mountinfo
	Source     string `json:"source,omitempty"`
	// Config identifies the configuration the daemon was started with
	// (Options.ConfigID).
	Config string `json:"config,omitempty"`
	// Metrics is the address of the metrics endpoint, if any.
	Metrics string `json:"metrics,omitempty"`
}

// RuntimeDir is where this user's daemons keep their records.
func RuntimeDir() string {
	if os.Geteuid() == 0 {
		return "/run/epochfs"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "epochfs")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("epochfs-%d", os.Geteuid()))
}

// MakeRuntimeDir creates dir and checks that it is a directory of this
// user's (it may live in a shared /tmp).
func MakeRuntimeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !st.IsDir() || !ok || int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("daemon: %s is not a directory of uid %d", dir, os.Geteuid())
	}
	return nil
}

// Key is the mount point escaped into one path element (a hash when that
// is too long for a name): records and the mount commands' lock and user
// files are named after it.
func Key(mnt string) string {
	name := url.PathEscape(strings.TrimPrefix(filepath.Clean(mnt), "/"))
	if len(name) > 200 {
		h := fnv.New64a()
		h.Write([]byte(mnt))
		name = fmt.Sprintf("%016x", h.Sum64())
	}
	return name
}

// WriteRecord writes r into dir atomically, after removing the records of
// daemons that are gone, and returns its path.
func WriteRecord(dir string, r Record) (string, error) {
	if err := MakeRuntimeDir(dir); err != nil {
		return "", err
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if old, ok := loadRecord(p); ok && !old.Running() {
			os.Remove(p)
		}
	}
	data, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, Key(r.Mountpoint)+".json")
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

// RemoveRecord removes the record at path if it is still r's: a later
// daemon on the same mount point may have replaced it.
func RemoveRecord(path string, r Record) {
	if cur, ok := loadRecord(path); ok && cur.PID == r.PID && cur.Start == r.Start {
		os.Remove(path)
	}
}

func loadRecord(path string) (Record, bool) {
	var r Record
	data, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(data, &r) != nil || r.PID <= 0 {
		return Record{}, false
	}
	return r, true
}

// recordDirs are the runtime directories to search: this user's; for root
// every user's too (root may unmount a user's mount); for a user, root's
// too (`epochfs list` shows root's mounts as they are). What is found in
// them is believed as trust.go says.
func recordDirs() []string {
	dirs := []string{RuntimeDir()}
	if os.Geteuid() == 0 {
		more, _ := filepath.Glob("/run/user/*/epochfs")
		dirs = append(dirs, more...)
	} else {
		dirs = append(dirs, "/run/epochfs")
	}
	return dirs
}

// ReadRecord finds mnt's record, whether its daemon runs or not.
func ReadRecord(mnt string) (Record, bool) {
	name := Key(mnt) + ".json"
	for _, d := range recordDirs() {
		if r, ok := trustedRecord(d, filepath.Join(d, name)); ok && r.Mountpoint == mnt {
			return r, true
		}
	}
	return Record{}, false
}

// Records lists every runtime record found (recordDirs), whether its
// daemon runs or not.
func Records() []Record {
	var out []Record
	for _, d := range recordDirs() {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".json") {
				if r, ok := trustedRecord(d, filepath.Join(d, e.Name())); ok {
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// RecordOfState finds the record of the running daemon that uses the
// state directory dir.
func RecordOfState(dir string) (Record, bool) {
	for _, d := range recordDirs() {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			if r, ok := trustedRecord(d, filepath.Join(d, e.Name())); ok && r.StateDir == dir && r.Running() {
				return r, true
			}
		}
	}
	return Record{}, false
}

// Running reports whether the recorded daemon still runs.
func (r Record) Running() bool { return r.PID > 0 && ProcRunning(r.PID, r.Start) }

// LogPath is where the recorded daemon logs, for messages.
func (r Record) LogPath() string {
	if r.StateDir == "" {
		return "its log"
	}
	return filepath.Join(r.StateDir, "epochfs.log")
}

// ProcStart returns the start time of process pid (field 22 of
// /proc/PID/stat, clock ticks since boot), 0 if there is no such process.
func ProcStart(pid int) uint64 {
	fields := procStat(fmt.Sprintf("/proc/%d/stat", pid))
	if len(fields) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(fields[19], 10, 64)
	return v
}

// ProcRunning reports whether process pid, started at start, still runs:
// some thread of it is not a zombie and not exiting. A thread blocked in a
// request the source never answers (a hung FUSE or NFS source) outlives
// the exit of the others: the whole thread group is checked, not only its
// leader. A process whose threads left are all exiting (one blocked closing
// a file of a hung source on its way out) runs no more code:
// ProcExitingStuck tells it apart, and its state directory's lock may be
// taken over (lock.go).
func ProcRunning(pid int, start uint64) bool {
	if start == 0 || ProcStart(pid) != start {
		return false
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	for _, t := range tasks {
		f := procStat(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if len(f) > 0 && f[0] != "Z" && f[0] != "X" && !exiting(f) && !killed(pid, t.Name()) {
			return true
		}
	}
	return false
}

// pfExiting is the kernel's PF_EXITING task flag.
const pfExiting = 0x4

// exiting reports whether the task of stat fields f is on its way out
// (PF_EXITING): it runs no more code of its own; one blocked in the exit
// (closing a file of a source that does not answer) serves nothing.
func exiting(f []string) bool {
	if len(f) < 7 {
		return false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfExiting != 0
}

// killed reports whether task tid of pid has SIGKILL pending: it is
// doomed, and runs no more code of its own (one blocked in a request a
// stopped FUSE server has taken cannot be woken even by SIGKILL).
func killed(pid int, tid string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, tid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != "SigPnd" && k != "ShdPnd" {
			continue
		}
		if m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && m&(1<<(9-1)) != 0 {
			return true
		}
	}
	return false
}

// ProcExitingStuck reports whether process pid, started at start, has
// exited but is not gone: no thread of it runs (each is a zombie, exiting,
// or killed), and one is blocked in the kernel (in a request a source that
// does not answer has taken, or closing a file of it on its way out).
func ProcExitingStuck(pid int, start uint64) bool {
	if start == 0 || ProcStart(pid) != start || ProcRunning(pid, start) {
		return false
	}
	return !ProcGone(pid, start)
}

// ProcGone reports whether process pid, started at start, is gone or a
// zombie: its exit has finished, its files (and the locks on them) are
// closed.
func ProcGone(pid int, start uint64) bool {
	if start == 0 || ProcStart(pid) != start {
		return true
	}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		if f := procStat(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name())); len(f) > 0 && f[0] != "Z" && f[0] != "X" {
			return false
		}
	}
	return true
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

// WaitExit waits up to timeout for the daemon to exit and reports whether
// it did. Once the daemon runs no more code it waits up to
// ExitGrace for the exit to finish (its files closed, its state
// directory's lock let go: the next mount then finds it free); an exit
// stuck closing a file of a source that does not answer never finishes,
// and the daemon counts as exited anyway (ProcExitingStuck).
func WaitExit(d Record, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for d.Running() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	for end := time.Now().Add(ExitGrace); !ProcGone(d.PID, d.Start) && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
