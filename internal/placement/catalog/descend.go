package catalog

import (
	"context"
	"sync"
)

// Descend is the one walker of the tree: the mount's walk (walk.go), the
// background walk (bgwalk.go) and a refresh (placement's scrub.go) all go
// down the tree through it, each with its own way to read a directory.
//
// It calls list on root, then on every directory a call returns, at most
// workers calls at a time, and returns once every call has returned. list
// reads directory d (from the source, the catalog or both) and returns the
// subdirectories to go into. Once ctx ends no new call starts. The
// directories waiting for a worker are held in one list (a pointer each),
// so that a walk of any shape needs workers goroutines and no more.
func Descend(ctx context.Context, root *Entry, workers int, list func(d *Entry) []*Entry) {
	workers = max(workers, 1)
	var (
		mu      sync.Mutex
		waiting = []*Entry{root}
		active  int // calls of list under way
		wg      sync.WaitGroup
	)
	more := sync.NewCond(&mu)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			for {
				for len(waiting) == 0 && active > 0 {
					more.Wait()
				}
				if len(waiting) == 0 {
					more.Broadcast() // the walk is over: wake the others
					return
				}
				d := waiting[len(waiting)-1]
				waiting[len(waiting)-1] = nil
				waiting = waiting[:len(waiting)-1]
				active++
				mu.Unlock()
				var subs []*Entry
				if ctx.Err() == nil {
					subs = list(d)
				}
				mu.Lock()
				active--
				waiting = append(waiting, subs...)
				more.Broadcast()
			}
		}()
	}
	wg.Wait()
}

// dirsOf is the directories among es.
func dirsOf(es Kids) []*Entry {
	var dirs []*Entry
	for e := range es.All() {
		if e.Kind() == KindDir {
			dirs = append(dirs, e)
		}
	}
	return dirs
}
