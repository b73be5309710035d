package source

// A directory's names without their attributes (a walk that reads names
// first), and the attributes of names read before.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// DirName is a name a directory listing gives and its type, as the
// listing (getdents' d_type) tells it: fs.ModeDir, fs.ModeSymlink, 0 for a
// regular file, another type bit for a special file.
type DirName struct {
	Name string
	Type fs.FileMode
}

// WalkReadNames reads the names and types of the source directory rel,
// sorted by name, for the walk of the catalog (not counted): one
// getdents stream, and an lstat only for an entry whose type the listing
// does not give (DT_UNKNOWN).
func (s *Source) WalkReadNames(ctx context.Context, rel string) ([]DirName, error) {
	if err := s.usable(ctx, "readdir", rel); err != nil {
		return nil, err
	}
	var names []DirName
	err, _ := s.call(ctx, "readdir", rel, func() error {
		b, err := s.rootOf()
		if err != nil {
			return err
		}
		names, err = b.readDirNames(rel)
		return err
	}, nil)
	if err = s.believe(ctx, "readdir", rel, err); err != nil {
		return nil, err
	}
	return names, nil
}

// WalkStatNames lstats the names (sorted) of the source directory rel on
// the directory's descriptor, for the walk of the catalog (not counted):
// the entries of those that are there, in their order; a name removed
// meanwhile is left out.
func (s *Source) WalkStatNames(ctx context.Context, rel string, names []string) ([]os.DirEntry, error) {
	if err := s.usable(ctx, "stat", rel); err != nil {
		return nil, err
	}
	var des []os.DirEntry
	err, _ := s.call(ctx, "stat", rel, func() error {
		b, err := s.rootOf()
		if err != nil {
			return err
		}
		des, err = b.statNames(rel, names)
		return err
	}, nil)
	if err = s.believe(ctx, "stat", rel, err); err != nil {
		return nil, err
	}
	return des, nil
}

// readDirNames reads the names and types of directory rel, sorted.
func (b *beneath) readDirNames(rel string) ([]DirName, error) {
	fd, err := b.open(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	out, err := readTyped(fd)
	if err != nil {
		return nil, err
	}
	kept := out[:0]
	for _, d := range out {
		if d.Type == typeUnknown {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, d.Name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if err == unix.ENOENT {
					continue // removed meanwhile
				}
				return nil, fmt.Errorf("%s: %w", d.Name, err)
			}
			d.Type = newStatInfo(d.Name, &st).Mode().Type()
		}
		kept = append(kept, d)
	}
	slices.SortFunc(kept, func(a, b DirName) int { return strings.Compare(a.Name, b.Name) })
	return kept, nil
}

// typeUnknown marks a name whose type the listing did not give.
const typeUnknown = fs.ModeIrregular

// parseDirents appends the names and types of the linux_dirent64 records
// in buf (getdents64's reply) to out, but "." and "..". A record that
// does not fit the buffer ends the parse.
func parseDirents(buf []byte, out []DirName) []DirName {
	const nameOff = 19 // d_ino 8, d_off 8, d_reclen 2, d_type 1
	for len(buf) >= nameOff {
		reclen := int(binary.NativeEndian.Uint16(buf[16:18]))
		if reclen < nameOff || reclen > len(buf) {
			break
		}
		rec := buf[:reclen]
		buf = buf[reclen:]
		if binary.NativeEndian.Uint64(rec[0:8]) == 0 {
			continue // a deleted entry's slot
		}
		name := rec[nameOff:]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if len(name) == 0 || string(name) == "." || string(name) == ".." {
			continue
		}
		out = append(out, DirName{Name: string(name), Type: direntType(rec[18])})
	}
	return out
}

// direntType is the fs.FileMode type of a d_type.
func direntType(t byte) fs.FileMode {
	switch t {
	case unix.DT_REG:
		return 0
	case unix.DT_DIR:
		return fs.ModeDir
	case unix.DT_LNK:
		return fs.ModeSymlink
	case unix.DT_FIFO:
		return fs.ModeNamedPipe
	case unix.DT_SOCK:
		return fs.ModeSocket
	case unix.DT_CHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.DT_BLK:
		return fs.ModeDevice
	}
	return typeUnknown
}

// statNames lstats names (sorted) of directory rel on its descriptor. It lists
// the directory first, as a walk with stats does: on a network file
// system the stats that follow a listing are answered from the
// attributes the listing brought (NFS's READDIRPLUS, sshfs's cache of its
// READDIR, Lustre's statahead), whereas names listed minutes before cost
// a round trip each once those attributes have expired. A name the
// listing no longer has is left out without a stat.
func (b *beneath) statNames(rel string, names []string) ([]fs.DirEntry, error) {
	fd, err := b.open(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	listed, err := readNames(fd)
	if err != nil {
		return nil, err
	}
	slices.Sort(listed)
	return statAt(fd, listedNames(names, listed))
}

// listedNames returns the names that are in listed and name one entry
// each (validName); both are sorted (names as WalkReadNames gives them).
func listedNames(names, listed []string) []string {
	out := make([]string, 0, len(names))
	j := 0
	for _, n := range names {
		for j < len(listed) && listed[j] < n {
			j++
		}
		if j < len(listed) && listed[j] == n && validName(n) {
			out = append(out, n)
		}
	}
	return out
}

// validName reports whether name is one entry's name: fstatat on the
// directory must not resolve a path through it.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsRune(name, '/')
}
