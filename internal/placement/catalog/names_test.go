package catalog

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/source"
)

// namesTree is catalogTree with a hard link and a wide part.
func namesTree(t *testing.T) string {
	t.Helper()
	src := catalogTree(t)
	writeDataset(t, src, wideDataset(20, 5))
	if err := os.Link(filepath.Join(src, "top.txt"), filepath.Join(src, "a/hard")); err != nil {
		t.Fatal(err)
	}
	return src
}

// waitNamed waits for c's files to be numbered by a walk of names.
func waitNamed(t *testing.T, c *Catalog) {
	t.Helper()
	select {
	case <-c.Named():
	case <-time.After(liveness):
		t.Fatal("the files were not numbered after the names")
	}
}

// checkNamesNumbered fails unless the table numbers the files in path
// order, each file's Index its number (the tree may not hold them yet).
func checkNamesNumbered(t *testing.T, c *Catalog) {
	t.Helper()
	var paths []string
	nt := c.Numbered()
	for i, e := range nt.All() {
		if int(e.Index) != i {
			t.Fatalf("file %s numbered %d has Index %d", e.Path(), i, e.Index)
		}
		paths = append(paths, e.Path())
	}
	if !slices.IsSortedFunc(paths, func(a, b string) int { return slices.Compare(splitPath(a), splitPath(b)) }) {
		t.Errorf("files not numbered in path order: %v", paths)
	}
}

// A walk of names first, with readers asking for directories meanwhile,
// builds the tree a blocking walk builds: every attribute, symlink
// target and file number; a hard link shares its file's ID and no other
// ID is given twice; the tree is stored complete.
func TestANamesFirstWalkEqualsAWalk(t *testing.T) {
	src := namesTree(t)
	var want map[string]dumpEntry
	var wantList []string
	func() {
		c := openCat(t, Options{StateDir: t.TempDir(), Source: src, Workers: 4})
		defer c.Close()
		want, wantList = withoutIDs(c), listing(c.Root())
	}()
	for round := 0; round < 5; round++ {
		s := openSource(t, source.Options{Root: src})
		state := t.TempDir()
		c := openCat(t, Options{StateDir: state, Source: src, Workers: 2, Walker: s, Background: true, NamesFirst: true})
		readers(4, func(g int) {
			r := rand.New(rand.NewPCG(uint64(round), uint64(g)))
			for i := 0; i < 40; i++ {
				d := c.Root()
				for d != nil && d.Kind() == KindDir {
					if err := c.List(context.Background(), d); err != nil {
						t.Error(err)
						return
					}
					kids := d.Children()
					if kids.Len() == 0 || r.IntN(4) == 0 {
						break
					}
					d = kids.At(r.IntN(kids.Len()))
					if d.ID() == 0 || d.Kind() == KindFile && d.Attr().Mode == 0 {
						t.Errorf("%s is in the tree without its attributes", d.Path())
					}
				}
			}
		})
		if err := c.WaitWalk(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitNamed(t, c)
		if got := withoutIDs(c); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: the tree differs from a walk's:\n%v\nwant\n%v", round, got, want)
		}
		if got := listing(c.Root()); !slices.Equal(got, wantList) {
			t.Fatalf("round %d: sizes or numbers differ:\n%v\nwant\n%v", round, got, wantList)
		}
		checkNumbering(t, "a walk of names", c)
		if c.Files() != int64(c.Indexed()) || c.AttrsPending() != 0 {
			t.Errorf("files %d, numbered %d, attributes pending %d", c.Files(), c.Indexed(), c.AttrsPending())
		}
		top, hard := c.Find("top.txt"), c.Find("a/hard")
		if top.ID() != hard.ID() {
			t.Errorf("hard links: IDs %d and %d, want one", top.ID(), hard.ID())
		}
		ids := map[uint64]string{}
		c.Root().Walk(func(e *Entry) bool {
			if p, ok := ids[e.ID()]; (ok && e != hard && e != top) || e.ID() == 0 {
				t.Errorf("%s: ID %d zero or also %s's", e.Path(), e.ID(), p)
			}
			ids[e.ID()] = e.Path()
			return true
		})
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		c2 := openCat(t, Options{StateDir: state, Source: src, Walker: s})
		if c2.Walked() {
			t.Error("the walk of names was not stored complete: walked again")
		}
		if got := listing(c2.Root()); !slices.Equal(got, wantList) {
			t.Errorf("the stored tree differs from the walk's")
		}
		c2.Close()
	}
}

// Between the names and the attributes: the files are numbered and no
// name is in the tree without its attributes (a directory asked for is
// filled first). A file removed, a directory removed and a file made a
// directory meanwhile keep their numbers, gone, and are not in the tree,
// nor in the stored catalog.
func TestANamesFirstWalkKeepsTheNumbersOfWhatWentMeanwhile(t *testing.T) {
	src := namesTree(t)
	files := 0
	filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if d.Type().IsRegular() {
			files++
		}
		return nil
	})
	s := openSource(t, source.Options{Root: src})
	state := t.TempDir()
	hold := make(chan struct{})
	c := openCat(t, Options{StateDir: state, Source: src, Workers: 2, Walker: s, Background: true, NamesFirst: true,
		namesHold: hold})
	defer c.Close()
	waitNamed(t, c)
	if c.Indexed() != files {
		t.Fatalf("%d files numbered after the names, the source has %d", c.Indexed(), files)
	}
	checkNamesNumbered(t, c)
	if c.AttrsPending() == 0 || !c.Walking() {
		t.Fatalf("attributes pending %d, walking %v: want some, and walking", c.AttrsPending(), c.Walking())
	}
	number := map[string]int{}
	nt := c.Numbered()
	for i, e := range nt.All() {
		number[e.Path()] = i
	}
	// Asked for before its attributes are read: filled first.
	a := c.Root().Lookup("a")
	if err := c.List(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if e := a.Lookup("a.txt"); e == nil || e.Attr().Size != 3 || e.ID() == 0 || e.Index != int32(number["a/a.txt"]) {
		t.Fatalf("a/a.txt after List: %+v", e)
	}
	if a.Lookup("b").Listed() {
		t.Fatal("a/b was filled before the hold ended")
	}
	went := []string{"a/b/sibling", "a/b/c/deep.bin", "hidden/.dotfile"}
	for _, p := range []string{"a/b/sibling", "a/b/c", "hidden/.dotfile"} {
		if err := os.RemoveAll(filepath.Join(src, p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(src, "hidden/.dotfile"), 0o755); err != nil {
		t.Fatal(err)
	}
	close(hold)
	if err := c.WaitWalk(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range went {
		i := number[p]
		if e := c.ByIndex(i); e == nil || e.Path() != p || !e.Gone() || !c.SampleGone(i) {
			t.Errorf("%s (number %d) is not kept gone: %v", p, i, e)
		}
		if c.Find(p) != nil {
			t.Errorf("%s is in the tree", p)
		}
	}
	if c.Find("a/b/c") != nil {
		t.Error("the directory a/b/c, gone before its stat, is in the tree")
	}
	for p, i := range number {
		if slices.Contains(went, p) {
			continue
		}
		e := c.ByIndex(i)
		st, err := os.Stat(filepath.Join(src, p))
		if err != nil || e == nil || e.Gone() || c.Find(p) != e || e.Attr().Size != st.Size() {
			t.Errorf("%s (number %d): %v, source %v %v", p, i, e, st, err)
		}
	}
	if c.Files() != int64(files-len(went)) || c.Indexed() != files || c.AttrsPending() != 0 {
		t.Errorf("files %d (want %d), numbered %d (want %d), pending %d", c.Files(), files-len(went), c.Indexed(), files, c.AttrsPending())
	}
	c.Close()
	c2 := openCat(t, Options{StateDir: state, Source: src, Walker: s})
	defer c2.Close()
	if c2.Walked() || c2.Files() != int64(files-len(went)) {
		t.Errorf("stored: walked again %v, %d files (want %d)", c2.Walked(), c2.Files(), files-len(went))
	}
	for _, p := range went {
		if c2.Find(p) != nil {
			t.Errorf("%s is in the stored catalog", p)
		}
	}
}

// Closing the catalog while a walk of names is held stops it: nothing is
// stored complete, and the next open walks again.
func TestClosingStopsANamesFirstWalk(t *testing.T) {
	src := namesTree(t)
	s := openSource(t, source.Options{Root: src})
	state := t.TempDir()
	c := openCat(t, Options{StateDir: state, Source: src, Workers: 2, Walker: s, Background: true, NamesFirst: true,
		namesHold: make(chan struct{})})
	waitNamed(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitWalk(context.Background()); err == nil {
		t.Error("WaitWalk after a stopped walk: nil, want ErrWalkStopped")
	}
	c2 := openCat(t, Options{StateDir: state, Source: src, Walker: s})
	defer c2.Close()
	if !c2.Walked() {
		t.Error("a walk stopped after its names was stored complete")
	}
	if fmt.Sprint(c2.Files()) != fmt.Sprint(c2.Indexed()) {
		t.Errorf("files %d, numbered %d", c2.Files(), c2.Indexed())
	}
}
