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

// Samples added to the dataset (a refresh found new files) join a job
// from its next epoch: all of them for a job over the whole dataset, the
// ones the caller names for a job with a subset. The epoch running is
// unchanged; the next one hands out the grown set once each with torch's
// counts. A fixed job takes none. Two ODS jobs with different subsets
// exercise DSA across the growth, and the buffer fetches throughout.
func TestSamplesAddedToTheDatasetJoinJobsFromTheirNextEpoch(t *testing.T) {
	const n, added, batch = 60, 13, 4
	s, err := New(Options{Samples: n, BufferSlots: 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterJob("all", JobConfig{BatchSize: batch, WorldSize: 2}); err != nil {
		t.Fatal(err)
	}
	var sub []int
	for i := 0; i < n; i += 2 {
		sub = append(sub, i)
	}
	if err := s.RegisterJob("even", JobConfig{BatchSize: batch, Subset: sub}); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterJob("fixed", JobConfig{BatchSize: batch, Kind: KindRandom, Fixed: true}); err != nil {
		t.Fatal(err)
	}
	read := func(name string, w int, batches int) [][]int {
		out := make([][]int, w)
		for range batches {
			for r := range w {
				b, _, err := s.NextRank(name, r)
				if err != nil {
					t.Fatal(err)
				}
				out[r] = append(out[r], b...)
			}
			for _, i := range s.Prefetch(4) {
				s.Installed(i)
			}
		}
		return out
	}
	read("all", 2, 2)
	read("even", 1, 2)
	read("fixed", 1, 2)
	// 13 new samples; the even ones join "even".
	var joinEven []int
	for i := n; i < n+added; i++ {
		if i%2 == 0 {
			joinEven = append(joinEven, i)
		}
	}
	all := make([]int, added)
	for i := range all {
		all[i] = n + i
	}
	if err := s.Grow(n+added, map[string][]int{"even": joinEven, "fixed": all}); err != nil {
		t.Fatal(err)
	}
	if err := s.check(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		w     int
		size1 int
		size2 int
		in2   func(i int) bool
	}{
		{"all", 2, n, n + added, func(int) bool { return true }},
		{"even", 1, n / 2, n/2 + len(joinEven), func(i int) bool { return i%2 == 0 }},
		{"fixed", 1, n, n, func(i int) bool { return i < n }},
	} {
		rest := epochOf(t, s, tc.name, tc.w)
		for r := range tc.w {
			for _, i := range rest[r] {
				if i >= n {
					t.Errorf("%s: epoch 1 handed out %d, added after it began", tc.name, i)
				}
			}
		}
		next := epochOf(t, s, tc.name, tc.w)
		count := map[int]int{}
		quota := (tc.size2 + tc.w - 1) / tc.w
		for r := range tc.w {
			if len(next[r]) != quota {
				t.Errorf("%s: epoch 2 rank %d got %d samples, want %d", tc.name, r, len(next[r]), quota)
			}
			for _, i := range next[r] {
				count[i]++
			}
		}
		for i := range n + added {
			if want := tc.in2(i); want != (count[i] > 0) {
				t.Errorf("%s: epoch 2 handed out %d %d times", tc.name, i, count[i])
			}
		}
		st, _ := s.Status(tc.name)
		if st.Size != tc.size2 || st.PerRank != quota {
			t.Errorf("%s: status size %d per_rank %d, want %d and %d", tc.name, st.Size, st.PerRank, tc.size2, quota)
		}
		if err := s.check(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Grow(n, nil); err == nil {
		t.Error("Grow to fewer samples was taken")
	}
}
