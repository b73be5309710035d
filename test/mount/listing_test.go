package mount

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// listingTree writes dirs directories of n empty files each, and one
// nested directory.
func listingTree(t *testing.T, dirs, n int) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	for d := range dirs {
		dir := filepath.Join(src, fmt.Sprintf("c%d", d))
		if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d.jpg", i)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(src, "c0/sub/deep.jpg"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	return src
}

// walks are names-only walks of a tree as users run them: ls -R, find
// with -printf, and os.walk, each printing what it saw relative to $1.
var walks = map[string][]string{
	"ls -R":     {"bash", "-c", `cd "$1" && ls -R .`, "bash"},
	"find":      {"bash", "-c", `cd "$1" && find . -printf '%y %P\n' | LC_ALL=C sort`, "bash"},
	"os.walk":   {"/usr/bin/python3", "-c", osWalkPy},
	"ls -l dir": {"bash", "-c", `cd "$1" && LC_ALL=C ls -ln --time-style=+%s c2`, "bash"},
}

const osWalkPy = `
import os, sys
root = sys.argv[1]
for d, dirs, files in sorted(os.walk(root)):
    print(os.path.relpath(d, root), sorted(dirs), sorted(files))
`

func walk(t *testing.T, name, root string) string {
	t.Helper()
	args := append(append([]string(nil), walks[name]...), root)
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s of %s: %v\n%s", name, root, err, out)
	}
	return string(out)
}

// TestListingsAreNamesOnlyAndCachedUntilTheCatalogChanges: ls -R, find
// and os.walk through the mount print what they print on the source, and
// the first of them makes no inode of a file (the first READDIRPLUS of a
// listing carries no attributes); ls -l gets every entry's attributes
// right; later walks are served by the kernel's cache of the listings, and
// a refresh that adds and removes files drops the cached listings of their
// directories.
//
// The kernel now and then reads a directory again although its listing was
// cached (2 runs in about 110 of this test: one directory each), and then,
// advised by the earlier lookup of its subdirectory, asks for the rest of
// it with attributes: so the inodes are counted after the first walk, and
// the cached walks may send the daemon some entries but not a walk's worth.
func TestListingsAreNamesOnlyAndCachedUntilTheCatalogChanges(t *testing.T) {
	requireDebianPython(t)
	const dirs, n = 4, 700
	src := listingTree(t, dirs, n)
	e := newEnv(t, src, 1<<20)
	e.mount()
	for i, w := range []string{"ls -R", "find", "os.walk"} {
		if got, want := walk(t, w, e.mnt), walk(t, w, src); got != want {
			t.Fatalf("%s through the mount differs from the source:\n%s\nwant:\n%s", w, got, want)
		}
		if i > 0 {
			continue
		}
		for d := range dirs {
			if got := e.fsys.Looked(fmt.Sprintf("c%d", d)); got > 1 {
				t.Errorf("after a names-only walk the kernel holds %d inodes of c%d's entries, want at most its subdirectory", got, d)
			}
		}
	}
	// Each walk lists every directory once; the first reaches the daemon,
	// the kernel serves the other two.
	one := int64(dirs*(n+1) + dirs + 1)
	if sent := e.num("dir_entries"); sent < one || sent >= 2*one {
		t.Errorf("three walks made the daemon send %d entries; one walk has %d", sent, one)
	}
	sent := e.num("dir_entries")
	opens := e.num("dir_opens")
	for _, w := range []string{"ls -R", "find", "os.walk"} {
		if got, want := walk(t, w, e.mnt), walk(t, w, src); got != want {
			t.Fatalf("a second %s through the mount differs from the source:\n%s", w, got)
		}
	}
	if got := e.num("dir_entries") - sent; got >= one {
		t.Errorf("three walks of an unchanged dataset made the daemon send %d more entries (one walk has %d), want the kernel's cache to serve them", got, one)
	}
	if got := e.num("dir_opens"); got <= opens {
		t.Errorf("dir_opens did not count the second walks' opens: %d then %d", opens, got)
	}
	// ls -l looks at every entry: the kernel gets their attributes (by
	// LOOKUP or by the READDIRPLUS it sends once advised).
	if got, want := walk(t, "ls -l dir", e.mnt), walk(t, "ls -l dir", src); got != want {
		t.Fatalf("ls -l through the mount:\n%s\nwant:\n%s", got, want)
	}
	if got := e.fsys.Looked("c2"); got != n+1 {
		t.Errorf("after ls -l the kernel holds %d inodes of c2's entries, want %d", got, n+1)
	}
	// A refresh adds a file to c1 and removes one of c3: their listings
	// change, through every walk. c1's mtime is set back as it was, so
	// that only the mount's word drops the kernel's listing of it, not a
	// new mtime.
	fi, err := os.Stat(filepath.Join(src, "c1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "c1/new.jpg"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(src, "c1"), fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(src, "c3/f0001.jpg")); err != nil {
		t.Fatal(err)
	}
	if code, out := cli(t, "refresh", e.mnt); code != 0 {
		t.Fatalf("refresh: exit %d: %s", code, out)
	}
	for _, w := range []string{"ls -R", "find", "os.walk"} {
		got := walk(t, w, e.mnt)
		if want := walk(t, w, src); got != want {
			t.Fatalf("%s after a refresh differs from the source:\n%s\nwant:\n%s", w, got, want)
		}
		if !strings.Contains(got, "new.jpg") || strings.Contains(got, "c3/f0001.jpg") {
			t.Fatalf("%s after a refresh:\n%s", w, got)
		}
	}
}
