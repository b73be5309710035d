package sampler

import (
	"fmt"
	"slices"
	"testing"
)

// A sample removed from the dataset mid-epoch (a refresh found its file
// gone) is never handed out again: not from a plan drawn before, not as
// padding, not in later epochs. Every rank still gets its quota each epoch
// (data-parallel ranks must see equal counts), the samples left cover the
// rest of the subset, and the skips are counted.
func TestSamplesGoneFromTheDatasetAreNeverHandedOut(t *testing.T) {
	const n, batch = 103, 8
	for _, kind := range Kinds() {
		for _, w := range []int{1, 3} {
			for _, slots := range []int{0, 16} {
				t.Run(fmt.Sprintf("%s/W=%d/buffer=%d", kind, w, slots), func(t *testing.T) {
					gone := make([]bool, n)
					s, err := New(Options{Samples: n, BufferSlots: slots, Gone: func(i int) bool { return gone[i] }})
					if err != nil {
						t.Fatal(err)
					}
					if err := s.RegisterJob("j", JobConfig{BatchSize: batch, Kind: kind, WorldSize: w}); err != nil {
						t.Fatal(err)
					}
					quota := (n + w - 1) / w
					// Half an epoch, a batch per rank in turn, the buffer
					// fetching what the sampler asks for.
					got := make([][]int, w)
					for range quota / batch / 2 {
						for r := range w {
							b, _, err := s.NextRank("j", r)
							if err != nil {
								t.Fatal(err)
							}
							got[r] = append(got[r], b...)
						}
						for _, i := range s.Prefetch(4) {
							s.Installed(i)
						}
					}
					// Remove some handed out, some drawn ahead, some unseen.
					var handed []int
					for _, g := range got {
						handed = append(handed, g...)
					}
					removed := []int{handed[0], handed[len(handed)-1]}
					for i := 0; i < n && len(removed) < 12; i += 9 {
						if !slices.Contains(removed, i) {
							removed = append(removed, i)
						}
					}
					for _, i := range removed {
						gone[i] = true
					}
					seen := map[int]bool{}
					for _, g := range got {
						for _, i := range g {
							seen[i] = true
						}
					}
					rest := epochOf(t, s, "j", w)
					for r := range w {
						if c := len(got[r]) + len(rest[r]); c != quota {
							t.Errorf("epoch 1: rank %d got %d samples, want its quota %d", r, c, quota)
						}
						for _, i := range rest[r] {
							if gone[i] {
								t.Fatalf("epoch 1: rank %d was handed %d after it was removed", r, i)
							}
							seen[i] = true
						}
					}
					for i := range n {
						if !gone[i] && !seen[i] {
							t.Errorf("epoch 1: sample %d never handed out", i)
						}
					}
					if err := s.check(); err != nil {
						t.Fatal(err)
					}
					// The next epoch: the samples left, once each apart from
					// padding, with equal counts.
					next := epochOf(t, s, "j", w)
					count := map[int]int{}
					for r := range w {
						if len(next[r]) != quota {
							t.Errorf("epoch 2: rank %d got %d samples, want %d", r, len(next[r]), quota)
						}
						for _, i := range next[r] {
							if gone[i] {
								t.Fatalf("epoch 2: rank %d was handed the removed sample %d", r, i)
							}
							count[i]++
						}
					}
					for i := range n {
						if !gone[i] && count[i] == 0 {
							t.Errorf("epoch 2: sample %d never handed out", i)
						}
					}
					st, _ := s.Status("j")
					if st.Skipped < len(removed)-2 {
						t.Errorf("skipped %d, want at least %d (every unseen removed sample, each epoch)", st.Skipped, len(removed)-2)
					}
					if err := s.check(); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}
