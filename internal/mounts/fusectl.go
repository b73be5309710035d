package mounts

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// fusectlDir is where the kernel's fusectl file system lists the FUSE
// connections (systemd mounts it; AbortConnection does, for the abort
// only, when it is not).
const fusectlDir = "/sys/fs/fuse/connections"

// fusectlMagic is fusectl's statfs type (FUSE_CTL_SUPER_MAGIC).
const fusectlMagic = 0x65735543

// AbortConnection aborts the FUSE connection of the mount of device dev
// ("MAJOR:MINOR", as mountinfo gives it): every request waiting on it, and
// every later one, fails with ENOTCONN at once. It is for a mount whose
// daemon is dead or stuck on its way out: requests the kernel handed to it
// (over io_uring, a ring nobody reads any more) would otherwise wait
// forever, and even SIGKILL cannot end their callers. Root only.
func AbortConnection(dev string) error {
	maj, min, ok := strings.Cut(dev, ":")
	ma, err1 := strconv.ParseUint(maj, 10, 32)
	mi, err2 := strconv.ParseUint(min, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("daemon: fuse connection of device %q: not MAJOR:MINOR", dev)
	}
	id := ma<<20 | mi // the kernel's dev_t, as fusectl names it
	abort := filepath.Join(fusectlDir, strconv.FormatUint(id, 10), "abort")
	var st syscall.Statfs_t
	if err := syscall.Statfs(fusectlDir, &st); err != nil || st.Type != fusectlMagic {
		// fusectl not mounted (a container, a system without systemd):
		// mounted for this abort only, and taken down after it.
		if err := syscall.Mount("fusectl", fusectlDir, "fusectl", 0, ""); err != nil {
			return fmt.Errorf("daemon: mount fusectl at %s: %w", fusectlDir, err)
		}
		defer syscall.Unmount(fusectlDir, syscall.MNT_DETACH)
	}
	if err := os.WriteFile(abort, []byte("1"), 0); err != nil {
		return fmt.Errorf("daemon: abort fuse connection %d: %w", id, err)
	}
	return nil
}
