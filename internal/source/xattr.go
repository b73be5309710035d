package source

import (
	"context"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The source's user.* extended attributes, read-only.
//
// A dataset file's user.* attributes (a checksum, a label, the tool that
// wrote it) are read from the source when asked for, never stored: the
// mount's getxattr and listxattr pass through. Other namespaces
// (security.*, system.*, trusted.*) are not: the mount carries no labels
// and no ACLs. The file is resolved beneath the source root like every
// other source path and never followed if it is a symlink (which cannot
// carry user.* attributes anyway); the attribute is read through the
// O_PATH descriptor's /proc/self/fd name, which names the file itself.

// maxXattr bounds a value and a list of names (the kernel's XATTR_SIZE_MAX
// and XATTR_LIST_MAX).
const maxXattr = 64 << 10

// UserXattrPrefix is the only namespace passed through.
const UserXattrPrefix = "user."

// Xattr returns the value of the user.* attribute name of the source
// entry rel; ok is false when the entry does not have it (or the source's
// file system has no attributes). Counted as a metadata call.
func (s *Source) Xattr(ctx context.Context, rel, name string) (v []byte, ok bool, err error) {
	if !strings.HasPrefix(name, UserXattrPrefix) {
		return nil, false, nil
	}
	err = s.xattrCall(ctx, "getxattr", rel, func(b *beneath) error {
		v, ok, err = b.xattr(rel, name)
		return err
	})
	return v, ok, err
}

// XattrNames returns the names of the source entry rel's user.*
// attributes. Counted as a metadata call.
func (s *Source) XattrNames(ctx context.Context, rel string) (names []string, err error) {
	err = s.xattrCall(ctx, "listxattr", rel, func(b *beneath) error {
		names, err = b.xattrNames(rel)
		return err
	})
	return names, err
}

func (s *Source) xattrCall(ctx context.Context, op, rel string, fn func(*beneath) error) error {
	s.stats.Add(1)
	if err := s.usable(ctx, op, rel); err != nil {
		return err
	}
	err, _ := s.call(ctx, op, rel, func() error {
		b, err := s.rootOf()
		if err != nil {
			return err
		}
		return fn(b)
	}, nil)
	return s.believe(ctx, op, rel, err)
}

// xattrPath opens rel (O_PATH, not followed) and returns the name that
// reaches the file through its descriptor; "" for a symlink.
func (b *beneath) xattrPath(rel string) (fd int, name string, err error) {
	fd, err = b.open(rel, unix.O_PATH)
	if err != nil {
		return -1, "", err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, "", err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return fd, "", nil
	}
	return fd, "/proc/self/fd/" + strconv.Itoa(fd), nil
}

// absent reports an error that means "no such attribute here".
func absent(err error) bool {
	return err == unix.ENODATA || err == unix.EOPNOTSUPP || err == unix.ENOTSUP
}

func (b *beneath) xattr(rel, name string) ([]byte, bool, error) {
	fd, p, err := b.xattrPath(rel)
	if err != nil {
		return nil, false, err
	}
	defer unix.Close(fd)
	if p == "" {
		return nil, false, nil
	}
	buf := make([]byte, 256)
	for {
		n, err := unix.Getxattr(p, name, buf)
		switch {
		case err == nil:
			return buf[:n:n], true, nil
		case absent(err):
			return nil, false, nil
		case err == unix.ERANGE && len(buf) < maxXattr:
			buf = make([]byte, min(4*len(buf), maxXattr))
		default:
			return nil, false, err
		}
	}
}

func (b *beneath) xattrNames(rel string) ([]string, error) {
	fd, p, err := b.xattrPath(rel)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if p == "" {
		return nil, nil
	}
	buf := make([]byte, 1024)
	for {
		n, err := unix.Listxattr(p, buf)
		switch {
		case err == nil:
			var names []string
			for _, name := range strings.Split(string(buf[:n]), "\x00") {
				if strings.HasPrefix(name, UserXattrPrefix) {
					names = append(names, name)
				}
			}
			return names, nil
		case absent(err):
			return nil, nil
		case err == unix.ERANGE && len(buf) < maxXattr:
			buf = make([]byte, min(4*len(buf), maxXattr))
		default:
			return nil, err
		}
	}
}
