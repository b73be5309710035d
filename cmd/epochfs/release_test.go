package main

import (
	"testing"

	"github.com/epochfs/epochfs/placement"
)

func TestMemoryIsReleasedWhenABurstOfCopiesEnds(t *testing.T) {
	for _, tc := range []struct {
		last int64
		st   placement.Stats
		want bool
	}{
		{0, placement.Stats{Done: releaseAfter}, true},
		{0, placement.Stats{Done: releaseAfter, Queued: 1}, false}, // still copying
		{0, placement.Stats{Done: releaseAfter - 1}, false},        // too few to matter
		{5000, placement.Stats{Done: 5000}, false},                 // released already
		{5000, placement.Stats{Done: 5000 + releaseAfter}, true},
	} {
		if got := burstEnded(tc.last, tc.st); got != tc.want {
			t.Errorf("burstEnded(%d, %+v) = %v, want %v", tc.last, tc.st, got, tc.want)
		}
	}
}
