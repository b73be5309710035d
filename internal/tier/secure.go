package tier

// Trusting a directory the root daemon writes into (a tier root, the state
// directory), in the manner of sshd's StrictModes.
//
// A directory is trusted only when nobody but the daemon's user could have
// prepared it or could change it now:
//   - it is a directory, not a symlink, owned by the daemon's user, and not
//     writable by group or others;
//   - every directory above it is owned by root or the daemon's user and
//     not writable by group or others, unless it is sticky (/tmp, /dev/shm:
//     others may create entries there but not rename or replace ours);
//   - a symlink above it is followed only when root owns it (an admin's
//     /dev/shm -> /run/shm), and the directories it leads to are checked
//     the same way.
//
// A missing directory is created (0700, its missing parents 0755) and then
// checked with lstat: under a world-writable parent another user may have
// won the race to create it, and the check refuses theirs.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrUnsafeDir means a directory could have been prepared or can be
// changed by another user.
var ErrUnsafeDir = errors.New("not safe for a root daemon")

// SecureDir creates dir if it is missing and checks that it can be trusted
// (see above). The error is one line that names the path and the reason.
func SecureDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%s: %w: not an absolute path", dir, ErrUnsafeDir)
	}
	dir = filepath.Clean(dir)
	uid := uint32(os.Geteuid())
	parent := filepath.Dir(dir)
	if err := checkAncestors(parent, uid, 0); err != nil {
		return err
	}
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return err
		}
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		// Parents just created: check them as they are now.
		if err := checkAncestors(parent, uid, 0); err != nil {
			return err
		}
	}
	return checkOwnDir(dir, uid)
}

// CheckDir reports, without creating anything, whether dir could be used
// as SecureDir would: an existing dir is checked as SecureDir checks it;
// for a missing one, the directories above it that exist. created tells
// that the mount would create dir.
func CheckDir(dir string) (created bool, err error) {
	if !filepath.IsAbs(dir) {
		return false, fmt.Errorf("%s: %w: not an absolute path", dir, ErrUnsafeDir)
	}
	dir = filepath.Clean(dir)
	uid := uint32(os.Geteuid())
	if err := checkAncestors(filepath.Dir(dir), uid, 0); err != nil {
		return false, err
	}
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	return false, checkOwnDir(dir, uid)
}

// checkOwnDir checks the directory itself.
func checkOwnDir(dir string, uid uint32) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return &os.PathError{Op: "lstat", Path: dir, Err: err}
	}
	switch {
	case st.Mode&syscall.S_IFMT == syscall.S_IFLNK:
		return fmt.Errorf("%s: %w: it is a symlink (use the path it points to, or remove it)", dir, ErrUnsafeDir)
	case st.Mode&syscall.S_IFMT != syscall.S_IFDIR:
		return fmt.Errorf("%s: %w: not a directory", dir, ErrUnsafeDir)
	case st.Uid != uid:
		return fmt.Errorf("%s: %w: owned by uid %d, not by uid %d (another user may have prepared it: remove it or choose another path)", dir, ErrUnsafeDir, st.Uid, uid)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%s: %w: writable by group or others (mode %04o: chmod go-w it)", dir, ErrUnsafeDir, st.Mode&0o7777)
	}
	return nil
}

// checkAncestors checks dir and every directory above it that exists (a
// missing part will be created by us). depth bounds symlink chains.
func checkAncestors(dir string, uid uint32, depth int) error {
	if depth > 8 {
		return fmt.Errorf("%s: %w: too many symlinks", dir, ErrUnsafeDir)
	}
	parts := strings.Split(strings.TrimPrefix(dir, "/"), "/")
	cur := "/"
	for i := 0; i <= len(parts); i++ {
		if i > 0 {
			if parts[i-1] == "" {
				continue
			}
			cur = filepath.Join(cur, parts[i-1])
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(cur, &st); err != nil {
			if err == syscall.ENOENT {
				return nil // created by us from here down
			}
			return &os.PathError{Op: "lstat", Path: cur, Err: err}
		}
		if st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			if st.Uid != 0 {
				return fmt.Errorf("%s: %w: a symlink owned by uid %d on the path", cur, ErrUnsafeDir, st.Uid)
			}
			target, err := filepath.EvalSymlinks(cur)
			if err != nil {
				return err
			}
			rest := filepath.Join(append([]string{target}, parts[i:]...)...)
			return checkAncestors(rest, uid, depth+1)
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			return fmt.Errorf("%s: not a directory", cur)
		}
		if st.Uid != 0 && st.Uid != uid {
			return fmt.Errorf("%s: %w: a directory on the path is owned by uid %d", cur, ErrUnsafeDir, st.Uid)
		}
		if st.Mode&0o022 != 0 && st.Mode&syscall.S_ISVTX == 0 {
			return fmt.Errorf("%s: %w: a directory on the path is writable by group or others and not sticky (mode %04o)", cur, ErrUnsafeDir, st.Mode&0o7777)
		}
	}
	return nil
}
