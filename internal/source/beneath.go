package source

// Resolving dataset paths beneath the source root.
//
// The daemon runs as root and the source is writable by its users (a shared
// project directory), so a path the catalog recorded at the walk may name
// something else by the time the daemon opens it: a directory swapped for a
// symlink to a root-only directory, a file swapped for a FIFO. Every
// root-side operation on the source therefore resolves its dataset path
// itself, from a directory descriptor of the source root held since the
// mount, with openat2(2) and RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS: no
// component may be a symlink (the last one included) and nothing may lead
// above the root. Kernels without openat2 (before 5.6) get the same rule
// from a walk of openat(2) calls with O_NOFOLLOW, one component at a time.
//
// A path that meets a symlink fails with ErrSymlinkInPath, which also
// matches fs.ErrNotExist: from the dataset's point of view no regular file
// or directory has that name any more (a refresh of its directory finds the
// symlink and records it as one).
//
// Files are never opened for reading by name: the path is resolved to an
// O_PATH descriptor, which opens nothing, its type is checked with fstat,
// and only a regular file is then opened, through /proc/self/fd, which
// reopens the very inode that was checked. A FIFO, device or socket is
// refused (ErrNotRegular) without ever being opened, so none can block a
// worker or wake a driver.

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

var (
	// ErrSymlinkInPath means a component of a dataset path is a symlink
	// on the source now, or is no directory where the path needs one. It
	// matches fs.ErrNotExist: no dataset file has that name any more.
	ErrSymlinkInPath error = goneErr("a symlink or a non-directory on the path")
	// ErrNotRegular means a dataset file is no longer a regular file on
	// the source (a FIFO, a device, a socket, a directory, a symlink). It
	// matches fs.ErrNotExist too.
	ErrNotRegular error = goneErr("not a regular file")
	// ErrBadPath means a dataset path is not a clean relative path.
	ErrBadPath = errors.New("not a clean dataset path")
	// ErrNotSymlink means a readlink found something else than a symlink.
	ErrNotSymlink = errors.New("not a symlink")
)

// goneErr is an error that says a dataset path names no file of its kind
// on the source: it matches fs.ErrNotExist.
type goneErr string

func (e goneErr) Error() string        { return string(e) }
func (e goneErr) Is(target error) bool { return target == fs.ErrNotExist }

// resolveFlags are the openat2 resolve flags of every dataset path.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// beneath resolves dataset paths beneath one directory descriptor.
type beneath struct {
	fd int
	// noOpenat2 uses the per-component walk (kernels without openat2, and
	// tests of the walk). Set by the first open that finds openat2
	// refused, read by every open: atomic.
	noOpenat2 atomic.Bool
}

// checkRel rejects what is not a clean relative path of names.
func checkRel(rel string) error {
	if rel == "" {
		return nil
	}
	if strings.HasPrefix(rel, "/") || strings.HasSuffix(rel, "/") || strings.IndexByte(rel, 0) >= 0 {
		return ErrBadPath
	}
	for _, c := range strings.Split(rel, "/") {
		if c == "" || c == "." || c == ".." {
			return ErrBadPath
		}
	}
	return nil
}

// open resolves rel beneath b and opens it with flags (O_NOFOLLOW and
// O_CLOEXEC are always added). rel "" is the root itself.
func (b *beneath) open(rel string, flags int) (int, error) {
	if err := checkRel(rel); err != nil {
		return -1, err
	}
	name := rel
	if name == "" {
		name = "."
	}
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !b.noOpenat2.Load() {
		how := unix.OpenHow{Flags: uint64(flags), Resolve: resolveFlags}
		for try := 0; ; try++ {
			fd, err := unix.Openat2(b.fd, name, &how)
			switch {
			case err == nil:
				return fd, nil
			case err == unix.EAGAIN && try < 8:
				// A rename raced the lookup; the kernel asks us to retry.
				continue
			case err == unix.ENOSYS || err == unix.EPERM && try == 0 && seccompDenied(b.fd):
				b.noOpenat2.Store(true)
			default:
				return -1, resolveErr(err)
			}
			break
		}
	}
	return b.walkOpen(rel, flags)
}

// seccompDenied reports whether openat2 itself is refused (a seccomp
// filter answering EPERM), as opposed to a permission error of the path:
// it tries the root, which root may always open.
func seccompDenied(dirfd int) bool {
	fd, err := unix.Openat2(dirfd, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolveFlags})
	if err == nil {
		unix.Close(fd)
		return false
	}
	return err == unix.EPERM || err == unix.ENOSYS
}

// walkOpen is open without openat2: each directory component with
// O_PATH|O_DIRECTORY|O_NOFOLLOW (a symlink fails with ELOOP or ENOTDIR),
// the last with flags.
func (b *beneath) walkOpen(rel string, flags int) (int, error) {
	if rel == "" {
		fd, err := unix.Openat(b.fd, ".", flags, 0)
		return fd, resolveErr(err)
	}
	parts := strings.Split(rel, "/")
	dir := b.fd
	closeDir := func() {
		if dir != b.fd {
			unix.Close(dir)
		}
	}
	for _, c := range parts[:len(parts)-1] {
		// A symlink where a directory was fails with ENOTDIR here
		// (O_NOFOLLOW|O_DIRECTORY), as a file does: both mean the path
		// names nothing any more.
		fd, err := unix.Openat(dir, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		closeDir()
		if err != nil {
			return -1, resolveErr(err)
		}
		dir = fd
	}
	fd, err := unix.Openat(dir, parts[len(parts)-1], flags, 0)
	closeDir()
	return fd, resolveErr(err)
}

// resolveErr turns the errors of a refused resolution into
// ErrSymlinkInPath, keeping the others.
func resolveErr(err error) error {
	switch err {
	case nil:
		return nil
	case unix.ELOOP, unix.EXDEV, unix.ENOTDIR:
		return ErrSymlinkInPath
	}
	return err
}

// statInfo is an fs.FileInfo of an fstat(2) or fstatat(2).
type statInfo struct {
	name string
	st   syscall.Stat_t
}

func newStatInfo(name string, st *unix.Stat_t) *statInfo {
	fi := &statInfo{name: name}
	fi.setStat(st)
	return fi
}

func (fi *statInfo) setStat(st *unix.Stat_t) {
	fi.st = syscall.Stat_t{
		Dev: st.Dev, Ino: st.Ino, Nlink: st.Nlink, Mode: st.Mode, Uid: st.Uid, Gid: st.Gid,
		Rdev: st.Rdev, Size: st.Size, Blksize: st.Blksize, Blocks: st.Blocks,
		Atim: syscall.Timespec{Sec: st.Atim.Sec, Nsec: st.Atim.Nsec},
		Mtim: syscall.Timespec{Sec: st.Mtim.Sec, Nsec: st.Mtim.Nsec},
		Ctim: syscall.Timespec{Sec: st.Ctim.Sec, Nsec: st.Ctim.Nsec},
	}
}

// A statInfo is its own fs.DirEntry (readDir's entries).
func (fi *statInfo) Type() fs.FileMode          { return fi.Mode().Type() }
func (fi *statInfo) Info() (fs.FileInfo, error) { return fi, nil }

func (fi *statInfo) Name() string       { return fi.name }
func (fi *statInfo) Size() int64        { return fi.st.Size }
func (fi *statInfo) ModTime() time.Time { return time.Unix(fi.st.Mtim.Sec, fi.st.Mtim.Nsec) }
func (fi *statInfo) IsDir() bool        { return fi.Mode().IsDir() }
func (fi *statInfo) Sys() any           { return &fi.st }
func (fi *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(fi.st.Mode & 0o777)
	switch fi.st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	}
	if fi.st.Mode&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if fi.st.Mode&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if fi.st.Mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

func baseName(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[i+1:]
	}
	if rel == "" {
		return "."
	}
	return rel
}

// lstat is an lstat(2) of rel resolved beneath b: a last component that
// is a symlink is described, not followed (O_PATH|O_NOFOLLOW opens the
// link itself).
func (b *beneath) lstat(rel string) (*statInfo, error) {
	fd, err := b.open(rel, unix.O_PATH)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	return newStatInfo(baseName(rel), &st), nil
}

func splitRel(rel string) (dir, name string) {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return "", rel
	}
	return rel[:i], rel[i+1:]
}

// openRegular opens the regular file rel for reading (see the file
// comment): resolved to an O_PATH descriptor, checked, then reopened. It
// returns the descriptor and what fstat said of it.
func (b *beneath) openRegular(rel string) (int, *statInfo, error) {
	pfd, err := b.open(rel, unix.O_PATH)
	if err != nil {
		return -1, nil, err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return -1, nil, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return -1, nil, ErrNotRegular
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return -1, nil, err
	}
	return fd, newStatInfo(baseName(rel), &st), nil
}

// readlink reads the symlink rel (its directory resolved beneath b).
func (b *beneath) readlink(rel string) (string, error) {
	dir, name := splitRel(rel)
	if err := checkRel(rel); err != nil || rel == "" {
		return "", ErrBadPath
	}
	dfd, err := b.open(dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return "", err
	}
	defer unix.Close(dfd)
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(dfd, name, buf)
		if err != nil {
			if err == unix.EINVAL {
				return "", fmt.Errorf("%s: %w", rel, ErrNotSymlink)
			}
			return "", err
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		if len(buf) >= 1<<16 {
			return "", unix.ENAMETOOLONG
		}
		buf = make([]byte, 2*len(buf))
	}
}

// readDir lists the directory rel: each entry described by fstatat(2) on
// the directory's descriptor (never by path), sorted by name.
func (b *beneath) readDir(rel string) ([]fs.DirEntry, error) {
	fd, err := b.open(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	names, err := readNames(fd)
	if err != nil {
		return nil, err
	}
	out, err := statAt(fd, names)
	if err != nil {
		return nil, err
	}
	sortEntries(out)
	return out, nil
}

// statAt lstats names in the directory fd, in their order; a name removed
// meanwhile is left out. The entries' descriptions are one allocation for
// the directory (a walk of ten million files makes no garbage per file
// here).
func statAt(fd int, names []string) ([]fs.DirEntry, error) {
	infos := make([]statInfo, 0, len(names))
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT {
				continue // removed meanwhile
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		infos = append(infos, statInfo{name: name})
		infos[len(infos)-1].setStat(&st)
	}
	out := make([]fs.DirEntry, len(infos))
	for i := range infos {
		out[i] = &infos[i]
	}
	return out, nil
}

// readNames reads every name of the open directory fd but . and ..
func readNames(fd int) ([]string, error) {
	typed, err := readTyped(fd)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(typed))
	for i, d := range typed {
		names[i] = d.Name
	}
	return names, nil
}

// readTyped reads every name of the open directory fd but . and .., with
// the type the listing gives (names.go).
func readTyped(fd int) ([]DirName, error) {
	buf := make([]byte, 32<<10)
	var out []DirName
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		out = parseDirents(buf[:n], out)
	}
}

func sortEntries(des []fs.DirEntry) {
	slices.SortFunc(des, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
}
