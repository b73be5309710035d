package views

import (
	"slices"
	"testing"
	"time"
)

// TestAJobsStateNeverWaitsForABatchRead: a rank's batch read holds its
// carry across its draws, which may wait for the slowest rank (up to the
// lease); the job's state reads what the carries hold meanwhile, without
// waiting for it.
func TestAJobsStateNeverWaitsForABatchRead(t *testing.T) {
	s := NewSet(Options{})
	j := &Job{form: Encoded}
	c := s.Carry("job#1", 0)
	c.Lock()
	c.Add(j, []int{4, 7}, false)
	// The read now "waits for the slowest rank", the carry held.
	got := make(chan []int, 1)
	go func() { got <- s.Carried("job#1", 2) }()
	select {
	case carried := <-got:
		if !slices.Equal(carried, []int{4, 7}) {
			t.Fatalf("carried %v, want [4 7]", carried)
		}
	case <-time.After(10 * time.Second): // a liveness bound
		t.Fatal("the state waited for a batch read in progress")
	}
	if pick := c.Pick(j, 1); !slices.Equal(pick, []int{4}) {
		t.Fatalf("pick %v", pick)
	}
	c.Unlock()
	if carried := s.Carried("job#1", 2); !slices.Equal(carried, []int{7}) {
		t.Fatalf("carried after the pick %v, want [7]", carried)
	}
}
