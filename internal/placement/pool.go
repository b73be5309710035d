package placement

import (
	"context"
	"sync"
)

// pool runs at most n tasks at once; do blocks for a slot. Tasks may start
// tasks (a directory its subdirectories) without deadlock: a task that
// cannot get a slot runs in its caller.
type pool struct {
	ctx context.Context
	sem chan struct{}
	wg  sync.WaitGroup
}

func newPool(ctx context.Context, n int) *pool {
	return &pool{ctx: ctx, sem: make(chan struct{}, n)}
}

// do runs fn; it reports false once the pool's context has ended.
func (pl *pool) do(fn func()) bool {
	if pl.ctx.Err() != nil {
		return false
	}
	select {
	case pl.sem <- struct{}{}:
		pl.wg.Add(1)
		go func() {
			defer pl.wg.Done()
			defer func() { <-pl.sem }()
			fn()
		}()
	default:
		fn()
	}
	return true
}

func (pl *pool) wait() { pl.wg.Wait() }
