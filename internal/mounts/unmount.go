package mounts

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// The unmount policy: which mounts `epochfs unmount` refuses, and its
// errors in words a user can act on.

// RefuseForeign refuses the unmount of m, the mount at mnt, unless it is
// an epochfs mount (fstype fuse.epochfs): a wrong EPOCHFS_MOUNT in an
// epilog must not unmount the node's scratch disk. A UsageError.
func RefuseForeign(mnt string, m MountEntry) error {
	if m.Epochfs() {
		return nil
	}
	return usagef("%s is a %s mount of %s, not an epochfs mount: not unmounting it (check the mount point you gave, e.g. EPOCHFS_MOUNT)", mnt, m.FSType, m.Source)
}

// CheckMayUnmount refuses, with what to do, the unmount of a FUSE mount
// that another user made by a user other than root: fusermount3 would only
// say that it finds no entry for it in /etc/mtab.
func CheckMayUnmount(mnt string, m MountEntry) error {
	uid := os.Geteuid()
	if uid == 0 || m.UserID < 0 || m.UserID == uid {
		return nil
	}
	who := "uid " + strconv.Itoa(m.UserID)
	if u, err := user.LookupId(strconv.Itoa(m.UserID)); err == nil {
		who = fmt.Sprintf("%s (uid %d)", u.Username, m.UserID)
	}
	if m.UserID == 0 {
		return fmt.Errorf("%s was mounted by %s and only root can unmount it: run 'sudo epochfs unmount %s' or ask an administrator (a job's epilog, which runs as root, unmounts it)", mnt, who, mnt)
	}
	return fmt.Errorf("%s was mounted by %s and only that user or root can unmount it", mnt, who)
}

// UnmountExplained unmounts mnt (Unmount), its failure told as what to do.
func UnmountExplained(mnt string, lazy bool) error {
	err := Unmount(mnt, lazy)
	if err == nil {
		return nil
	}
	if errors.Is(err, syscall.EBUSY) {
		return fmt.Errorf("%s is busy (a process has files open there); close them or use --lazy", mnt)
	}
	var ue *UnmountError
	if errors.As(err, &ue) && ue.Output != "" {
		return fmt.Errorf("cannot unmount %s: %s", mnt, ue.Output)
	}
	return fmt.Errorf("unmount %s: %v", mnt, errors.Unwrap(err))
}
