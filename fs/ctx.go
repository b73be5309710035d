package fs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/epochfs/epochfs/placement"
	"github.com/epochfs/epochfs/tier"
)

// The kernel interrupts a FUSE request when the waiting process gets any
// signal, and sends only one interrupt per request: a fatal signal (the
// process must be let go), but also a handled one (SIGCHLD, SIGINT under
// Python) and the preemption signals a Go program's runtime sends its own
// threads many times a second. Two rules answer it:
//
//   - reqCtx, for requests that wait on the source or on preprocessing
//     (opens and reads of files and views): only a fatal signal ends the
//     wait, as on a local disk or an NFS mount, where a read is killable
//     but a handled signal does not make open(2) fail. Programs that do not
//     retry EINTR (most C programs) never see it. After the interrupt the
//     caller's thread is polled for a pending SIGKILL (the kernel turns
//     every fatal signal into one), so a killed reader dies within
//     fatalPoll, while the source deadline still bounds every other wait.
//   - waitCtx, for the waits of the job ctl files (a rank waiting for the
//     others, a batch not made yet), which have no deadline of their own:
//     any signal ends them with EINTR once interruptGrace has passed, so a
//     request that finishes within the grace is answered normally.
const (
	interruptGrace = 100 * time.Millisecond
	fatalPoll      = 50 * time.Millisecond
)

// graceCtx is the context of a request that may wait. Nothing is started
// until someone asks for Done: the hot path (a resident file opened again)
// pays nothing.
type graceCtx struct {
	parent context.Context
	// fatalOnly: end only when the caller has a fatal signal pending
	// (tid is the caller's thread; 0 when the request names none, and then
	// the grace rule applies).
	fatalOnly bool
	tid       uint32
	once      sync.Once
	done      chan struct{}
	stop      chan struct{}
	mu        sync.Mutex
	err       error
}

// reqCtx wraps the context of a request that waits on the source: only a
// fatal signal of the caller ends it. Call release when the request ends.
func reqCtx(ctx context.Context) (context.Context, func()) {
	c := newGraceCtx(ctx)
	caller, ok := fuse.FromContext(c.parent)
	if !ok {
		return c, c.release
	}
	if caller.Pid != 0 {
		c.fatalOnly, c.tid = true, caller.Pid
	}
	// The source bounds what one user may leave stuck in it; a fill
	// queues only what the user may open (placement/fill.go).
	return placement.WithCaller(tier.WithUser(c, caller.Uid), caller.Uid, caller.Gid), c.release
}

// waitCtx wraps the context of a request that waits with no deadline of
// its own: any interrupt ends it after interruptGrace.
func waitCtx(ctx context.Context) (context.Context, func()) {
	c := newGraceCtx(ctx)
	return c, c.release
}

func newGraceCtx(ctx context.Context) *graceCtx {
	if ctx == nil {
		ctx = context.Background()
	}
	return &graceCtx{parent: ctx}
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
		go c.watch(pd)
	})
	return c.done
}

// watch waits for the interrupt, then for the rule to end the request.
func (c *graceCtx) watch(interrupted <-chan struct{}) {
	select {
	case <-interrupted:
	case <-c.stop:
		return
	}
	if c.fatalOnly {
		t := time.NewTicker(fatalPoll)
		defer t.Stop()
		for !fatalPending(c.tid) {
			select {
			case <-t.C:
			case <-c.stop:
				return
			}
		}
	} else {
		t := time.NewTimer(interruptGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.stop:
			return
		}
	}
	c.mu.Lock()
	c.err = context.Canceled
	c.mu.Unlock()
	close(c.done)
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

// sigkillBit is SIGKILL (9) in the pending-signal masks of
// /proc/TID/status.
const sigkillBit = 1 << (9 - 1)

// fatalPending reports whether thread tid is being killed: SIGKILL pending
// for it or its process, or the thread gone. A status that cannot be
// parsed counts as not fatal (the source deadline still ends the wait).
func fatalPending(tid uint32) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return os.IsNotExist(err)
	}
	return fatalInStatus(b)
}

// fatalInStatus reads the SigPnd (the thread's) and ShdPnd (the process's)
// masks of a /proc status file.
func fatalInStatus(status []byte) bool {
	for _, line := range bytes.Split(status, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || (string(k) != "SigPnd" && string(k) != "ShdPnd") {
			continue
		}
		m, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64)
		if err == nil && m&sigkillBit != 0 {
			return true
		}
	}
	return false
}
