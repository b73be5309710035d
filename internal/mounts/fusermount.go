package mounts

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// A mount by a user other than root goes through fusermount3, whose
// refusal reaches only the daemon's log: these find it there and say what
// to do.

// FusermountReason returns the last line fusermount wrote to the log after
// offset from: its reason for refusing an unprivileged mount.
func FusermountReason(logPath string, from int64) string {
	if os.Geteuid() == 0 {
		return ""
	}
	f, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return ""
	}
	why := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "/usr/bin/fusermount3: failed to open /dev/fuse: Permission denied"
		l := strings.TrimSpace(sc.Text())
		if i := strings.Index(l, "fusermount"); i >= 0 && !strings.HasPrefix(l, "epochfs") && strings.Contains(l[i:], ": ") {
			why = l[i:]
		}
	}
	return why
}

// UnprivilegedMountMessage says what fusermount3 refused and what to do.
func UnprivilegedMountMessage(mnt, why, logPath string) string {
	hint := "mount as root, or fix what fusermount3 says"
	switch {
	case strings.Contains(why, "/dev/fuse"):
		hint = "this user may not use /dev/fuse: ask the administrator to allow it (Debian's default is mode 0666) or mount as root"
	case strings.Contains(why, "allow_other") || strings.Contains(why, "user_allow_other"):
		hint = "add 'user_allow_other' to /etc/fuse.conf, or mount as root"
	case strings.Contains(why, "mount count") || strings.Contains(why, "mount_max"):
		hint = "this user has too many FUSE mounts (mount_max in /etc/fuse.conf): unmount some, or mount as root"
	case strings.Contains(why, "mountpoint") || strings.Contains(why, "Permission denied"):
		hint = fmt.Sprintf("use a mount point owned and writable by uid %d, or mount as root", os.Geteuid())
	}
	return fmt.Sprintf("cannot mount %s as uid %d: %s: %s (log: %s)", mnt, os.Geteuid(), why, hint, logPath)
}
