package mounts

// Which records and processes a command believes. A record names a daemon
// that commands wait for, and `epochfs list` shows; root reads the records
// of every user (it may unmount a user's mount), and any user may write
// files into their own runtime directory and start processes with any
// name and arguments. So:
//
//   - a record in root's directory (/run/epochfs, root's and not writable
//     by others) is root's daemon's;
//   - a record in a user's directory is believed only for a daemon of that
//     user: the file is theirs, the process runs as them, it runs this
//     very executable, and its command line mounts the record's mount
//     point;
//   - a daemon found in the process table (a mount whose record is gone)
//     is believed only when it runs this executable as the user who made
//     the mount (its user_id).

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// trustedRecord loads the record at path in the runtime directory dir and
// reports whether it is believed (see above).
func trustedRecord(dir, path string) (Record, bool) {
	r, ok := loadRecord(path)
	if !ok {
		return Record{}, false
	}
	dst, derr := os.Lstat(dir)
	fst, ferr := os.Lstat(path)
	if derr != nil || ferr != nil || !dst.IsDir() || !fst.Mode().IsRegular() {
		return Record{}, false
	}
	owner := dst.Sys().(*syscall.Stat_t).Uid
	if fst.Sys().(*syscall.Stat_t).Uid != owner {
		return Record{}, false
	}
	if owner == 0 {
		// Root's: what only root can write.
		if dst.Mode().Perm()&0o022 != 0 || fst.Mode().Perm()&0o022 != 0 {
			return Record{}, false
		}
		return r, true
	}
	if !r.Running() {
		return r, true // nothing to wait for; shown as gone, removed by the next daemon
	}
	if uid, ok := ProcUID(r.PID); !ok || uid != owner || !SameExecutable(r.PID) {
		return Record{}, false
	}
	if mnt, ok := ProcMountpoint(r.PID); !ok || mnt != r.Mountpoint {
		return Record{}, false
	}
	return r, true
}

// ProcUID returns the effective uid of process pid.
func ProcUID(pid int) (uint32, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "Uid:"); ok {
			f := strings.Fields(v)
			if len(f) < 2 {
				return 0, false
			}
			uid, err := strconv.ParseUint(f[1], 10, 32)
			return uint32(uid), err == nil
		}
	}
	return 0, false
}

// SameExecutable reports whether process pid runs the executable this
// process runs: the same file, or, replaced since the process started (a
// package upgrade), a file of the same path.
func SameExecutable(pid int) bool {
	self, err := os.Executable()
	if err != nil {
		return false
	}
	exe := "/proc/" + strconv.Itoa(pid) + "/exe"
	if a, err := os.Stat(self); err == nil {
		if b, err := os.Stat(exe); err == nil && os.SameFile(a, b) {
			return true
		}
	}
	target, err := os.Readlink(exe)
	return err == nil && strings.HasSuffix(target, " (deleted)") && strings.TrimSuffix(target, " (deleted)") == self
}

// ProcMountpoint returns the mount point process pid serves, when its
// command line is a daemon's ("epochfs mount --foreground ... MNT", the
// mount point its last argument, relative to its working directory).
func ProcMountpoint(pid int) (string, bool) {
	dir := "/proc/" + strconv.Itoa(pid)
	raw, err := os.ReadFile(dir + "/cmdline")
	if err != nil {
		return "", false
	}
	args := bytes.Split(bytes.TrimRight(raw, "\x00"), []byte{0})
	if len(args) < 4 || string(args[1]) != "mount" || string(args[2]) != "--foreground" {
		return "", false
	}
	last := string(args[len(args)-1])
	if !filepath.IsAbs(last) {
		cwd, err := os.Readlink(dir + "/cwd")
		if err != nil {
			return "", false
		}
		last = filepath.Join(cwd, last)
	}
	return filepath.Clean(last), true
}
