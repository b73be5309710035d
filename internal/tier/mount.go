package tier

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// rootFS is the file system a tier with RequireMount must not be on (a
// variable for the tests).
var rootFS = "/"

// CheckOwnMount is the check of Options.RequireMount, without opening the
// tier.
func CheckOwnMount(dir string) error { return checkOwnMount(dir) }

// checkOwnMount refuses a tier directory that is not on a file system of
// its own: with the node's local disk not mounted, its mount point is an
// empty directory of the root file system, and a cache created there would
// fill the root file system. The directory, or its parent when it does not
// exist yet, must exist on another device than the root (the parent is
// never created: a missing one is a disk not mounted).
func checkOwnMount(dir string) error {
	var root, st syscall.Stat_t
	if err := syscall.Stat(rootFS, &root); err != nil {
		return &os.PathError{Op: "stat", Path: rootFS, Err: err}
	}
	at := filepath.Clean(dir)
	err := syscall.Stat(at, &st)
	if errors.Is(err, syscall.ENOENT) {
		at = filepath.Dir(at)
		if err = syscall.Stat(at, &st); errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("require_mount: %s does not exist (is its file system mounted?); it is not created", at)
		}
	}
	if err != nil {
		return &os.PathError{Op: "stat", Path: at, Err: err}
	}
	if st.Dev == root.Dev {
		return fmt.Errorf("require_mount: %s is on the root file system, not a file system of its own (is the disk mounted?)", at)
	}
	return nil
}
