package catalog

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tree builds a directory tree of the given fan-out and depth, its
// directories only, and returns the root and how many directories it has.
func tree(fanout, depth int) (*Entry, int) {
	root := newOfKind(KindDir)
	n := 1
	var grow func(d *Entry, level int)
	grow = func(d *Entry, level int) {
		if level == depth {
			return
		}
		var kids []*Entry
		for i := range fanout {
			k := NewDir(fmt.Sprintf("%s/%d", d.Path(), i), nil)
			kids = append(kids, k, NewFile(fmt.Sprintf("%s/f%d", d.Path(), i), Attr{}))
			n++
			grow(k, level+1)
		}
		d.setChildren(ptrKids(kids))
	}
	grow(root, 0)
	return root, n
}

// Descend lists every directory exactly once, never more than workers at
// a time, whatever the tree's shape: wide, deep, or a single directory.
func TestDescendListsEveryDirectoryOnceWithinItsWorkers(t *testing.T) {
	for _, tc := range []struct{ fanout, depth, workers int }{
		{0, 0, 4}, {1, 200, 3}, {40, 2, 8}, {3, 6, 1}, {5, 4, 16},
	} {
		root, want := tree(tc.fanout, tc.depth)
		var mu sync.Mutex
		seen := map[*Entry]int{}
		var now, peak atomic.Int32
		Descend(context.Background(), root, tc.workers, func(d *Entry) []*Entry {
			if n := now.Add(1); n > peak.Load() {
				peak.Store(n)
			}
			defer now.Add(-1)
			if d.Kind() != KindDir {
				t.Errorf("listed %s, not a directory", d.Path())
			}
			mu.Lock()
			seen[d]++
			mu.Unlock()
			time.Sleep(10 * time.Microsecond)
			return dirsOf(d.Children())
		})
		if len(seen) != want {
			t.Errorf("%+v: listed %d directories, want %d", tc, len(seen), want)
		}
		for d, n := range seen {
			if n != 1 {
				t.Errorf("%+v: %q listed %d times", tc, d.Path(), n)
			}
		}
		if p := int(peak.Load()); p > tc.workers {
			t.Errorf("%+v: %d lists at once, over %d workers", tc, p, tc.workers)
		}
	}
}

// Once its context ends, Descend starts no list and returns.
func TestDescendStopsWithItsContext(t *testing.T) {
	root, total := tree(4, 5)
	ctx, cancel := context.WithCancel(context.Background())
	var calls, late atomic.Int32
	var ended atomic.Bool
	done := make(chan struct{})
	const workers = 2
	go func() {
		defer close(done)
		Descend(ctx, root, workers, func(d *Entry) []*Entry {
			if ended.Load() {
				late.Add(1)
			}
			if calls.Add(1) == 10 {
				// The other worker may list any number of directories
				// between the count and the cancel (this one descheduled).
				cancel()
				ended.Store(true)
			}
			return dirsOf(d.Children())
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Descend did not return after its context ended")
	}
	// After the cancel, only a list whose worker checked the context
	// before it may start: one per other worker at most.
	if n := int(late.Load()); n > workers-1 {
		t.Errorf("%d lists started after the cancel, want at most %d", n, workers-1)
	}
	if n := int(calls.Load()); n >= total {
		t.Errorf("%d lists of %d directories after a cancel at the 10th", n, total)
	}
}
