package daemon

// The daemon's way out is bounded. Once the kernel mount is gone (or on
// SIGTERM) Close shuts down what New opened, last opened first: the jobs
// manager (it waits for prefetches), the placer (it waits for the copies
// in progress) and the catalog (it syncs and closes badger). A copy blocked
// in a read from a source that does not answer cannot be cancelled, so a
// close that waits for it would keep the process, its lock and its catalog
// forever. Each close therefore runs in a goroutine, and all of them share
// one deadline; a close still running at the deadline is abandoned, named
// in the log, and Close returns an error (the daemon's process exits with
// code 1, which reclaims the goroutine, the descriptors and the locks).
// Closes marked always (the catalog) still run after an abandoned one,
// with a deadline of their own, so the copies already completed stay
// recorded.

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// DefaultShutdownTimeout bounds the closes after the mount is gone.
const DefaultShutdownTimeout = 10 * time.Second

// step is one thing the daemon closes on its way out.
type step struct {
	what   string // what the daemon waits for, as the log names it
	close  func() error
	always bool // run even after an earlier step was abandoned
}

// shutdown runs steps in reverse order within timeout (see the top of this
// file). It returns an error matching ErrShutdownStuck naming the first
// step abandoned, or the closes' own errors.
func shutdown(log *zap.Logger, steps []step, timeout time.Duration) error {
	deadline := time.After(timeout)
	var errs []error
	abandoned := ""
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		if abandoned != "" {
			if !s.always {
				log.Warn("shutdown: not closing (an earlier close is stuck)", zap.String("what", s.what))
				continue
			}
			deadline = time.After(timeout)
		}
		done := make(chan error, 1)
		go func() { done <- s.close() }()
		select {
		case err := <-done:
			if err != nil {
				errs = append(errs, err)
			}
		case <-deadline:
			log.Error("shutdown: still waiting; exiting without it",
				zap.String("waiting_for", s.what), zap.String("deadline", timeout.String()))
			if abandoned == "" {
				abandoned = s.what
			}
		}
	}
	if abandoned != "" {
		return fmt.Errorf("%w: %s did not finish within %s (the source does not answer?); exiting without it", ErrShutdownStuck, abandoned, timeout)
	}
	return errors.Join(errs...)
}
