package chaos

import (
	"fmt"
	"testing"
	"time"
)

// The minimiser keeps the steps a failure needs and the failing step
// last, and drops the rest.
func TestMinimizeKeepsWhatTheFailureNeeds(t *testing.T) {
	var ops []op
	for i := range 200 {
		ops = append(ops, op{Kind: "read", Path: fmt.Sprint(i)})
	}
	ops[37] = op{Kind: "hang"}
	ops[150] = op{Kind: "crash"}
	ops = append(ops, op{Kind: "read", Path: "x"})
	fails := func(seq []op) bool {
		var hang, crash bool
		for _, o := range seq {
			hang = hang || o.Kind == "hang"
			crash = crash || o.Kind == "crash" && hang
		}
		return crash && seq[len(seq)-1].Path == "x"
	}
	got := minimize(ops, time.Minute, fails)
	want := []op{{Kind: "hang"}, {Kind: "crash"}, {Kind: "read", Path: "x"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("minimised to %v, want %v", got, want)
	}
	if minimize(ops, time.Minute, func([]op) bool { return false }) != nil {
		t.Fatal("a sequence that never fails again was minimised")
	}
}
