package mounts

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// MountEntry is one line of /proc/self/mountinfo.
type MountEntry struct {
	Dir    string // the mount point
	Dev    string // MAJOR:MINOR; a FUSE mount's is its connection's
	FSType string // e.g. fuse.epochfs
	Source string // the mount source; epochfs's is the dataset's path
	// UserID is the user_id= of a FUSE mount (who mounted it), -1 if none.
	UserID int
}

// Epochfs reports whether the entry is an epochfs mount.
func (m MountEntry) Epochfs() bool { return m.FSType == "fuse.epochfs" }

// FindMount returns the mount at dir, the topmost if several are stacked
// there, and whether there is one. A FUSE mount's device number is not
// reused while its connection lives, so it tells one mount from a later
// one on the same path.
func FindMount(dir string) (MountEntry, bool) {
	clean := filepath.Clean(dir)
	var found MountEntry
	ok := false
	for _, m := range Mounts() {
		if m.Dir == clean {
			found, ok = m, true // later lines are mounted over earlier ones
		}
	}
	return found, ok
}

// Mounts lists this process's mount table (/proc/self/mountinfo), in its
// order.
func Mounts() []MountEntry { return mountsOf("/proc/self/mountinfo") }

// mountsOf parses the mountinfo file path.
func mountsOf(path string) []MountEntry {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []MountEntry
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		m := MountEntry{Dir: unescapeMount(f[4]), Dev: f[2], UserID: -1}
		// After the optional fields comes "-", then type, source, options.
		for i := 5; i < len(f); i++ {
			if f[i] != "-" {
				continue
			}
			if i+2 < len(f) {
				m.FSType, m.Source = f[i+1], unescapeMount(f[i+2])
			}
			if i+3 < len(f) {
				for _, o := range strings.Split(f[i+3], ",") {
					if v, ok := strings.CutPrefix(o, "user_id="); ok {
						m.UserID, _ = strconv.Atoi(v)
					}
				}
			}
			break
		}
		out = append(out, m)
	}
	return out
}

// MountDev returns the device number of the mount at dir (see FindMount).
func MountDev(dir string) (string, bool) {
	m, ok := FindMount(dir)
	return m.Dev, ok
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// UnmountError is a refused unmount.
type UnmountError struct {
	Mountpoint string
	Err        error  // syscall.EBUSY, syscall.EPERM, ...
	Output     string // fusermount3's message, for unprivileged unmounts
}

func (e *UnmountError) Error() string {
	if e.Output != "" {
		return fmt.Sprintf("daemon: unmount %s: %s", e.Mountpoint, e.Output)
	}
	return fmt.Sprintf("daemon: unmount %s: %v", e.Mountpoint, e.Err)
}
func (e *UnmountError) Unwrap() error { return e.Err }

// Unmount unmounts mnt, detaching it at once when lazy. Root unmounts with
// umount2(2); other users through fusermount3, whose refusal carries no
// errno: a busy mount is told by its message.
func Unmount(mnt string, lazy bool) error {
	if os.Geteuid() == 0 {
		flags := 0
		if lazy {
			flags = syscall.MNT_DETACH
		}
		if err := syscall.Unmount(mnt, flags); err != nil {
			return &UnmountError{Mountpoint: mnt, Err: err}
		}
		return nil
	}
	a := []string{"-u"}
	if lazy {
		a = append(a, "-z")
	}
	out, err := exec.Command("fusermount3", append(a, mnt)...).CombinedOutput()
	if err == nil {
		return nil
	}
	msg := strings.TrimSpace(string(out))
	ue := &UnmountError{Mountpoint: mnt, Err: syscall.EPERM, Output: msg}
	var ee *exec.Error
	switch {
	case errors.As(err, &ee):
		ue.Output = "fusermount3 not found (install Debian's fuse3)"
	case strings.Contains(msg, "busy"):
		ue.Err = syscall.EBUSY
	}
	return ue
}
