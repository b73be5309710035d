package mount

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// metaSource makes a source with a hard-linked pair, a sparse file, a
// file whose atime, mtime and ctime differ, user.* attributes (one larger
// than a first buffer), a root-only file with an attribute, and nested
// directories.
func metaSource(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	for _, d := range []string{"d/x", "d/y", "d/z"} {
		if err := os.MkdirAll(filepath.Join(src, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, data string, mode os.FileMode) string {
		full := filepath.Join(src, p)
		if err := os.WriteFile(full, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		return full
	}
	a := write("d/a", "the same bytes under two names\n", 0o644)
	if err := os.Link(a, filepath.Join(src, "d/x/b")); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(src, "sparse")
	if err := os.WriteFile(sparse, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(sparse, 4<<20); err != nil {
		t.Fatal(err)
	}
	timed := write("timed", "t\n", 0o644)
	if err := os.Chtimes(timed, time.Unix(1_600_000_000, 123), time.Unix(1_700_000_000, 456)); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(a, "user.checksum", []byte("sha256:abc"), 0); err != nil {
		t.Fatalf("the test's source has no user xattrs: %v", err)
	}
	if err := unix.Setxattr(a, "user.big", bytes.Repeat([]byte("v"), 3000), 0); err != nil {
		t.Fatal(err)
	}
	secret := write("secret", "root only\n", 0o600)
	if err := unix.Setxattr(secret, "user.label", []byte("hidden"), 0); err != nil {
		t.Fatal(err)
	}
	return src
}

// The mount shows the source's metadata: a hard-linked pair is one inode
// with two links (tar stores a link, du counts it once), a sparse file's
// blocks, the source's atime and ctime, directories' link counts; and it
// passes user.* attributes through (getxattr, listxattr, cp -a), while
// the tier attribute is readable by name and not listed. All of it holds
// after a remount (the catalog's records), and a user who may not read a
// file may not read its attributes.
func TestTheMountShowsTheSourcesMetadata(t *testing.T) {
	src := metaSource(t)
	e := newEnv(t, src, 1<<30)
	e.mount()
	openToOthers(e)
	check := func(when string) {
		t.Helper()
		for _, p := range []string{"d/a", "d/x/b", "sparse", "timed", "d", "d/x", ""} {
			var s, m unix.Stat_t
			if err := unix.Lstat(filepath.Join(src, p), &s); err != nil {
				t.Fatal(err)
			}
			if err := unix.Lstat(filepath.Join(e.mnt, p), &m); err != nil {
				t.Fatalf("%s: stat %q: %v", when, p, err)
			}
			if m.Nlink != s.Nlink || m.Blocks != s.Blocks || m.Size != s.Size || m.Mtim != s.Mtim || m.Ctim != s.Ctim {
				t.Errorf("%s: %q: nlink %d blocks %d size %d mtime %v ctime %v; the source has %d %d %d %v %v",
					when, p, m.Nlink, m.Blocks, m.Size, m.Mtim, m.Ctim, s.Nlink, s.Blocks, s.Size, s.Mtim, s.Ctim)
			}
			// The atime is the source's as the walk saw it: reads (the
			// copies of d/a, the walk's readdirs) move the source's since.
			if (p == "timed" || p == "sparse") && m.Atim != s.Atim {
				t.Errorf("%s: %q: atime %v, the source's %v", when, p, m.Atim, s.Atim)
			}
		}
		var a, b unix.Stat_t
		unix.Lstat(filepath.Join(e.mnt, "d/a"), &a)
		unix.Lstat(filepath.Join(e.mnt, "d/x/b"), &b)
		if a.Ino != b.Ino || a.Nlink != 2 {
			t.Errorf("%s: the hard-linked pair: inodes %d and %d, nlink %d; want one inode with 2 links", when, a.Ino, b.Ino, a.Nlink)
		}
		out, err := exec.Command("bash", "-c", `tar -cf - -C "$1" d/a d/x/b | tar -tvf -`, "bash", e.mnt).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "d/x/b link to d/a") {
			t.Errorf("%s: tar of the pair stores two files: %v\n%s", when, err, out)
		}
		du := func(dir string) string {
			out, err := exec.Command("du", "-sb", "--exclude=.epochfs", dir).Output()
			if err != nil {
				t.Fatalf("du %s: %v", dir, err)
			}
			return strings.Fields(string(out))[0]
		}
		if got, want := du(e.mnt), du(src); got != want {
			t.Errorf("%s: du -sb of the mount %s, of the source %s", when, got, want)
		}
		got, err := os.ReadFile(filepath.Join(e.mnt, "d/x/b"))
		if err != nil || string(got) != "the same bytes under two names\n" {
			t.Errorf("%s: read of the second link: %q, %v", when, got, err)
		}
		checkXattrs(t, e, when)
	}
	check("first mount")
	e.unmount()
	e.mount()
	check("after a remount")
}

// checkXattrs checks the user.* attributes and the tier attribute through
// the mount, from Go, Python, cp -a and an unprivileged user.
func checkXattrs(t *testing.T, e *env, when string) {
	t.Helper()
	a := filepath.Join(e.mnt, "d/a")
	buf := make([]byte, 64)
	if n, err := unix.Getxattr(a, "user.checksum", buf); err != nil || string(buf[:n]) != "sha256:abc" {
		t.Errorf("%s: user.checksum = %q, %v", when, buf[:n], err)
	}
	if _, err := unix.Getxattr(a, "user.big", buf); !errors.Is(err, syscall.ERANGE) {
		t.Errorf("%s: user.big into 64 bytes: %v, want ERANGE", when, err)
	}
	if n, err := unix.Getxattr(a, "user.big", nil); err != nil || n != 3000 {
		t.Errorf("%s: the size of user.big: %d, %v; want 3000", when, n, err)
	}
	if _, err := unix.Getxattr(a, "user.nope", buf); !errors.Is(err, syscall.ENODATA) {
		t.Errorf("%s: user.nope: %v, want ENODATA", when, err)
	}
	if n, err := unix.Getxattr(a, "user.epochfs.tier", buf); err != nil || n == 0 {
		t.Errorf("%s: user.epochfs.tier by name: %q, %v", when, buf[:n], err)
	}
	py := `import os, sys
p = sys.argv[1]
print(",".join(sorted(os.listxattr(p))), len(os.getxattr(p, "user.big")))`
	out, err := exec.Command("/usr/bin/python3", "-c", py, a).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "user.big,user.checksum 3000" {
		t.Errorf("%s: Python listxattr and getxattr: %q, %v; want the source's two names, without the tier attribute", when, out, err)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", a, dst).CombinedOutput(); err != nil {
		t.Fatalf("%s: cp -a: %v\n%s", when, err, out)
	}
	if n, err := unix.Getxattr(dst, "user.checksum", buf); err != nil || string(buf[:n]) != "sha256:abc" {
		t.Errorf("%s: cp -a did not carry user.checksum: %q, %v", when, buf[:n], err)
	}
	if _, err := unix.Getxattr(dst, "user.epochfs.tier", buf); !errors.Is(err, syscall.ENODATA) {
		t.Errorf("%s: cp -a stamped user.epochfs.tier on its copy: %v", when, err)
	}
	// The root-only file's attribute needs read permission, as on the
	// source; its names are listed as listxattr lists them there.
	code, out2 := shell(t, true, `/usr/bin/python3 -c 'import os, sys
try:
    os.getxattr(sys.argv[1], "user.label")
    print("read")
except PermissionError:
    print("denied")' "$1"`, filepath.Join(e.mnt, "secret"))
	if code != 0 || strings.TrimSpace(out2) != "denied" {
		t.Errorf("%s: an unprivileged user's getxattr of a root-only file: exit %d: %q, want denied", when, code, out2)
	}
}
