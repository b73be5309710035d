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

	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/source"
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
//   - a request that needs the source has one budget, the source timeout,
//     however many source operations and waits it takes (reqCtx's
//     deadline): past it the request fails with EIO (errBudget), and the
//     source operation still running is left behind (source.Source counts
//     it as stuck).
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
	// deadline, if set, ends the request with errBudget.
	deadline time.Time
	once     sync.Once
	done     chan struct{}
	stop     chan struct{}
	mu       sync.Mutex
	err      error
}

// errBudget ends a request that needed the source past its budget (the
// source timeout): EIO, never EINTR (errno.go).
var errBudget = &budgetError{}

type budgetError struct{}

func (*budgetError) Error() string { return "no answer from the source within source_timeout" }
func (*budgetError) Is(target error) bool {
	return target == source.ErrTimeout || target == context.DeadlineExceeded
}

// reqCtx wraps the context of a request that waits on the source: only a
// fatal signal of the caller ends it, or its budget (budget > 0: the
// source timeout, for the request as a whole). Call release when the
// request ends.
func reqCtx(ctx context.Context, budget time.Duration) (context.Context, func()) {
	c := newGraceCtx(ctx)
	if budget > 0 {
		c.deadline = time.Now().Add(budget)
	}
	caller, ok := fuse.FromContext(c.parent)
	if !ok {
		return c, c.release
	}
	if caller.Pid != 0 {
		c.fatalOnly, c.tid = true, caller.Pid
	}
	// The source bounds what one user may leave stuck in it; a fill
	// queues only what the user may open (internal/placement/fill.go).
	return placement.WithCaller(source.WithUser(c, caller.Uid), caller.Uid, caller.Gid), c.release
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

func (c *graceCtx) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }
func (c *graceCtx) Value(key any) any           { return c.parent.Value(key) }

func (c *graceCtx) Done() <-chan struct{} {
	c.once.Do(func() {
		c.done, c.stop = make(chan struct{}), make(chan struct{})
		pd := c.parent.Done()
		if pd == nil && c.deadline.IsZero() {
			return
		}
		go c.watch(pd)
	})
	return c.done
}

// watch waits for the interrupt, then for the rule to end the request;
// the budget's end ends it at any point.
func (c *graceCtx) watch(interrupted <-chan struct{}) {
	var budget <-chan time.Time
	if !c.deadline.IsZero() {
		t := time.NewTimer(time.Until(c.deadline))
		defer t.Stop()
		budget = t.C
	}
	select {
	case <-interrupted:
	case <-budget:
		c.end(errBudget)
		return
	case <-c.stop:
		return
	}
	if c.fatalOnly {
		t := time.NewTicker(fatalPoll)
		defer t.Stop()
		for !fatalPending(c.tid) {
			select {
			case <-t.C:
			case <-budget:
				c.end(errBudget)
				return
			case <-c.stop:
				return
			}
		}
	} else {
		t := time.NewTimer(interruptGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-budget:
			c.end(errBudget)
			return
		case <-c.stop:
			return
		}
	}
	c.end(context.Canceled)
}

// end ends the request with err.
func (c *graceCtx) end(err error) {
	c.mu.Lock()
	c.err = err
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

// budget is the time a request that needs the source may take in all:
// the source timeout.
func (fsys *FS) budget() time.Duration { return fsys.p.Source().Timeout() }

// listed lists directory e from the source if the walk has not (a
// background walk): the wait has the source budget of a request.
func (fsys *FS) listed(ctx context.Context, e *catalog.Entry) error {
	if e.Listed() {
		return nil
	}
	rctx, release := reqCtx(ctx, fsys.budget())
	defer release()
	return fsys.p.Catalog().List(rctx, e)
}
