package main

// The users of a mount. Job prologs mount a dataset for their job and job
// epilogs unmount it, but several jobs may share one mount: each names
// itself with --user-ref ID (a Slurm job id), and `epochfs unmount
// --user-ref ID` drops that user and unmounts only when no user is left.
// `epochfs mount --keep` marks the mount as kept: user unmounts drop their
// user and never unmount; a mount made without --user-ref (by hand, by
// systemd) is kept too. An unmount --user-ref of an ID that is not a user
// leaves the mount as it is. A plain `epochfs unmount` (an administrator)
// unmounts whatever the users, and forgets them.
//
// The users live in RUNTIME/KEY.users (JSON, RUNTIME and KEY as for the
// runtime record: internal/daemon/record.go). They belong to the mount point, not to
// one daemon: a daemon that died and was mounted again by the next job
// keeps the users of the jobs still running, whose epilogs come later. They
// live under /run, so a reboot forgets them together with the mounts.
//
// Mount and unmount of one mount point serialize on RUNTIME/KEY.lock, held
// from their first look at the mount point until they are done: a prolog's
// "already mounted" and an epilog's "last user, unmount" cannot
// interleave.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/epochfs/epochfs/internal/daemon"
)

// maxUserRef bounds a user id.
const maxUserRef = 128

// mountUsers is the content of RUNTIME/KEY.users.
type mountUsers struct {
	Users []string `json:"users"`
	Keep  bool     `json:"keep,omitempty"`
}

func checkUserRef(id string) error {
	if len(id) > maxUserRef {
		return usageErr("--user-ref: longer than %d bytes", maxUserRef)
	}
	for _, c := range id {
		if c < 0x21 || c > 0x7e {
			return usageErr("--user-ref %q: want printable characters without spaces", id)
		}
	}
	return nil
}

func usersPath(mnt string) string {
	return filepath.Join(daemon.RuntimeDir(), daemon.Key(mnt)+".users")
}

// lockMountpoint takes mnt's lock, waiting (and saying so on stderr) for a
// mount or unmount of mnt in progress.
func lockMountpoint(mnt string, stderr io.Writer) (*daemon.FileLock, error) {
	dir := daemon.RuntimeDir()
	if err := daemon.MakeRuntimeDir(dir); err != nil {
		return nil, runtimeErr("runtime directory: %v", err)
	}
	path := filepath.Join(dir, daemon.Key(mnt)+".lock")
	lk, err := daemon.Lock(path, false)
	if errors.Is(err, daemon.ErrLocked) {
		fmt.Fprintf(stderr, "epochfs: waiting for another mount or unmount of %s\n", mnt)
		lk, err = daemon.Lock(path, true)
	}
	if err != nil {
		return nil, runtimeErr("%v", err)
	}
	return lk, nil
}

func loadUsers(mnt string) mountUsers {
	var u mountUsers
	if data, err := os.ReadFile(usersPath(mnt)); err == nil {
		json.Unmarshal(data, &u)
	}
	return u
}

// saveUsers writes u atomically; with no user and no keep it removes the
// file.
func saveUsers(mnt string, u mountUsers) error {
	path := usersPath(mnt)
	if len(u.Users) == 0 && !u.Keep {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	data, err := json.Marshal(u)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// addUser records id (if set) as a user of mnt, and keep.
func addUser(mnt, id string, keep bool) error {
	if id == "" && !keep {
		return nil
	}
	u := loadUsers(mnt)
	if id != "" && !slices.Contains(u.Users, id) {
		u.Users = append(u.Users, id)
	}
	u.Keep = u.Keep || keep
	if err := saveUsers(mnt, u); err != nil {
		return runtimeErr("mounted, but the user %q could not be recorded: %v", id, err)
	}
	return nil
}

// forgetUsersIfUnmounted forgets mnt's users when no epochfs mount is at
// mnt any more (a daemon's exit). It takes no lock: `epochfs unmount` holds
// the mount point's lock while it waits for the daemon to exit.
func forgetUsersIfUnmounted(mnt string) {
	if m, mounted := daemon.FindMount(mnt); mounted && m.Epochfs() {
		return // a newer mount is there: its users
	}
	saveUsers(mnt, mountUsers{})
}

// releaseMountpoint drops mnt's lock, and removes the lock file when
// nothing is left to serialize on: no epochfs mount at mnt and no user of
// it.
func releaseMountpoint(lk *daemon.FileLock, mnt string) {
	if m, mounted := daemon.FindMount(mnt); !mounted || !m.Epochfs() {
		if u := loadUsers(mnt); len(u.Users) == 0 && !u.Keep {
			lk.RemoveAndRelease()
			return
		}
	}
	lk.Release()
}

// tidyMountpoint removes mnt's lock file if nobody holds it and nothing is
// left to serialize on (after a foreground daemon's exit).
func tidyMountpoint(mnt string) {
	lk, err := daemon.Lock(filepath.Join(daemon.RuntimeDir(), daemon.Key(mnt)+".lock"), false)
	if err == nil {
		releaseMountpoint(lk, mnt)
	}
}
