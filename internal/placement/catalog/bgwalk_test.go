package catalog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/epochfs/epochfs/internal/source"
	"github.com/epochfs/epochfs/internal/status"
)

// wideDataset is dirs directories of files files each, two levels deep.
func wideDataset(dirs, files int) dataset {
	d := dataset{}
	for i := 0; i < dirs; i++ {
		for j := 0; j < files; j++ {
			p := fmt.Sprintf("a%02d/b%02d/f%02d", i%7, i, j)
			d[p] = content(p, 10+j)
		}
	}
	return d
}

// checkIDs fails unless every entry of c has an ID of its own.
func checkIDs(t *testing.T, c *Catalog) {
	t.Helper()
	ids := map[uint64]bool{}
	c.Root().Walk(func(e *Entry) bool {
		if e.ID() == 0 || ids[e.ID()] {
			t.Errorf("%s: ID %d zero or given twice", e.Path(), e.ID())
		}
		ids[e.ID()] = true
		return true
	})
}

// readers runs fn(0) … fn(n-1) at once and waits for them.
func readers(n int, fn func(g int)) {
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(g)
		}()
	}
	wg.Wait()
}

func listing(root *Entry) []string {
	var out []string
	root.Walk(func(e *Entry) bool {
		out = append(out, fmt.Sprintf("%s %d %d %d", e.Path(), e.Kind(), e.Attr().Size, e.Index))
		return true
	})
	return out
}

// A background walk and readers asking for directories it has not reached
// build the same tree as a blocking walk, each directory read once, every
// ID unique; the tree is stored complete.
func TestBackgroundWalkWithDemandEqualsAWalk(t *testing.T) {
	d := wideDataset(40, 5)
	src := t.TempDir()
	writeDataset(t, src, d)
	want := func() []string {
		c, err := Open(context.Background(), Options{StateDir: t.TempDir(), Source: src, Workers: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return listing(c.Root())
	}()
	for round := 0; round < 5; round++ {
		s := openSource(t, source.Options{Root: src})
		state := t.TempDir()
		c, err := Open(context.Background(), Options{StateDir: state, Source: src, Workers: 2, Walker: s, Background: true})
		if err != nil {
			t.Fatal(err)
		}
		// Readers list directories in random orders while the walk runs.
		readers(4, func(g int) {
			r := rand.New(rand.NewPCG(uint64(round), uint64(g)))
			for i := 0; i < 60; i++ {
				a := c.Root().Lookup(fmt.Sprintf("a%02d", r.IntN(7)))
				if a == nil {
					t.Error("a top directory is missing: the root is read before Open returns")
					return
				}
				if err := c.List(context.Background(), a); err != nil {
					t.Error(err)
					return
				}
				for b := range a.Children().All() {
					if r.IntN(3) == 0 {
						if err := c.List(context.Background(), b); err != nil {
							t.Error(err)
						}
					}
				}
			}
		})
		if err := c.WaitWalk(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c.Walking() {
			t.Fatal("still walking after WalkDone")
		}
		if got := listing(c.Root()); !slices.Equal(got, want) {
			t.Fatalf("round %d: the background walk's tree differs:\n%v\nwant\n%v", round, got, want)
		}
		checkIDs(t, c)
		if c.Files() != int64(len(d)) {
			t.Errorf("%d files counted, want %d", c.Files(), len(d))
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		// Stored complete: the next open loads it.
		c2, err := Open(context.Background(), Options{StateDir: state, Source: src, Walker: s, Background: true})
		if err != nil {
			t.Fatal(err)
		}
		if c2.Walked() {
			t.Error("the stored background walk was not complete: walked again")
		}
		if err := c2.WaitWalk(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := listing(c2.Root()); !slices.Equal(got, want) {
			t.Errorf("the stored tree differs from the walk's")
		}
		c2.Close()
	}
}

// withoutIDs is dump(c) with the IDs left out: a background load gives
// them in the order directories are read.
func withoutIDs(c *Catalog) map[string]dumpEntry {
	d := dump(c)
	for p, e := range d {
		e.ID = 0
		d[p] = e
	}
	return d
}

// A background load, with readers asking for directories it has not
// reached, builds the tree a blocking load builds: every attribute, tier,
// symlink target and file index, each ID unique; keys that sort between a
// directory and its entries ("a-x" between "a" and "a/...") are read as
// the directory's siblings.
func TestBackgroundLoadWithDemandEqualsALoad(t *testing.T) {
	src := catalogTree(t)
	writeDataset(t, src, wideDataset(30, 4))
	state := t.TempDir()
	c := openCat(t, Options{StateDir: state, Source: src, Tiers: []string{"mem", "nvme"}})
	n := 0
	c.Root().Files(func(e *Entry) bool {
		if n++; n%3 == 0 {
			e.SetTier(n % 2)
			if err := c.Persist(e); err != nil {
				t.Fatal(err)
			}
		}
		return true
	})
	c.Close()
	c = openCat(t, Options{StateDir: state, Source: src, Tiers: []string{"mem", "nvme"}})
	want, wantFiles, wantBytes := withoutIDs(c), c.Files(), c.Bytes()
	c.Close()
	var dirs []string
	for p, e := range want {
		if e.Kind == KindDir {
			dirs = append(dirs, p)
		}
	}
	slices.Sort(dirs)
	for round := 0; round < 5; round++ {
		c, err := Open(context.Background(), Options{StateDir: state, Source: src, Tiers: []string{"mem", "nvme"},
			Workers: 2, Background: true})
		if err != nil {
			t.Fatal(err)
		}
		if c.Walked() {
			t.Fatal("a complete catalog was walked again")
		}
		readers(4, func(g int) {
			r := rand.New(rand.NewPCG(uint64(round), uint64(g)))
			for i := 0; i < 40; i++ {
				// Down from the root, as a lookup through the mount goes.
				d := c.Root()
				for _, name := range splitPath(dirs[r.IntN(len(dirs))]) {
					if err := c.List(context.Background(), d); err != nil {
						t.Error(err)
						return
					}
					if d = d.Lookup(name); d == nil {
						t.Errorf("round %d: %s missing while loading", round, name)
						return
					}
				}
				if err := c.List(context.Background(), d); err != nil {
					t.Error(err)
				}
			}
		})
		if err := c.WaitWalk(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c.Walking() || c.Loading() || c.LoadFailed() != nil {
			t.Fatal("still loading, or failed, after WalkDone")
		}
		if got := withoutIDs(c); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: the background load's tree differs from a load's", round)
		}
		if c.Files() != wantFiles || c.Bytes() != wantBytes {
			t.Errorf("%d files of %d bytes counted, want %d of %d", c.Files(), c.Bytes(), wantFiles, wantBytes)
		}
		checkIDs(t, c)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func splitPath(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// putRecord stores rec under path p, as a crash or an older daemon could
// have left it.
func putRecord(t *testing.T, c *Catalog, p string, value []byte) {
	t.Helper()
	if err := c.db.Update(func(txn *badger.Txn) error { return txn.Set(fileKey(p), value) }); err != nil {
		t.Fatal(err)
	}
}

// A background load drops, as a load does, the records whose directory
// the catalog does not have (below a file, below a missing directory,
// deep below one), reports the copies they name as stale, and loads the
// rest.
func TestBackgroundLoadDropsOrphans(t *testing.T) {
	src := catalogTree(t)
	state := t.TempDir()
	c := openCat(t, Options{StateDir: state, Source: src, Tiers: []string{"mem"}})
	rec := c.recordOf(c.Find("top.txt"))
	rec.Tier = "mem"
	orphans := []string{"top.txt/x", "a/gone/y", "a/gone/deeper/z", "nothere/w"}
	for _, p := range orphans {
		putRecord(t, c, p, rec.encode(nil))
	}
	c.Close()
	log, logs := observed()
	c, err := Open(context.Background(), Options{StateDir: state, Source: src, Tiers: []string{"mem"}, Background: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitWalk(context.Background()); err != nil {
		t.Fatal(err)
	}
	var staleGot []string
	for _, s := range c.Stale() {
		if s.Tier != "mem" || s.Size != rec.Size {
			t.Errorf("stale copy %+v", s)
		}
		staleGot = append(staleGot, s.Path)
	}
	slices.Sort(staleGot)
	slices.Sort(orphans)
	if !slices.Equal(staleGot, orphans) {
		t.Errorf("stale copies %v, want %v", staleGot, orphans)
	}
	for _, p := range orphans {
		if _, ok := stored(t, c, p); ok {
			t.Errorf("the orphan %s is still stored", p)
		}
		if c.Find(p) != nil {
			t.Errorf("the orphan %s was loaded", p)
		}
	}
	if c.Find("top.txt") == nil || c.Find("a/b/c/deep.bin") == nil || c.Find("a-x/one") == nil {
		t.Error("an entry that is no orphan was not loaded")
	}
	if n := len(warnings(logs, "catalog: dropping records whose directory the catalog does not have")); n != 1 {
		t.Errorf("%d warnings about the orphans, want 1", n)
	}
}

// A record that does not decode stops a background load: the mount's
// Open still returns (the root's entries are good), the directories not
// read fail with ErrBadRecord, status says catalog=failed, and nothing is
// dropped. A bad record among the root's entries fails Open, as a blocking
// load does.
func TestBackgroundLoadStopsAtADamagedRecord(t *testing.T) {
	src := catalogTree(t)
	state := t.TempDir()
	c := openCat(t, Options{StateDir: state, Source: src})
	putRecord(t, c, "a/b/c/bad", []byte{0xff, 1, 2})
	c.Close()
	c, err := Open(context.Background(), Options{StateDir: state, Source: src, Background: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitWalk(context.Background()); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("WaitWalk: %v, want ErrBadRecord", err)
	}
	if !errors.Is(c.LoadFailed(), ErrBadRecord) {
		t.Fatalf("LoadFailed: %v", c.LoadFailed())
	}
	d := c.Root().Lookup("a").Lookup("b").Lookup("c")
	if d == nil {
		t.Fatal("a/b/c not read (its parent was)")
	}
	if err := c.List(context.Background(), d); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("List(a/b/c): %v, want ErrBadRecord", err)
	}
	doc := status.New()
	c.Status(doc, true)
	if got := doc.Value("catalog"); got != "failed" {
		t.Errorf("catalog=%s, want failed", got)
	}
	if _, ok := stored(t, c, "a/b/c/deep.bin"); !ok {
		t.Error("a record was dropped by the failed load")
	}
	c.Close()

	state = t.TempDir()
	c = openCat(t, Options{StateDir: state, Source: src})
	putRecord(t, c, "bad", []byte{0xff, 1, 2})
	c.Close()
	if c, err := Open(context.Background(), Options{StateDir: state, Source: src, Background: true}); !errors.Is(err, ErrBadRecord) {
		if err == nil {
			c.Close()
		}
		t.Fatalf("Open with a bad record at the top: %v, want ErrBadRecord", err)
	}
}

// Closing a catalog whose background load runs stops it: WaitWalk fails
// with ErrWalkStopped, the load is not reported failed, and the next
// open loads the whole catalog.
func TestClosingStopsABackgroundLoad(t *testing.T) {
	src := t.TempDir()
	writeDataset(t, src, wideDataset(60, 20))
	state := t.TempDir()
	c := openCat(t, Options{StateDir: state, Source: src})
	want := withoutIDs(c)
	c.Close()
	stopped := 0
	for range 10 {
		c, err := Open(context.Background(), Options{StateDir: state, Source: src, Background: true, Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		err = c.WaitWalk(context.Background())
		if err != nil && !errors.Is(err, ErrWalkStopped) {
			t.Fatalf("WaitWalk after Close: %v", err)
		}
		if err != nil {
			stopped++
		}
		if c.LoadFailed() != nil {
			t.Fatalf("a stopped load is reported failed: %v", c.LoadFailed())
		}
	}
	if stopped == 0 {
		t.Log("every load ended before Close: the stop was not exercised")
	}
	c, err := Open(context.Background(), Options{StateDir: state, Source: src, Background: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitWalk(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := withoutIDs(c); !reflect.DeepEqual(got, want) {
		t.Fatal("the catalog loaded after stopped loads differs")
	}
}
