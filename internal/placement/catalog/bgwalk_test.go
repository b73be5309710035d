package catalog

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/epochfs/epochfs/internal/source"
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

func listing(root *Entry) []string {
	var out []string
	root.Walk(func(e *Entry) bool {
		out = append(out, fmt.Sprintf("%s %d %d %d", e.Path, e.Kind, e.Attr().Size, e.Index))
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
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
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
					for _, b := range a.Children() {
						if r.IntN(3) == 0 {
							if err := c.List(context.Background(), b); err != nil {
								t.Error(err)
							}
						}
					}
				}
			}()
		}
		wg.Wait()
		if err := c.WaitWalk(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c.Walking() {
			t.Fatal("still walking after WalkDone")
		}
		if got := listing(c.Root()); !slices.Equal(got, want) {
			t.Fatalf("round %d: the background walk's tree differs:\n%v\nwant\n%v", round, got, want)
		}
		ids := map[uint64]bool{}
		c.Root().Walk(func(e *Entry) bool {
			if e.ID == 0 || ids[e.ID] {
				t.Errorf("%s: ID %d zero or given twice", e.Path, e.ID)
			}
			ids[e.ID] = true
			return true
		})
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
		if c2.Walked() || c2.Walking() {
			t.Error("the stored background walk was not complete: walked again")
		}
		if got := listing(c2.Root()); !slices.Equal(got, want) {
			t.Errorf("the stored tree differs from the walk's")
		}
		c2.Close()
	}
}
