package daemon

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestQuietWaitsForTheKicksToStop: a share pass after a change of the
// members waits until they stop changing (quiet), and gives up when the
// mount ends.
func TestQuietWaitsForTheKicksToStop(t *testing.T) {
	kick := make(chan struct{}, 1)
	var last atomic.Bool
	go func() {
		for i := range 10 {
			select {
			case kick <- struct{}{}:
			default:
			}
			time.Sleep(20 * time.Millisecond)
			if i == 9 {
				last.Store(true)
			}
		}
	}()
	if !quiet(context.Background(), kick, time.Second) {
		t.Fatal("quiet gave up without its context ending")
	}
	if !last.Load() {
		t.Fatal("quiet returned while the members were still changing")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if quiet(ctx, kick, time.Hour) {
		t.Fatal("quiet returned true after its context ended")
	}
}
