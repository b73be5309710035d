package catalog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// catalogTree is a source tree with nested directories, an empty file, a
// symlink, a non-ASCII name, a fifo (skipped by the walk) and files with
// distinct modes, owners and mtimes.
func catalogTree(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	files := map[string]int{
		"empty":              0,
		"top.txt":            5,
		"a/b/c/deep.bin":     1000,
		"a/b/sibling":        12,
		"a/a.txt":            3,
		"a-x/one":            1, // sorts between "a" and "a/..." in key order
		"ñandú/ça va/日本.dat": 77,
		"z/zz/zzz":           4096,
		"hidden/.dotfile":    9,
	}
	for p, n := range files {
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, content(p, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(src, "really-empty"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a/b/c/deep.bin", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../nowhere", filepath.Join(src, "a/dangling")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "a/b/fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "top.txt"), 0o640); err != nil {
		t.Fatal(err)
	}
	mt := time.Date(2021, 3, 4, 5, 6, 7, 123456789, time.UTC)
	if err := os.Chtimes(filepath.Join(src, "a/b/sibling"), mt, mt); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Lchown(filepath.Join(src, "a/a.txt"), 1234, 5678); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(filepath.Join(src, "link"), 4321, 8765); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

func openCat(t *testing.T, o Options) *Catalog {
	t.Helper()
	if o.Workers == 0 {
		o.Workers = 3
	}
	c, err := Open(context.Background(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return c
}

// openWalked is openCat once the catalog is whole (its walk or its
// load done, in the foreground or the background).
func openWalked(t *testing.T, o Options) *Catalog {
	t.Helper()
	c := openCat(t, o)
	if err := c.WaitWalk(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

// expectedEntries lstats the source the slow way: path → (kind, attr, target).
type expEntry struct {
	Kind   Kind
	Attr   Attr
	Target string
}

func expectedEntries(t *testing.T, src string) map[string]expEntry {
	t.Helper()
	out := map[string]expEntry{}
	err := filepath.WalkDir(src, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, full)
		if rel == "." {
			rel = ""
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(full, &st); err != nil {
			return err
		}
		var k Kind
		var target string
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			k = KindFile
		case syscall.S_IFDIR:
			k = KindDir
		case syscall.S_IFLNK:
			k = KindSymlink
			target, _ = os.Readlink(full)
		default:
			return nil // fifo: not in the catalog
		}
		out[rel] = expEntry{Kind: k, Target: target, Attr: Attr{
			Size: st.Size, Mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec,
			Mode: st.Mode, UID: st.Uid, GID: st.Gid,
			Nlink: uint32(st.Nlink), Blocks: st.Blocks, Atime: st.Atim.Nano(), Ctime: st.Ctim.Nano(),
		}}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dumpEntry is everything a catalog holds about an entry.
type dumpEntry struct {
	ID     uint64
	Kind   Kind
	Attr   Attr
	Target string
	Tier   int
	Kids   []string
}

func dump(c *Catalog) map[string]dumpEntry {
	out := map[string]dumpEntry{}
	var visit func(e *Entry)
	visit = func(e *Entry) {
		d := dumpEntry{ID: e.ID(), Kind: e.Kind(), Attr: e.Attr(), Target: e.Target(), Tier: e.Tier()}
		d.Attr.Atime = 0 // a walk's readdir moves a directory's atime
		for ch := range e.Children().All() {
			d.Kids = append(d.Kids, ch.Name())
			visit(ch)
		}
		out[e.Path()] = d
	}
	visit(c.Root())
	return out
}

func TestCatalogWalkRecordsEveryEntryWithItsAttributes(t *testing.T) {
	src := catalogTree(t)
	want := expectedEntries(t, src)
	c := openCat(t, Options{StateDir: fastDir(t), Source: src, Tiers: []string{"mem"}})
	defer c.Close()
	if !c.Walked() {
		t.Error("a fresh catalog did not walk the source")
	}
	got := dump(c)
	if len(got) != len(want) {
		t.Errorf("catalog has %d entries, the source %d (fifo excluded)", len(got), len(want))
	}
	var files, bytes int64
	for p, w := range want {
		g, ok := got[p]
		if !ok {
			t.Errorf("%q missing from the catalog", p)
			continue
		}
		if g.Kind != w.Kind || g.Target != w.Target || !g.Attr.Same(w.Attr) { // a walk's readdir moves a directory's atime
			t.Errorf("%q: catalog kind=%d target=%q attr=%+v; source kind=%d target=%q attr=%+v",
				p, g.Kind, g.Target, g.Attr, w.Kind, w.Target, w.Attr)
		}
		if g.Tier != -1 {
			t.Errorf("%q: fresh entry in tier %d", p, g.Tier)
		}
		if w.Kind == KindFile {
			files++
			bytes += w.Attr.Size
		}
	}
	if _, ok := got["a/b/fifo"]; ok {
		t.Error("the fifo is in the catalog")
	}
	if c.Files() != files || c.Bytes() != bytes {
		t.Errorf("Files()=%d Bytes()=%d, want %d %d", c.Files(), c.Bytes(), files, bytes)
	}
	if e := c.Find("link"); e == nil || e.Kind() != KindSymlink || e.Target() != "a/b/c/deep.bin" {
		t.Errorf("link: %+v", e)
	}
	if e := c.Find("a/b/sibling"); e == nil || e.Attr().Mtime != time.Date(2021, 3, 4, 5, 6, 7, 123456789, time.UTC).UnixNano() {
		t.Errorf("a/b/sibling mtime not kept to the nanosecond: %+v", e)
	}
	if e := c.Find("top.txt"); e == nil || e.Attr().Mode != syscall.S_IFREG|0o640 {
		t.Errorf("top.txt mode: %+v", e)
	}
	if os.Geteuid() == 0 {
		if a := c.Find("a/a.txt").Attr(); a.UID != 1234 || a.GID != 5678 {
			t.Errorf("a/a.txt owner %d:%d, want 1234:5678", a.UID, a.GID)
		}
		if a := c.Find("link").Attr(); a.UID != 4321 || a.GID != 8765 {
			t.Errorf("link owner %d:%d, want the symlink's own 4321:8765", a.UID, a.GID)
		}
	}
	if e := c.Find("really-empty"); e == nil || e.Kind() != KindDir || e.Children().Len() != 0 {
		t.Errorf("really-empty: %+v", e)
	}
}

func TestCatalogLookupFindChildrenSorted(t *testing.T) {
	src := catalogTree(t)
	c := openCat(t, Options{StateDir: fastDir(t), Source: src})
	defer c.Close()
	checkTreeSorted(t, c)
	for _, p := range []string{"a/b/c/deep.bin", "/a/b/c/deep.bin", "a//b/./c/deep.bin", "a/b/../b/c/deep.bin/"} {
		if e := c.Find(p); e == nil || e.Path() != "a/b/c/deep.bin" {
			t.Errorf("Find(%q) = %v", p, e)
		}
	}
	if e := c.Find("ñandú/ça va/日本.dat"); e == nil || e.Kind() != KindFile || e.Name() != "日本.dat" {
		t.Errorf("non-ASCII Find: %+v", e)
	}
	for _, p := range []string{"nope", "a/b/nope", "top.txt/x", "a/b/fifo", "../etc/passwd"} {
		if e := c.Find(p); e != nil {
			t.Errorf("Find(%q) = %q, want nil", p, e.Path())
		}
	}
	if e := c.Find(""); e != c.Root() || e.ID() != 1 || e.Kind() != KindDir {
		t.Errorf("Find(\"\") is not the root with ID 1: %+v", e)
	}
	a := c.Find("a")
	if a.Lookup("b") != c.Find("a/b") || a.Lookup("zz") != nil || a.Lookup("") != nil {
		t.Error("Lookup disagrees with Find")
	}
	// IDs are unique.
	seen := map[uint64]string{}
	for p, d := range dump(c) {
		if o, ok := seen[d.ID]; ok {
			t.Errorf("ID %d shared by %q and %q", d.ID, o, p)
		}
		seen[d.ID] = p
	}
}

func checkTreeSorted(t *testing.T, c *Catalog) {
	t.Helper()
	var visit func(e *Entry)
	visit = func(e *Entry) {
		kids := e.Children().Slice()
		names := make([]string, len(kids))
		for i, k := range kids {
			names[i] = k.Name()
			if e.Lookup(k.Name()) != k {
				t.Errorf("Lookup(%q) in %q does not find the child", k.Name(), e.Path())
			}
			if c.Find(k.Path()) != k {
				t.Errorf("Find(%q) does not find the entry", k.Path())
			}
			visit(k)
		}
		if !sort.StringsAreSorted(names) {
			t.Errorf("children of %q not sorted: %q", e.Path(), names)
		}
	}
	visit(c.Root())
}

func TestCatalogReopenLoadsWithoutWalking(t *testing.T) {
	src := catalogTree(t)
	state := fastDir(t)
	c := openCat(t, Options{StateDir: state, Source: src, Tiers: []string{"mem", "nvme"}})
	// Record residency the way the placer does.
	deep := c.Find("a/b/c/deep.bin")
	deep.SetTier(1)
	if err := c.Persist(deep); err != nil {
		t.Fatal(err)
	}
	before := dump(c)
	files, bytes := c.Files(), c.Bytes()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// Move the source away: a load must not need it.
	moved := src + ".away"
	if err := os.Rename(src, moved); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(moved, src)
	c = openCat(t, Options{StateDir: state, Source: src, Tiers: []string{"mem", "nvme"}})
	defer c.Close()
	if c.Walked() {
		t.Error("reopen walked the source")
	}
	after := dump(c)
	if !reflect.DeepEqual(before, after) {
		for p, b := range before {
			if a := after[p]; !reflect.DeepEqual(a, b) {
				t.Errorf("%q: before %+v, after %+v", p, b, a)
			}
		}
		t.Fatalf("reloaded tree differs (%d vs %d entries)", len(before), len(after))
	}
	if c.Files() != files || c.Bytes() != bytes {
		t.Errorf("Files/Bytes %d/%d after reload, %d/%d before", c.Files(), c.Bytes(), files, bytes)
	}
	checkTreeSorted(t, c)
	if c.Find("a/b/c/deep.bin").Tier() != 1 || c.TierName(1) != "nvme" || c.TierName(-1) != "source" {
		t.Error("residency not reloaded")
	}
}

func TestCatalogForgetsCopiesInTiersItNoLongerHas(t *testing.T) {
	src := catalogTree(t)
	state := fastDir(t)
	c := openCat(t, Options{StateDir: state, Source: src, Tiers: []string{"mem", "nvme"}})
	e := c.Find("top.txt")
	e.SetTier(1)
	if err := c.Persist(e); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c = openCat(t, Options{StateDir: state, Source: src, Tiers: []string{"mem"}})
	defer c.Close()
	if got := c.Find("top.txt").Tier(); got != -1 {
		t.Errorf("copy in a tier no longer configured kept as tier %d", got)
	}
}

func TestCatalogOfAnotherSourceIsRefused(t *testing.T) {
	src := catalogTree(t)
	state := fastDir(t)
	c := openCat(t, Options{StateDir: state, Source: src})
	c.Close()
	other := t.TempDir()
	for _, rescan := range []bool{false, true} {
		c2, err := Open(context.Background(), Options{StateDir: state, Source: other, Rescan: rescan})
		if !errors.Is(err, ErrOtherSource) {
			if c2 != nil {
				c2.Close()
			}
			t.Fatalf("rescan=%v: open with another source: %v, want ErrOtherSource", rescan, err)
		}
	}
	// The state directory is still usable for its own source.
	c = openCat(t, Options{StateDir: state, Source: src})
	if c.Walked() {
		t.Error("refused open spoiled the catalog: reopen walked")
	}
	c.Close()
}

func TestCatalogRescanCarriesOverUnchangedResidency(t *testing.T) {
	src := catalogTree(t)
	state := fastDir(t)
	tiers := []string{"mem", "nvme"}
	c := openCat(t, Options{StateDir: state, Source: src, Tiers: tiers})
	resident := map[string]int{
		"top.txt":            0, // unchanged
		"a/b/c/deep.bin":     1, // unchanged
		"a/a.txt":            0, // size changes
		"z/zz/zzz":           1, // mtime changes, same size
		"a/b/sibling":        0, // deleted
		"ñandú/ça va/日本.dat": 1, // replaced by a directory
	}
	oldSize := map[string]int64{}
	for p, ti := range resident {
		e := c.Find(p)
		e.SetTier(ti)
		if err := c.Persist(e); err != nil {
			t.Fatal(err)
		}
		oldSize[p] = e.Attr().Size
	}
	c.Close()

	if err := os.WriteFile(filepath.Join(src, "a/a.txt"), []byte("longer now"), 0o644); err != nil {
		t.Fatal(err)
	}
	zzz := filepath.Join(src, "z/zz/zzz")
	st, _ := os.Stat(zzz)
	later := st.ModTime().Add(3 * time.Second)
	if err := os.Chtimes(zzz, later, later); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(src, "a/b/sibling")); err != nil {
		t.Fatal(err)
	}
	jp := filepath.Join(src, "ñandú/ça va/日本.dat")
	if err := os.Remove(jp); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(jp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "new-file"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Without Rescan the old catalog is served as is.
	c = openCat(t, Options{StateDir: state, Source: src, Tiers: tiers})
	if c.Walked() || c.Find("new-file") != nil || c.Find("a/b/sibling") == nil {
		t.Error("open without Rescan did not serve the stored catalog")
	}
	c.Close()

	c = openCat(t, Options{StateDir: state, Source: src, Tiers: tiers, Rescan: true})
	if !c.Walked() {
		t.Error("Rescan did not walk")
	}
	if got := c.Find("top.txt").Tier(); got != 0 {
		t.Errorf("unchanged top.txt: tier %d, want 0", got)
	}
	if got := c.Find("a/b/c/deep.bin").Tier(); got != 1 {
		t.Errorf("unchanged deep.bin: tier %d, want 1", got)
	}
	for _, p := range []string{"a/a.txt", "z/zz/zzz"} {
		if got := c.Find(p).Tier(); got != -1 {
			t.Errorf("changed %s kept residency in tier %d", p, got)
		}
	}
	if c.Find("a/b/sibling") != nil {
		t.Error("deleted file still in the catalog")
	}
	if e := c.Find("ñandú/ça va/日本.dat"); e == nil || e.Kind() != KindDir {
		t.Error("file replaced by a directory not rescanned")
	}
	if c.Find("new-file") == nil {
		t.Error("new file not found by the rescan")
	}
	want := []StaleCopy{
		{Tier: "mem", Path: "a/a.txt", Size: oldSize["a/a.txt"]},
		{Tier: "mem", Path: "a/b/sibling", Size: oldSize["a/b/sibling"]},
		{Tier: "nvme", Path: "z/zz/zzz", Size: oldSize["z/zz/zzz"]},
		{Tier: "nvme", Path: "ñandú/ça va/日本.dat", Size: oldSize["ñandú/ça va/日本.dat"]},
	}
	got := append([]StaleCopy(nil), c.Stale()...)
	sort.Slice(got, func(i, j int) bool { return got[i].Path < got[j].Path })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Stale() = %+v\nwant %+v", got, want)
	}
	after := dump(c)
	c.Close()

	// The carried-over residency is persisted; a plain reopen loads it.
	c = openCat(t, Options{StateDir: state, Source: src, Tiers: tiers})
	defer c.Close()
	if c.Walked() {
		t.Error("reopen after rescan walked")
	}
	if len(c.Stale()) != 0 {
		t.Errorf("stale copies reported again without a rescan: %v", c.Stale())
	}
	if !reflect.DeepEqual(dump(c), after) {
		t.Error("tree after reopen differs from the rescanned tree")
	}
}

func TestCatalogInterruptedRescanKeepsEveryRecordedCopy(t *testing.T) {
	src := catalogTree(t)
	state := fastDir(t)
	tiers := []string{"mem", "nvme"}
	c := openCat(t, Options{StateDir: state, Source: src, Tiers: tiers})
	for p, ti := range map[string]int{"top.txt": 0, "a/b/c/deep.bin": 1} {
		e := c.Find(p)
		e.SetTier(ti)
		if err := c.Persist(e); err != nil {
			t.Fatal(err)
		}
	}
	full := dump(c)
	// A rescan that died half way: its marker is set and the records are a
	// mix that no longer forms a tree (a directory's record is gone, a
	// path that is not in the source is still there).
	err := c.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(keyRescan, []byte("1")); err != nil {
			return err
		}
		if err := txn.Set(fileKey("gone/file"), c.recordOf(c.Find("top.txt")).encode(nil)); err != nil {
			return err
		}
		return txn.Delete(fileKey("a/b"))
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	c = openCat(t, Options{StateDir: state, Source: src, Tiers: tiers})
	if !c.Walked() {
		t.Error("catalog of an interrupted rescan was loaded instead of walked")
	}
	if got := c.Find("top.txt").Tier(); got != 0 {
		t.Errorf("top.txt: tier %d, want 0", got)
	}
	if got := c.Find("a/b/c/deep.bin").Tier(); got != 1 {
		t.Errorf("a/b/c/deep.bin: tier %d, want 1 (its record outlived its directory's)", got)
	}
	want := []StaleCopy{{Tier: "mem", Path: "gone/file", Size: c.Find("top.txt").Attr().Size}}
	if !reflect.DeepEqual(c.Stale(), want) {
		t.Errorf("Stale() = %+v, want %+v", c.Stale(), want)
	}
	c.Close()

	c = openCat(t, Options{StateDir: state, Source: src, Tiers: tiers})
	defer c.Close()
	if c.Walked() {
		t.Error("the finished rescan did not clear its marker")
	}
	if !reflect.DeepEqual(dump(c), full) {
		t.Error("tree after the redone rescan differs from the original")
	}
	if c.Find("gone/file") != nil {
		t.Error("record of a path the source does not have survived the rescan")
	}
}

func TestCatalogInterruptedWalkIsRedone(t *testing.T) {
	src := catalogTree(t)
	want := expectedEntries(t, src)

	t.Run("cancelled walk", func(t *testing.T) {
		state := fastDir(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		c, err := Open(ctx, Options{StateDir: state, Source: src})
		if err == nil {
			c.Close()
			t.Fatal("a walk with a cancelled context succeeded")
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v does not match context.Canceled", err)
		}
		c = openCat(t, Options{StateDir: state, Source: src})
		defer c.Close()
		if !c.Walked() {
			t.Error("catalog of a cancelled walk was loaded instead of walked")
		}
		if got := len(dump(c)); got != len(want) {
			t.Errorf("%d entries after the redone walk, want %d", got, len(want))
		}
	})

	t.Run("no complete marker", func(t *testing.T) {
		state := fastDir(t)
		c := openCat(t, Options{StateDir: state, Source: src})
		full := dump(c)
		// Simulate a crash after the records but before the marker: drop
		// the marker and a record.
		err := c.db.Update(func(txn *badger.Txn) error {
			if err := txn.Delete(keyComplete); err != nil {
				return err
			}
			return txn.Delete(fileKey("top.txt"))
		})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		c = openCat(t, Options{StateDir: state, Source: src})
		if !c.Walked() {
			t.Error("catalog without the complete marker was loaded instead of walked")
		}
		if !reflect.DeepEqual(dump(c), full) {
			t.Error("redone walk gives another tree")
		}
		c.Close()
		c = openCat(t, Options{StateDir: state, Source: src})
		defer c.Close()
		if c.Walked() {
			t.Error("the redone walk did not write its complete marker")
		}
	})
}

// (A record without its directory is dropped, not refused:
// TestARemovedEntryIsNeverWrittenAgain.)
func TestCatalogRejectsCorruptRecords(t *testing.T) {
	src := catalogTree(t)
	for name, mut := range map[string]func(txn *badger.Txn) error{
		"bad record": func(txn *badger.Txn) error { return txn.Set(fileKey("top.txt"), []byte{9, 9}) },
		"file root":  func(txn *badger.Txn) error { return txn.Set(fileKey(""), (&record{Kind: KindFile}).encode(nil)) },
	} {
		t.Run(name, func(t *testing.T) {
			state := fastDir(t)
			c := openCat(t, Options{StateDir: state, Source: src})
			if err := c.db.Update(mut); err != nil {
				t.Fatal(err)
			}
			c.Close()
			c2, err := Open(context.Background(), Options{StateDir: state, Source: src})
			if err == nil {
				c2.Close()
				t.Fatal("corrupt catalog loaded")
			}
			if !errors.Is(err, ErrBadRecord) {
				t.Errorf("error %v does not match ErrBadRecord", err)
			}
		})
	}
}

func TestCatalogWalkProgressAndNotADirectory(t *testing.T) {
	src := catalogTree(t)
	var last int64
	var calls int
	c := openCat(t, Options{StateDir: fastDir(t), Source: src, Workers: 1,
		Progress: func(n int64) { calls++; last = n }})
	total := int64(len(dump(c)) - 1) // the root is not counted
	c.Close()
	if calls == 0 || last != total {
		t.Errorf("progress: %d calls, last %d, want %d entries", calls, last, total)
	}
	_, err := Open(context.Background(), Options{StateDir: fastDir(t), Source: filepath.Join(src, "top.txt")})
	if err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("source that is a file: %v", err)
	}
	_, err = Open(context.Background(), Options{StateDir: fastDir(t), Source: filepath.Join(src, "missing")})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing source: %v", err)
	}
}

// A walk of a wide tree with many workers sees every entry (the race
// detector checks the parallel walk).
func TestCatalogParallelWalkOfAWideTree(t *testing.T) {
	src := t.TempDir()
	n := 0
	for i := 0; i < 30; i++ {
		for j := 0; j < 10; j++ {
			p := filepath.Join(src, fmt.Sprintf("d%02d/e%d", i, j%3), fmt.Sprintf("f%02d", j))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte{byte(j)}, 0o644); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	c := openCat(t, Options{StateDir: fastDir(t), Source: src, Workers: 16})
	defer c.Close()
	if c.Files() != int64(n) || c.Bytes() != int64(n) {
		t.Errorf("Files=%d Bytes=%d, want %d", c.Files(), c.Bytes(), n)
	}
	checkTreeSorted(t, c)
	want := expectedEntries(t, src)
	got := dump(c)
	for p, w := range want {
		if g, ok := got[p]; !ok || !g.Attr.Same(w.Attr) {
			t.Errorf("%q: %+v, want %+v", p, g.Attr, w.Attr)
		}
	}
}

// TestSnapshotReadsAttributesAndVersionAsOne: a reader never gets one
// content's attributes with another content's version, while contents
// change as fast as they can (the k-th content has size k).
func TestSnapshotReadsAttributesAndVersionAsOne(t *testing.T) {
	e := newOfKind(KindFile)
	e.initAttr(Attr{})
	const n = 20000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for k := 1; k <= n; k++ {
			e.SetContent(Attr{Size: int64(k), Mode: 0o644})
			if k%3 == 0 {
				e.SetAttr(Attr{Size: int64(k), Mode: 0o600}) // the same content
			}
		}
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		a, v := e.Snapshot()
		if a.Size != int64(v) {
			t.Fatalf("a snapshot of version %d has content %d's attributes", v, a.Size)
		}
	}
	if a, v := e.Snapshot(); v != n || a.Size != n || e.Version() != n {
		t.Fatalf("after %d contents: version %d, size %d", n, v, a.Size)
	}
}

// TestARemovedEntryIsNeverWrittenAgain: an update of an entry after its
// removal (a copy that finished late) does not bring its record back; a
// record left without its directory by an older daemon is dropped at
// load, with a warning, instead of failing the mount ("has no parent").
func TestARemovedEntryIsNeverWrittenAgain(t *testing.T) {
	src := catalogTree(t)
	state := t.TempDir()
	log, logs := observed()
	c := openCat(t, Options{StateDir: state, Source: src, Tiers: []string{"mem"}, Logger: log})
	dir := c.Find("a/b")
	file := c.Find("a/b/c/deep.bin")
	if dir == nil || file == nil {
		t.Fatal("a/b or a/b/c/deep.bin not in the catalog")
	}
	if _, ok := c.Remove(dir); !ok {
		t.Fatal("Remove(a/b) did nothing")
	}
	file.SetTier(0)
	if err := c.Persist(file); err != nil { // late: after the removal
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openCat(t, Options{StateDir: state, Source: src, Tiers: []string{"mem"}, Logger: log})
	if c.Find("a/b") != nil || c.Find("a/b/c/deep.bin") != nil {
		t.Fatal("the removed tree came back")
	}
	if _, ok := stored(t, c, "a/b/c/deep.bin"); ok {
		t.Fatal("the removed file's record was written again")
	}
	if n := len(warnings(logs, "catalog: dropping records whose directory the catalog does not have")); n != 0 {
		t.Fatalf("%d orphan warnings: nothing should have been left behind", n)
	}

	// An orphan, as an older daemon could leave one.
	rec := c.recordOf(c.Find("top.txt"))
	rec.Tier = "mem"
	if err := c.db.Update(func(txn *badger.Txn) error {
		return txn.Set(fileKey("a/b/c/orphan"), rec.encode(nil))
	}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c = openCat(t, Options{StateDir: state, Source: src, Tiers: []string{"mem"}, Logger: log})
	defer c.Close()
	if c.Find("a/b/c/orphan") != nil || c.Find("top.txt") == nil {
		t.Fatal("the orphan was loaded, or the rest was not")
	}
	if n := len(warnings(logs, "catalog: dropping records whose directory the catalog does not have")); n != 1 {
		t.Fatalf("%d warnings about the orphan, want 1", n)
	}
	if _, ok := stored(t, c, "a/b/c/orphan"); ok {
		t.Fatal("the orphan's record is still stored")
	}
	if st := c.Stale(); len(st) != 1 || st[0].Path != "a/b/c/orphan" || st[0].Tier != "mem" {
		t.Fatalf("stale copies %+v: want the orphan's, for the placer to remove", st)
	}
}

// A daemon killed right after badger created a log file, before it wrote
// the file's header, leaves an empty *.mem (or *.vlog): the next open
// removes it and loads the catalog, instead of failing with badger's
// "Create a new file" (dgraph-io/badger#2207).
func TestACatalogOpensAfterACrashLeftAnEmptyLog(t *testing.T) {
	src := catalogTree(t)
	state := fastDir(t)
	c := openCat(t, Options{StateDir: state, Source: src, Tiers: []string{"mem"}})
	before := dump(c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"00075.mem", "00009.vlog"} {
		if err := os.WriteFile(filepath.Join(state, "catalog", name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c = openCat(t, Options{StateDir: state, Source: src, Tiers: []string{"mem"}})
	defer c.Close()
	if c.Walked() {
		t.Error("the catalog was walked again instead of loaded")
	}
	if after := dump(c); !reflect.DeepEqual(before, after) {
		t.Fatalf("reloaded %d entries, want the %d before", len(after), len(before))
	}
}
