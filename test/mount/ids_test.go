package mount

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// scandirInodesPy prints each entry below argv[1] (.epochfs/ left out) as
// "d_ino<TAB>path": the inode numbers of the listing itself.
const scandirInodesPy = `
import os, sys
root = sys.argv[1]
def walk(d, rel):
    with os.scandir(d) as it:
        for e in it:
            p = rel + e.name
            if p == ".epochfs":
                continue
            print("%d\t%s" % (e.inode(), p))
            if e.is_dir(follow_symlinks=False):
                walk(e.path, p + "/")
walk(root, "")
`

// mountInodes lists the mount twice, by stat (bash and find -printf) and
// by the listing's d_ino (Python's os.scandir), and checks that the two
// agree on every path. It returns the inode of each path.
func mountInodes(t *testing.T, mnt string) map[string]uint64 {
	t.Helper()
	parse := func(what string, out []byte, sep string) map[string]uint64 {
		m := map[string]uint64{}
		for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
			ino, p, ok := strings.Cut(line, sep)
			n, err := strconv.ParseUint(ino, 10, 64)
			if !ok || err != nil {
				t.Fatalf("%s: a line %q", what, line)
			}
			m[p] = n
		}
		return m
	}
	out, err := exec.Command("bash", "-c", `cd "$1" && find . -path ./.epochfs -prune -o -mindepth 1 -printf '%i\t%P\n'`, "bash", mnt).Output()
	if err != nil {
		t.Fatalf("find -printf %%i: %v", err)
	}
	byStat := parse("find", out, "\t")
	out, err = exec.Command("/usr/bin/python3", "-c", scandirInodesPy, mnt).Output()
	if err != nil {
		t.Fatalf("os.scandir: %v", err)
	}
	byList := parse("os.scandir", out, "\t")
	if len(byStat) != len(byList) {
		t.Fatalf("find sees %d entries, os.scandir %d", len(byStat), len(byList))
	}
	for p, ino := range byStat {
		if byList[p] != ino {
			t.Errorf("%s: stat's inode %d, the listing's %d", p, ino, byList[p])
		}
	}
	return byStat
}

// checkOwnInodes fails unless every path has an inode of its own, but for
// the groups of hard links, which share one.
func checkOwnInodes(t *testing.T, inos map[string]uint64, links ...[]string) {
	t.Helper()
	group := map[string]int{}
	for i, g := range links {
		for _, p := range g {
			group[p] = i + 1
		}
	}
	owner := map[uint64]string{}
	for p, ino := range inos {
		q, seen := owner[ino]
		switch {
		case !seen:
			owner[ino] = p
		case group[p] == 0 || group[p] != group[q]:
			t.Errorf("%s and %s share the inode %d", p, q, ino)
		}
	}
	for _, g := range links {
		for _, p := range g[1:] {
			if inos[p] != inos[g[0]] {
				t.Errorf("the hard links %s and %s: inodes %d and %d, want one", g[0], p, inos[g[0]], inos[p])
			}
		}
	}
}

// TestIDsPast32BitsAreInodesOfTheirOwn: the catalog's IDs (the mount's
// inode numbers) start just below 2^32, so that the walk, a refresh, a new
// content and a remount give IDs the entry holds outside its own 32 bits
// (catalog.Entry.ID). Every path keeps an inode of its own (hard links
// share theirs), the listing's d_ino and stat agree, and reads give the
// source's bytes.
func TestIDsPast32BitsAreInodesOfTheirOwn(t *testing.T) {
	requireDebianPython(t)
	src, paths := makeTree(t, 1<<20)
	link := [][]string{{"class2/img003.jpg", "class2/img003-link.jpg"}}
	if err := os.Link(filepath.Join(src, link[0][0]), filepath.Join(src, link[0][1])); err != nil {
		t.Fatal(err)
	}
	paths = append(paths, link[0][1])
	e := newEnv(t, src, 1<<30)
	e.opts.firstID = 1<<32 - 4 // the root is 2^32-3
	e.mount()

	inos := mountInodes(t, e.mnt)
	var below, above int
	for _, ino := range inos {
		if ino < 1<<32 {
			below++
		} else {
			above++
		}
	}
	// 17 entries below the root: two of them take the last 32-bit IDs.
	if below != 2 || above != len(inos)-2 {
		t.Fatalf("%d inodes below 2^32 and %d above, of %d: want the IDs to cross 2^32 after the root's next two", below, above, len(inos))
	}
	checkOwnInodes(t, inos, link...)
	checkAll(t, src, e.mnt, paths)

	// A refresh adds files (two of them hard links) and finds a new content.
	for _, p := range []string{"class3/new1.jpg", "class3/new2.jpg", "a/new.txt"} {
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, p), []byte("added "+p), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	newLink := []string{"class3/new1.jpg", "class3/new1-link.jpg"}
	if err := os.Link(filepath.Join(src, newLink[0]), filepath.Join(src, newLink[1])); err != nil {
		t.Fatal(err)
	}
	paths = append(paths, newLink[1])
	if err := os.WriteFile(filepath.Join(src, "a/small.txt"), []byte("a changed file"), 0o644); err != nil {
		t.Fatal(err)
	}
	refresh(t, e.mnt, "all")
	after := mountInodes(t, e.mnt)
	for _, p := range []string{"class3", "class3/new1.jpg", "class3/new2.jpg", "class3/new1-link.jpg", "a/new.txt"} {
		if ino, ok := after[p]; !ok || ino < 1<<32 {
			t.Errorf("%s after the refresh: inode %d (listed: %v), want one past 2^32", p, ino, ok)
		}
		for q, old := range inos {
			if after[p] == old {
				t.Errorf("the added %s has the inode %d that %s had before the refresh", p, old, q)
			}
		}
	}
	if after["a/small.txt"] == inos["a/small.txt"] {
		t.Errorf("a/small.txt's new content kept the inode %d", inos["a/small.txt"])
	}
	checkOwnInodes(t, after, link[0], newLink)
	checkAll(t, src, e.mnt, paths)

	// A remount numbers the stored catalog from the same start.
	e.unmount()
	e.mount()
	again := mountInodes(t, e.mnt)
	if len(again) != len(after) {
		t.Fatalf("%d entries after the remount, %d before it", len(again), len(after))
	}
	above = 0
	for _, ino := range again {
		if ino >= 1<<32 {
			above++
		}
	}
	if above != len(again)-2 {
		t.Errorf("after the remount %d of %d inodes are past 2^32, want all but two", above, len(again))
	}
	checkOwnInodes(t, again, link[0], newLink)
	checkAll(t, src, e.mnt, paths)
}
