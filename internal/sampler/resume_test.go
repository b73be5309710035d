package sampler

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// resumeRun drives one run of job "a" and records what it hands out, per
// epoch: the samples, each rank's count, and the padding.
type resumeRun struct {
	t      *testing.T
	s      *Sampler
	w      int
	got    map[int][]int   // epoch -> samples handed out
	counts map[int][]int   // epoch -> per rank: samples handed out
	pad    map[int]int     // epoch -> padding handed out
	ended  map[int][]bool  // epoch -> per rank: end read
	ends   map[[2]int]bool // (rank, epoch) whose end was read
}

func newResumeRun(t *testing.T, s *Sampler, w int) *resumeRun {
	return &resumeRun{t: t, s: s, w: w, got: map[int][]int{}, counts: map[int][]int{}, pad: map[int]int{},
		ended: map[int][]bool{}, ends: map[[2]int]bool{}}
}

// read is one NextRank of rank r; false when the rank must wait.
func (u *resumeRun) read(r int) bool {
	before, err := u.s.Status("a")
	if err != nil {
		u.t.Fatal(err)
	}
	batch, end, err := u.s.NextRank("a", r)
	if errors.Is(err, ErrRankAhead) {
		return false
	}
	if err != nil {
		u.t.Fatal(err)
	}
	rs, err := u.s.RankStatus("a", r)
	if err != nil {
		u.t.Fatal(err)
	}
	after, _ := u.s.Status("a")
	ep := rs.Epoch
	if end {
		u.ends[[2]int{r, ep}] = true
		return true
	}
	if u.counts[ep] == nil {
		u.counts[ep] = make([]int, u.w)
	}
	u.got[ep] = append(u.got[ep], batch...)
	u.counts[ep][r] += len(batch)
	u.pad[ep] += after.Padded - before.Padded
	if err := u.s.check(); err != nil {
		u.t.Fatal(err)
	}
	return true
}

func toResume(sn Snapshot) []ResumeEpoch {
	out := make([]ResumeEpoch, len(sn.Epochs))
	for i, ep := range sn.Epochs {
		out[i] = ResumeEpoch{Num: ep.Num, Handed: ep.Handed}
	}
	return out
}

// TestAResumedEpochHandsOutWhatIsLeftExactlyOnce: over random kill
// points, world sizes before and after (1→4, 4→2, 3→3 among them), kinds,
// drop_last, and samples removed from the dataset before the kill, between
// the runs and during the resumed one, every sample of each interrupted
// epoch is handed out once across the two runs apart from padding, the
// resumed run's ranks get equal counts, and the next epoch is a
// permutation (padding aside).
func TestAResumedEpochHandsOutWhatIsLeftExactlyOnce(t *testing.T) {
	fixed := [][2]int{{1, 4}, {4, 2}, {3, 3}}
	trials := 400
	if testing.Short() {
		trials = 60
	}
	twoEpochs, goneBetween, midEpoch := 0, 0, 0
	defer func() {
		// The workloads reach what the test is about.
		if !t.Failed() && (twoEpochs == 0 || goneBetween == 0 || midEpoch < trials/4) {
			t.Errorf("snapshots with two epochs in flight %d, samples gone between the runs %d, mid-epoch kills %d",
				twoEpochs, goneBetween, midEpoch)
		}
	}()
	for trial := range trials {
		rng := rand.New(rand.NewPCG(uint64(trial), 28))
		n := 1 + rng.IntN(250)
		w1, w2 := 1+rng.IntN(5), 1+rng.IntN(5)
		if trial < len(fixed) {
			w1, w2 = fixed[trial][0], fixed[trial][1]
		}
		kind := Kinds()[rng.IntN(len(Kinds()))]
		dropLast := rng.IntN(4) == 0
		var subset []int
		if rng.IntN(3) == 0 {
			for i := range n {
				if rng.IntN(3) > 0 {
					subset = append(subset, i)
				}
			}
		}
		m := n
		if subset != nil {
			m = len(subset)
		}
		if m == 0 || dropLast && (m < w1 || m < w2) || m < w1 || m < w2 {
			continue
		}
		name := fmt.Sprintf("trial %d: n=%d m=%d w %d→%d %s drop_last=%v", trial, n, m, w1, w2, kind, dropLast)
		t.Run(name, func(t *testing.T) {
			gone := map[int]bool{}
			opt := Options{Samples: n, Lease: -1, BufferSlots: 8, Seed: uint64(trial), Gone: func(i int) bool { return gone[i] }}
			cfg := func(w int) JobConfig {
				return JobConfig{BatchSize: 1 + rng.IntN(7), Seed: 9, Kind: kind, Subset: subset, WorldSize: w, DropLast: dropLast}
			}
			s1, err := New(opt)
			if err != nil {
				t.Fatal(err)
			}
			if err := s1.RegisterJob("a", cfg(w1)); err != nil {
				t.Fatal(err)
			}
			one := newResumeRun(t, s1, w1)
			kill := rng.IntN(3 * m / max(1, w1))
			for range kill {
				one.read(rng.IntN(w1))
				if rng.IntN(40) == 0 {
					gone[rng.IntN(n)] = true // a refresh removed it
				}
				if rng.IntN(6) == 0 {
					for _, e := range s1.Prefetch(2) {
						s1.Installed(e)
					}
				}
			}
			sn, err := s1.Snapshot("a")
			if err != nil {
				t.Fatal(err)
			}
			if len(sn.Epochs) == 2 {
				twoEpochs++
			}
			if sn.Epochs[0].Count > 0 {
				midEpoch++
			}
			if rng.IntN(4) == 0 {
				gone[rng.IntN(n)] = true // removed between the runs
				goneBetween++
			}
			s2, err := New(opt)
			if err != nil {
				t.Fatal(err)
			}
			if err := s2.RegisterJob("a", cfg(w2)); err != nil {
				t.Fatal(err)
			}
			if err := s2.Resume("a", toResume(sn)); err != nil {
				t.Fatal(err)
			}
			two := newResumeRun(t, s2, w2)
			last := sn.Epochs[len(sn.Epochs)-1].Num + 1
			for guard := 0; ; guard++ {
				if guard > 1_000_000 {
					t.Fatal("the resumed run does not end")
				}
				done := true
				for r := range w2 {
					if !two.ends[[2]int{r, last}] {
						done = false
						two.read(r)
						if rng.IntN(80) == 0 {
							gone[rng.IntN(n)] = true // removed during the resumed run
						}
					}
				}
				if done {
					break
				}
			}
			want := subset
			if want == nil {
				want = make([]int, n)
				for i := range want {
					want[i] = i
				}
			}
			for _, ep := range sn.Epochs {
				checkEpochOnce(t, fmt.Sprintf("interrupted epoch %d", ep.Num), want, gone,
					append(slices.Clone(one.got[ep.Num]), two.got[ep.Num]...), one.pad[ep.Num]+two.pad[ep.Num], dropLast, w2)
				checkEqual(t, ep.Num, two.counts[ep.Num], w2)
			}
			checkEpochOnce(t, fmt.Sprintf("epoch %d after the resumed ones", last), want, gone, two.got[last], two.pad[last], dropLast, w2)
			checkEqual(t, last, two.counts[last], w2)
		})
	}
}

// checkEpochOnce: got holds every sample of want not gone once, apart from
// pad repeats; with drop_last fewer than w samples may be left out.
func checkEpochOnce(t *testing.T, what string, want []int, gone map[int]bool, got []int, pad int, dropLast bool, w int) {
	t.Helper()
	in := map[int]bool{}
	for _, e := range want {
		in[e] = true
	}
	count := map[int]int{}
	for _, e := range got {
		if !in[e] {
			t.Fatalf("%s: sample %d is not in the subset", what, e)
		}
		count[e]++
	}
	repeats, missing := 0, 0
	for _, e := range want {
		switch c := count[e]; {
		case c == 0 && !gone[e]:
			missing++
		case c > 1:
			repeats += c - 1
		}
	}
	if repeats != pad {
		t.Fatalf("%s: %d repeats, %d padding (%d handed out)", what, repeats, pad, len(got))
	}
	if dropLast && missing >= w || !dropLast && missing > 0 {
		t.Fatalf("%s: %d samples never handed out (drop_last=%v, %d ranks)", what, missing, dropLast, w)
	}
}

// checkEqual: the ranks got the same count in the epoch.
func checkEqual(t *testing.T, ep int, counts []int, w int) {
	t.Helper()
	if counts == nil {
		return // nothing was left of the epoch
	}
	for r := 1; r < w; r++ {
		if counts[r] != counts[0] {
			t.Fatalf("epoch %d: ranks got %v, not equal counts", ep, counts)
		}
	}
}

// TestResumeIsRefusedOnceAJobHasRead, and for a snapshot of a larger
// subset or epochs out of order: nothing changes.
func TestResumeIsRefusedOnceAJobHasReadOrForABadState(t *testing.T) {
	s, err := New(Options{Samples: 100, Lease: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterJob("a", JobConfig{BatchSize: 10, Subset: []int{1, 2, 3, 4, 5}}); err != nil {
		t.Fatal(err)
	}
	big := []uint64{1 << 7}
	for _, eps := range [][]ResumeEpoch{
		nil,
		{{Num: 0}},
		{{Num: 2}, {Num: 4}},
		{{Num: 1}, {Num: 2}, {Num: 3}},
		{{Num: 1, Handed: big}},
		{{Num: 1, Handed: []uint64{0, 1}}},
	} {
		if err := s.Resume("a", eps); !errors.Is(err, ErrBadConfig) {
			t.Errorf("Resume(%v) = %v, want ErrBadConfig", eps, err)
		}
	}
	if err := s.Resume("a", []ResumeEpoch{{Num: 3, Handed: []uint64{0b10101}}}); err != nil {
		t.Fatal(err)
	}
	batch, _, err := s.Next("a")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(batch)
	if !slices.Equal(batch, []int{2, 4}) {
		t.Fatalf("resumed epoch handed out %v, want [2 4]", batch)
	}
	if st, _ := s.Status("a"); st.Epoch != 3 || st.Resumed != 3 || st.PerRank != 2 {
		t.Fatalf("status after resume: epoch %d resumed %d per_rank %d, want 3 3 2", st.Epoch, st.Resumed, st.PerRank)
	}
	if err := s.Resume("a", []ResumeEpoch{{Num: 1}}); !errors.Is(err, ErrStarted) {
		t.Fatalf("Resume after a read = %v, want ErrStarted", err)
	}
	if _, end, _ := s.Next("a"); !end {
		t.Fatal("the resumed epoch did not end after what was left")
	}
	batch, _, _ = s.Next("a")
	if len(batch) != 5 {
		t.Fatalf("the epoch after the resumed one handed out %v, want all 5", batch)
	}
	if st, _ := s.Status("a"); st.Epoch != 4 || st.PerRank != 5 {
		t.Fatalf("status after the resumed epoch: epoch %d per_rank %d, want 4 5", st.Epoch, st.PerRank)
	}
}

// TestASnapshotHoldsWhatWasHandedOutNotWhatWasDrawnAhead.
func TestASnapshotHoldsWhatWasHandedOutNotWhatWasDrawnAhead(t *testing.T) {
	s, err := New(Options{Samples: 1000, Lease: -1, Lookahead: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterJob("a", JobConfig{BatchSize: 10, WorldSize: 2}); err != nil {
		t.Fatal(err)
	}
	handed := map[int]bool{}
	for range 3 {
		for r := range 2 {
			b, _, err := s.NextRank("a", r)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range b {
				handed[e] = true
			}
		}
	}
	sn, err := s.Snapshot("a")
	if err != nil {
		t.Fatal(err)
	}
	if !sn.Started || len(sn.Epochs) != 1 || sn.Epochs[0].Num != 1 || sn.Epochs[0].Count != 60 {
		t.Fatalf("snapshot %+v, want epoch 1 with 60 handed out", sn.Epochs)
	}
	for e := range 1000 {
		if has := sn.Epochs[0].Handed[e/64]&(1<<uint(e%64)) != 0; has != handed[e] {
			t.Fatalf("sample %d: in the snapshot %v, handed out %v", e, has, handed[e])
		}
	}
	if st, _ := s.Status("a"); st.Planned == 0 {
		t.Fatal("nothing drawn ahead: the test shows nothing")
	}
}

// TestAPausedRankIsNotLostUntilItsPauseEnds: a rank that says it reads
// nothing for a minute (a validation pass) outlives a lease of 10 s, and
// is lost once the minute and a lease have passed without a read; a pause
// longer than MaxPause is refused.
func TestAPausedRankIsNotLostUntilItsPauseEnds(t *testing.T) {
	clock := newClock()
	s, err := New(Options{Samples: 10000, Lease: 10 * time.Second, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterJob("a", JobConfig{BatchSize: 4, WorldSize: 2}); err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		if _, _, err := s.NextRank("a", r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Pause("a", 1, MaxPause+time.Second); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("a pause past MaxPause: %v, want ErrBadConfig", err)
	}
	if err := s.Pause("a", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	for range 7 { // 63 s of rank 0 reading, rank 1 paused
		clock.Advance(9 * time.Second)
		if _, _, err := s.NextRank("a", 0); err != nil {
			t.Fatal(err)
		}
		st, _ := s.RankStatus("a", 1)
		if st.Lost {
			t.Fatalf("rank 1 lost %v after its pause of a minute began", clock.Now().Sub(newClock().Now()))
		}
	}
	clock.Advance(8 * time.Second) // 71 s: the minute and a lease since the pause
	s.Reap()
	if st, _ := s.RankStatus("a", 1); !st.Lost || !st.PausedUntil.IsZero() {
		t.Fatalf("rank 1 after its pause and a lease: lost %v, paused until %v", st.Lost, st.PausedUntil)
	}
	// A read brings it back; a pause then a read ends the pause.
	if _, _, err := s.NextRank("a", 1); err != nil {
		t.Fatal(err)
	}
	s.Pause("a", 1, time.Hour)
	s.NextRank("a", 1)
	if st, _ := s.RankStatus("a", 1); !st.PausedUntil.IsZero() {
		t.Fatal("a read did not end the pause")
	}
}
