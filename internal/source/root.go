package source

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// The source's root: its identity (what file system it is, across
// mounts), and its opening, bounded in time.

// rootID is what identifies the source root's file system.
type rootID struct {
	dev, ino uint64
	fstype   int64
	// mnt is the mount's ID (statx STATX_MNT_ID; 0 where the kernel has
	// none): a file system mounted again at the root's path, even of
	// the same type and root inode, is another mount.
	mnt uint64
}

func idOf(st *unix.Stat_t, sf *unix.Statfs_t, mnt uint64) rootID {
	return rootID{dev: st.Dev, ino: st.Ino, fstype: int64(sf.Type), mnt: mnt}
}

// mountID is the ID of the mount of fd (path "" and AT_EMPTY_PATH) or of
// path; 0 if the kernel cannot say.
func mountID(fd int, path string) uint64 {
	var stx unix.Statx_t
	flags := unix.AT_STATX_SYNC_AS_STAT
	if path == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	if err := unix.Statx(fd, path, flags, unix.STATX_MNT_ID, &stx); err != nil || stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0
	}
	return stx.Mnt_id
}

// sameMount reports whether a and b are one mount (as far as the kernel
// tells).
func (a rootID) sameMount(b rootID) bool { return a.mnt == 0 || b.mnt == 0 || a.mnt == b.mnt }

// same reports whether a is the root that b was: the same source, perhaps
// mounted again (sameMount tells). Network and FUSE file systems get a new
// anonymous device number (major 0) when they are mounted again, so
// between two such devices only the type and the root inode must agree.
func (a rootID) same(b rootID) bool {
	if a.fstype != b.fstype || a.ino != b.ino {
		return false
	}
	return a.dev == b.dev || unix.Major(a.dev) == 0 && unix.Major(b.dev) == 0
}

// DefaultPatience is how long Open waits for the root of a source
// an earlier mount knew (Options.Expect) before it mounts without.
const DefaultPatience = time.Second

// errNoAnswer is a root that did not answer within Open's wait.
var errNoAnswer = errors.New("no answer (its file system hangs?)")

// openRootWithin is openRoot given up after wait: a late answer is
// closed.
func openRootWithin(root string, noOpenat2 bool, wait time.Duration) (*beneath, rootID, error) {
	type result struct {
		b   *beneath
		id  rootID
		err error
	}
	ch := make(chan result) // unbuffered: an abandoned answer is closed by its goroutine
	abandoned := make(chan struct{})
	go func() {
		b, id, err := openRoot(root, noOpenat2)
		select {
		case ch <- result{b, id, err}:
		case <-abandoned:
			if err == nil {
				unix.Close(b.fd)
			}
		}
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.b, r.id, r.err
	case <-t.C:
		close(abandoned)
		// A result sent between the timer and the close is ours to close.
		select {
		case r := <-ch:
			if r.err == nil {
				return r.b, r.id, nil
			}
		default:
		}
		return nil, rootID{}, fmt.Errorf("%w within %v", errNoAnswer, wait)
	}
}

// RootIdentity is what identifies the source's file system across mounts
// (a daemon keeps it in its state directory and gives it back as
// Options.Expect).
type RootIdentity struct {
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	FSType int64  `json:"fstype"`
}

func (r *RootIdentity) id() rootID { return rootID{dev: r.Dev, ino: r.Ino, fstype: r.FSType} }

// Identity is the identity of the source root found at Open, and
// whether it was found (false when it started unavailable).
func (s *Source) Identity() (RootIdentity, bool) {
	return RootIdentity{Dev: s.id.dev, Ino: s.id.ino, FSType: s.id.fstype}, s.found
}

// openRoot opens the directory root (following symlinks: the path is the
// admin's) and reads its identity.
func openRoot(root string, noOpenat2 bool) (*beneath, rootID, error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, rootID{}, err
	}
	id, err := fdID(fd)
	if err != nil {
		unix.Close(fd)
		return nil, rootID{}, err
	}
	b := &beneath{fd: fd}
	b.noOpenat2.Store(noOpenat2)
	return b, id, nil
}

func fdID(fd int) (rootID, error) {
	var st unix.Stat_t
	var sf unix.Statfs_t
	if err := unix.Fstat(fd, &st); err != nil {
		return rootID{}, err
	}
	if err := unix.Fstatfs(fd, &sf); err != nil {
		return rootID{}, err
	}
	return idOf(&st, &sf, mountID(fd, "")), nil
}

func pathID(p string) (rootID, error) {
	var st unix.Stat_t
	var sf unix.Statfs_t
	if err := unix.Stat(p, &st); err != nil {
		return rootID{}, err
	}
	if err := unix.Statfs(p, &sf); err != nil {
		return rootID{}, err
	}
	return idOf(&st, &sf, mountID(unix.AT_FDCWD, p)), nil
}
