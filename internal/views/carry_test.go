package views

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// liveness bounds a wait that must end at once (the machine may be busy).
const liveness = 10 * time.Second

// A blocked draw: the sampler's wait for the slowest rank, ended by the
// test (nil: it goes on) or by the read's context.
type blockedDraw struct {
	started chan struct{}
	release chan error
}

func newBlockedDraw() *blockedDraw {
	return &blockedDraw{started: make(chan struct{}, 8), release: make(chan error, 1)}
}

func (d *blockedDraw) draw(ctx context.Context) ([]int, bool, error) {
	d.started <- struct{}{}
	select {
	case err := <-d.release:
		return nil, false, err
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

func waitFor(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(liveness):
		t.Fatalf("%s did not happen", what)
	}
}

// TestAJobsStateNeverWaitsForABatchRead: a rank's batch read draws until
// its batch is complete, and a draw may wait for the slowest rank (up to
// the lease); the job's state reads what the carry holds meanwhile,
// without waiting for it.
func TestAJobsStateNeverWaitsForABatchRead(t *testing.T) {
	s := NewSet(Options{})
	j := &Job{form: Encoded}
	blocked := newBlockedDraw()
	first := true
	draw := func(ctx context.Context) ([]int, bool, error) {
		if first {
			first = false
			return []int{4, 7}, false, nil
		}
		return blocked.draw(ctx)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := s.NextBatch(context.Background(), j, "job#1", 0, 3, draw, nil)
		done <- err
	}()
	waitFor(t, blocked.started, "the second draw")
	got := make(chan []int, 1)
	go func() { got <- s.Carried("job#1", 2) }()
	select {
	case carried := <-got:
		if !slices.Equal(carried, []int{4, 7}) {
			t.Fatalf("carried %v, want [4 7]", carried)
		}
	case <-time.After(liveness):
		t.Fatal("the state waited for a batch read in progress")
	}
	lost := errors.New("the rank was lost")
	blocked.release <- lost
	if err := <-done; !errors.Is(err, lost) {
		t.Fatalf("the batch read returned %v, want the draw's error", err)
	}
	if carried := s.Carried("job#1", 2); !slices.Equal(carried, []int{4, 7}) {
		t.Fatalf("carried after a failed draw %v, want [4 7]: a failed read loses no sample", carried)
	}
}

// TestARanksBatchReadsTakeTurnsAndAWaitingOneCanBeInterrupted: a second
// batch read of a rank does not draw while the first draws (its batches
// would mix two epochs), and its wait ends with its context: it holds no
// lock a signal cannot end.
func TestARanksBatchReadsTakeTurnsAndAWaitingOneCanBeInterrupted(t *testing.T) {
	s := NewSet(Options{})
	j := &Job{form: Encoded}
	blocked := newBlockedDraw()
	done := make(chan error, 1)
	go func() {
		_, _, err := s.NextBatch(context.Background(), j, "job#1", 0, 2, blocked.draw, nil)
		done <- err
	}()
	waitFor(t, blocked.started, "the first read's draw")

	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	drew := make(chan struct{}, 1)
	go func() {
		_, _, err := s.NextBatch(ctx, j, "job#1", 0, 2, func(context.Context) ([]int, bool, error) {
			drew <- struct{}{}
			return nil, true, nil
		}, nil)
		second <- err
	}()
	select {
	case <-drew:
		t.Fatal("a second read of the rank drew while the first was drawing")
	case err := <-second:
		t.Fatalf("the second read returned %v before its turn", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-second:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the interrupted read returned %v, want context.Canceled", err)
		}
	case <-time.After(liveness):
		t.Fatal("a read waiting for its rank's turn was not interrupted")
	}

	// Another rank does not wait for this one's turn: the end of its epoch
	// comes at once.
	b, end, err := s.NextBatch(context.Background(), j, "job#1", 1, 2, func(context.Context) ([]int, bool, error) {
		return nil, true, nil
	}, nil)
	if err != nil || !end || b != nil {
		t.Fatalf("rank 1: batch %v end %v err %v, want the end of its epoch", b, end, err)
	}

	blocked.release <- errors.New("done")
	<-done
	// The turn is given back after a failed draw: the next read draws.
	_, end, err = s.NextBatch(context.Background(), j, "job#1", 0, 2, func(context.Context) ([]int, bool, error) {
		return nil, true, nil
	}, nil)
	if err != nil || !end {
		t.Fatalf("the next read of rank 0: end %v err %v, want the end of its epoch", end, err)
	}
}

// TestTheEndOfAnEpochComesOnceAfterTheCarryDrains: samples drawn before
// the sampler's end are handed first; the end comes once, and the next
// read starts the next epoch.
func TestTheEndOfAnEpochComesOnceAfterTheCarryDrains(t *testing.T) {
	c := &carry{turn: make(chan struct{}, 1)}
	j := &Job{form: Encoded}
	draws := [][]int{{1, 2, 3}, nil, {9, 8}}
	draw := func(context.Context) ([]int, bool, error) {
		d := draws[0]
		draws = draws[1:]
		return d, d == nil, nil
	}
	var got [][]int
	for range 4 {
		pick, err := c.fill(context.Background(), j, 2, draw)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, pick)
	}
	want := [][]int{{1, 2}, {3}, nil, {9, 8}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("picks %v, want %v", got, want)
	}
}
