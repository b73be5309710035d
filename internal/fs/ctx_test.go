package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/source"
	"go.uber.org/zap"
)

func TestFatalInStatusSeesSIGKILLInTheThreadsOrTheProcesssPendingSet(t *testing.T) {
	for _, tc := range []struct {
		status string
		fatal  bool
	}{
		{"Name:\tcat\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n", false},
		{"SigPnd:\t0000000000000100\nShdPnd:\t0000000000000000\n", true},
		{"SigPnd:\t0000000000000000\nShdPnd:\t0000000000000100\n", true},
		// SIGUSR1 (10), SIGCHLD (17) and SIGURG (23): handled, not fatal.
		{"SigPnd:\t0000000000410200\nShdPnd:\t0000000000010000\n", false},
		{"SigPnd:\tnot hex\n", false},
		{"", false},
	} {
		if got := fatalInStatus([]byte(tc.status)); got != tc.fatal {
			t.Errorf("fatalInStatus(%q) = %v, want %v", tc.status, got, tc.fatal)
		}
	}
}

func TestFatalPendingIsFalseForALiveThreadAndTrueForAGoneOne(t *testing.T) {
	if fatalPending(uint32(os.Getpid())) {
		t.Error("this process counts as being killed")
	}
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if !fatalPending(uint32(c.Process.Pid)) {
		t.Errorf("reaped process %d does not count as gone", c.Process.Pid)
	}
}

// A request's budget ends it with an error that is EIO (a source that did
// not answer), never the EINTR of an interrupt, whether it ended a wait on
// the source or any other wait of the request; a request with no budget
// has no deadline.
func TestARequestsBudgetEndsItWithEIO(t *testing.T) {
	ctx, release := reqCtx(context.Background(), 50*time.Millisecond)
	defer release()
	if _, ok := ctx.Deadline(); !ok {
		t.Fatal("a request with a budget has no deadline")
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the budget did not end the request")
	}
	fsys := &FS{log: zap.NewNop()}
	for _, err := range []error{ctx.Err(), fmt.Errorf("placement: wait: %w", ctx.Err()),
		&source.Error{Op: "open", Path: "x", Err: ctx.Err()}} {
		if got := fsys.toErrno(err); got != syscall.EIO {
			t.Errorf("%v: %v, want EIO", err, got)
		}
	}
	if !errors.Is(ctx.Err(), source.ErrTimeout) || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("the budget's error %v is neither a source timeout nor a deadline", ctx.Err())
	}
	free, release2 := reqCtx(context.Background(), 0)
	defer release2()
	if _, ok := free.Deadline(); ok || free.Done() != nil && free.Err() != nil {
		t.Error("a request without a budget has a deadline")
	}
}
