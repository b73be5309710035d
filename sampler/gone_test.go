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
// rest of the subset, and the skips are counted. The next epoch is over
// the samples left, each once apart from torch's padding.
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
					// The next epoch is over the samples left: torch's counts
					// over them, each once apart from torch's padding.
					left := n - len(removed)
					quota2 := (left + w - 1) / w
					next := epochOf(t, s, "j", w)
					count := map[int]int{}
					for r := range w {
						if len(next[r]) != quota2 {
							t.Errorf("epoch 2: rank %d got %d samples, want %d", r, len(next[r]), quota2)
						}
						for _, i := range next[r] {
							if gone[i] {
								t.Fatalf("epoch 2: rank %d was handed the removed sample %d", r, i)
							}
							count[i]++
						}
					}
					dups := 0
					for i := range n {
						if !gone[i] && count[i] == 0 {
							t.Errorf("epoch 2: sample %d never handed out", i)
						}
						dups += max(count[i]-1, 0)
					}
					if dups != quota2*w-left {
						t.Errorf("epoch 2: %d samples handed out twice, want torch's padding of %d", dups, quota2*w-left)
					}
					st, _ := s.Status("j")
					if st.Size != left || st.PerRank != quota2 {
						t.Errorf("status after epoch 2 began: size %d per_rank %d, want %d and %d", st.Size, st.PerRank, left, quota2)
					}
					unseen := 0
					for _, i := range removed {
						if !slices.Contains(handed, i) {
							unseen++
						}
					}
					if st.Skipped != unseen {
						t.Errorf("skipped %d, want %d (each removed sample not handed out before, drawn once in epoch 1; none in epoch 2)", st.Skipped, unseen)
					}
					if err := s.check(); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}
