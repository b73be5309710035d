package mounts

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
// runtime record: record.go). They belong to the mount point, not to
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
	"os"
	"path/filepath"
	"slices"
)

// MaxUserRef bounds a user id.
const MaxUserRef = 128

// Users is the content of RUNTIME/KEY.users.
type Users struct {
	Users []string `json:"users"`
	Keep  bool     `json:"keep,omitempty"`
}

// CheckUserRef refuses a user id that is too long or not printable
// without spaces.
func CheckUserRef(id string) error {
	if len(id) > MaxUserRef {
		return fmt.Errorf("longer than %d bytes", MaxUserRef)
	}
	for _, c := range id {
		if c < 0x21 || c > 0x7e {
			return fmt.Errorf("%q: want printable characters without spaces", id)
		}
	}
	return nil
}

func usersPath(mnt string) string {
	return filepath.Join(RuntimeDir(), Key(mnt)+".users")
}

// LockMountpoint takes mnt's lock, waiting for a mount or unmount of mnt
// in progress (waiting, if set, is called once before the wait).
func LockMountpoint(mnt string, waiting func()) (*FileLock, error) {
	dir := RuntimeDir()
	if err := MakeRuntimeDir(dir); err != nil {
		return nil, fmt.Errorf("runtime directory: %w", err)
	}
	path := filepath.Join(dir, Key(mnt)+".lock")
	lk, err := Lock(path, false)
	if errors.Is(err, ErrLocked) {
		if waiting != nil {
			waiting()
		}
		lk, err = Lock(path, true)
	}
	return lk, err
}

// LoadUsers reads mnt's users (none if the file is missing or unreadable).
func LoadUsers(mnt string) Users {
	var u Users
	if data, err := os.ReadFile(usersPath(mnt)); err == nil {
		json.Unmarshal(data, &u)
	}
	return u
}

// SaveUsers writes u atomically; with no user and no keep it removes the
// file.
func SaveUsers(mnt string, u Users) error {
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

// AddUser records id (if set) as a user of mnt, and keep.
func AddUser(mnt, id string, keep bool) error {
	if id == "" && !keep {
		return nil
	}
	u := LoadUsers(mnt)
	if id != "" && !slices.Contains(u.Users, id) {
		u.Users = append(u.Users, id)
	}
	u.Keep = u.Keep || keep
	return SaveUsers(mnt, u)
}

// ForgetUsersIfUnmounted forgets mnt's users when no epochfs mount is at
// mnt any more (a daemon's exit). It takes no lock: `epochfs unmount` holds
// the mount point's lock while it waits for the daemon to exit.
func ForgetUsersIfUnmounted(mnt string) {
	if m, mounted := FindMount(mnt); mounted && m.Epochfs() {
		return // a newer mount is there: its users
	}
	SaveUsers(mnt, Users{})
}

// ReleaseMountpoint drops mnt's lock, and removes the lock file when
// nothing is left to serialize on: no epochfs mount at mnt and no user of
// it.
func ReleaseMountpoint(lk *FileLock, mnt string) {
	if m, mounted := FindMount(mnt); !mounted || !m.Epochfs() {
		if u := LoadUsers(mnt); len(u.Users) == 0 && !u.Keep {
			lk.RemoveAndRelease()
			return
		}
	}
	lk.Release()
}

// TidyMountpoint removes mnt's lock file if nobody holds it and nothing is
// left to serialize on (after a foreground daemon's exit).
func TidyMountpoint(mnt string) {
	lk, err := Lock(filepath.Join(RuntimeDir(), Key(mnt)+".lock"), false)
	if err == nil {
		ReleaseMountpoint(lk, mnt)
	}
}
