package main

import (
	"fmt"
	"io"
	"os"

	"github.com/epochfs/epochfs/internal/mounts"
)

// The users of a mount are internal/mounts/users.go's; these give its
// errors the command line's kinds.

func checkUserRef(id string) error {
	if err := mounts.CheckUserRef(id); err != nil {
		return usageErr("--user-ref: %v", err)
	}
	return nil
}

// lockMountpoint takes mnt's lock, saying on stderr that it waits for a
// mount or unmount of mnt in progress.
func lockMountpoint(mnt string, stderr io.Writer) (*mounts.FileLock, error) {
	lk, err := mounts.LockMountpoint(mnt, func() {
		fmt.Fprintf(stderr, "epochfs: waiting for another mount or unmount of %s\n", mnt)
	})
	if err != nil {
		return nil, runtimeErr("%v", err)
	}
	return lk, nil
}

// addUser records id (if set) as a user of mnt, and keep.
func addUser(mnt, id string, keep bool) error {
	if err := mounts.AddUser(mnt, id, keep); err != nil {
		return runtimeErr("mounted, but the user %q could not be recorded: %v", id, err)
	}
	return nil
}

// warn prints a warning on stderr.
func warn(msg string) { fmt.Fprintf(os.Stderr, "epochfs: warning: %s\n", msg) }
