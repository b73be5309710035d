package source

import (
	"bytes"
	"context"
	"encoding/binary"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A listing of names gives every entry's type from the listing, sorted by
// name; the stat of names leaves out a name removed meanwhile and never
// resolves a name that is not one entry's.
func TestWalkReadNamesGivesTypesAndStatNamesTheAttributes(t *testing.T) {
	root := writeSource(t, map[string][]byte{"d/file": []byte("data"), "d/sub/x": nil, "d/b": []byte("12")})
	d := filepath.Join(root, "d")
	if err := os.Symlink("file", filepath.Join(d, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(d, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(d, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	bothResolvers(t, func(t *testing.T, noOpenat2 bool) {
		if err := os.WriteFile(filepath.Join(d, "b"), []byte("12"), 0o644); err != nil {
			t.Fatal(err)
		}
		src := openTestSource(t, Options{Root: root, noOpenat2: noOpenat2})
		names, err := src.WalkReadNames(context.Background(), "d")
		if err != nil {
			t.Fatal(err)
		}
		want := []DirName{{"b", 0}, {"fifo", fs.ModeNamedPipe}, {"file", 0}, {"link", fs.ModeSymlink},
			{"sock", fs.ModeSocket}, {"sub", fs.ModeDir}}
		if !slices.Equal(names, want) {
			t.Fatalf("names %v, want %v", names, want)
		}
		if err := os.Remove(filepath.Join(d, "b")); err != nil {
			t.Fatal(err)
		}
		des, err := src.WalkStatNames(context.Background(), "d", []string{"b", "file", "link", "sub", "..", "sub/x", ""})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, de := range des {
			fi, _ := de.Info()
			got = append(got, de.Name()+" "+fi.Mode().Type().String())
			if de.Name() == "file" && fi.Size() != 4 {
				t.Errorf("file: size %d, want 4", fi.Size())
			}
		}
		if want := []string{"file ----------", "link L---------", "sub d---------"}; !slices.Equal(got, want) {
			t.Errorf("stat of names: %v, want %v", got, want)
		}
		if _, err := src.WalkReadNames(context.Background(), "d/file"); err == nil {
			t.Error("names of a file: no error")
		}
	})
}

// The names stated are those the directory still lists, in their order:
// one removed since, one added since, and one not an entry's name.
func TestListedNames(t *testing.T) {
	for _, c := range []struct{ names, listed, want []string }{
		{[]string{"a", "b", "c"}, []string{"a", "b", "c"}, []string{"a", "b", "c"}},
		{[]string{"a", "b", "c"}, []string{"a", "c"}, []string{"a", "c"}},
		{[]string{"a", "c"}, []string{"a", "b", "c", "d"}, []string{"a", "c"}},
		{[]string{"..", "a", "a/b"}, []string{"..", "a", "a/b"}, []string{"a"}},
		{[]string{"a", "b"}, nil, []string{}},
		{nil, []string{"a"}, []string{}},
	} {
		if got := listedNames(c.names, c.listed); !slices.Equal(got, c.want) {
			t.Errorf("listedNames(%q, %q) = %q, want %q", c.names, c.listed, got, c.want)
		}
	}
}

// dirent is one linux_dirent64 record.
func dirent(ino uint64, typ byte, name string) []byte {
	reclen := (19 + len(name) + 1 + 7) &^ 7
	b := make([]byte, reclen)
	binary.NativeEndian.PutUint64(b[0:8], ino)
	binary.NativeEndian.PutUint16(b[16:18], uint16(reclen))
	b[18] = typ
	copy(b[19:], name)
	return b
}

func TestParseDirentsSkipsDotsAndDeletedSlots(t *testing.T) {
	buf := slices.Concat(dirent(1, unix.DT_DIR, "."), dirent(2, unix.DT_DIR, ".."), dirent(3, unix.DT_REG, "a.jpg"),
		dirent(0, unix.DT_REG, "deleted"), dirent(4, unix.DT_UNKNOWN, "u"), dirent(5, unix.DT_LNK, "l"))
	got := parseDirents(buf, nil)
	want := []DirName{{"a.jpg", 0}, {"u", typeUnknown}, {"l", fs.ModeSymlink}}
	if !slices.Equal(got, want) {
		t.Errorf("parsed %v, want %v", got, want)
	}
	// A record cut short ends the parse.
	if got := parseDirents(buf[:len(buf)-3], nil); len(got) != 2 {
		t.Errorf("a cut record: %v, want the two before it", got)
	}
}

// Any bytes: no panic, and every name is one entry's (no NUL, no "/", not
// "." nor "..", not empty).
func FuzzParseDirents(f *testing.F) {
	f.Add(slices.Concat(dirent(3, unix.DT_REG, "a.jpg"), dirent(4, unix.DT_DIR, "d")))
	f.Add(dirent(1, unix.DT_DIR, "."))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, buf []byte) {
		for _, d := range parseDirents(buf, nil) {
			if d.Name == "" || d.Name == "." || d.Name == ".." || bytes.IndexByte([]byte(d.Name), 0) >= 0 {
				t.Fatalf("name %q", d.Name)
			}
			if strings.Contains(d.Name, "/") {
				// The kernel never gives one; the stat of names skips it.
				if validName(d.Name) {
					t.Fatalf("%q is taken as one entry's name", d.Name)
				}
			}
		}
	})
}
