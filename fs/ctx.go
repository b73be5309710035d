package fs

import (
	"context"
	"sync"
	"time"
)

// interruptGrace is how long a request goes on after the kernel
// interrupts it. The kernel interrupts a request when the reading process
// gets any signal: a fatal one (the process must be let go: the kernel
// waits for the answer), and also the ones a Go program's runtime sends
// its own threads many times a second to preempt goroutines. A request
// that finishes within the grace is answered normally, so a healthy source
// never turns a preemption signal into EINTR; one that waits on a hung
// source answers EINTR at the end of the grace, so a killed reader dies
// at once.
const interruptGrace = 100 * time.Millisecond

// graceCtx is the context of a request that may wait on the source: it
// ends interruptGrace after the FUSE request is interrupted. Nothing is
// started until someone asks for Done: the hot path (a resident file
// opened again) pays nothing.
type graceCtx struct {
	parent context.Context
	once   sync.Once
	done   chan struct{}
	stop   chan struct{}
	mu     sync.Mutex
	err    error
}

// reqCtx wraps a request's context; call release when the request ends.
func reqCtx(ctx context.Context) (context.Context, func()) {
	if ctx == nil {
		ctx = context.Background()
	}
	c := &graceCtx{parent: ctx}
	return c, c.release
}

func (c *graceCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *graceCtx) Value(key any) any           { return c.parent.Value(key) }

func (c *graceCtx) Done() <-chan struct{} {
	c.once.Do(func() {
		c.done, c.stop = make(chan struct{}), make(chan struct{})
		pd := c.parent.Done()
		if pd == nil {
			return
		}
		go func() {
			select {
			case <-pd:
			case <-c.stop:
				return
			}
			t := time.NewTimer(interruptGrace)
			defer t.Stop()
			select {
			case <-t.C:
			case <-c.stop:
				return
			}
			c.mu.Lock()
			c.err = context.Canceled
			c.mu.Unlock()
			close(c.done)
		}()
	})
	return c.done
}

func (c *graceCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// release ends the watch of the parent (the request is answered).
func (c *graceCtx) release() {
	c.once.Do(func() {}) // no watcher started after this
	if c.stop != nil {
		close(c.stop)
	}
}
