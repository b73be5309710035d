package sampler

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The DDP workload: jobs of several ranks read at different speeds, start
// late, die (stop reading until their lease runs out) and come back, while
// other jobs share the buffer. A model that knows only what each rank was
// handed checks torch's DistributedSampler contract for every epoch.

type ddpRank struct {
	cur     int // the epoch it is in, as it saw it (1 before its first read)
	ended   bool
	dead    bool // the workload stopped it
	lost    bool // its lease ran out (the sampler lost it)
	speed   int
	started bool
}

type ddpEpoch struct {
	got     [][]int // per rank, in order
	lossy   bool    // a rank was lost in it or when it began: counts may differ
	dropped bool    // a lost rank's rest had no live rank to take it over
	checked bool
}

type ddpJob struct {
	w        int
	dropLast bool
	subset   []int // nil: all
	inSub    map[int]bool
	m, share int
	batch    int
	ranks    []*ddpRank
	epochs   map[int]*ddpEpoch
	// rejoined: a lost rank came back; its old epochs end at once for it,
	// so the model no longer knows who is behind.
	rejoined bool
}

type ddpWorkload struct {
	t        testing.TB
	c        chooser
	clk      *fakeClock
	s        *Sampler
	n        int
	resident []bool
	jobs     map[string]*ddpJob
	names    int
	inflight []int
	held     map[int]bool
	lease    time.Duration
	closed   int // epochs checked
	padded   int // epochs checked that needed padding
	lossy    int // epochs checked with a lost rank
}

func newDDPWorkload(t testing.TB, c chooser) *ddpWorkload {
	w := &ddpWorkload{t: t, c: c, clk: newClock(), jobs: map[string]*ddpJob{}, held: map[int]bool{}, lease: time.Minute}
	w.n = 1 + c.IntN(200)
	w.resident = make([]bool, w.n)
	frac := c.IntN(4)
	for i := range w.resident {
		w.resident[i] = c.IntN(4) < frac
	}
	var err error
	w.s, err = New(Options{
		Samples: w.n, Residency: ResidencyFunc(func(i int) bool { return w.resident[i] }),
		BufferSlots: c.IntN(30), Lookahead: 1 + c.IntN(3), Lease: w.lease, Now: w.clk.Now,
		Seed: uint64(c.IntN(1000)), NoDSA: c.IntN(4) == 0, NoSubstitution: c.IntN(8) == 0,
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *ddpWorkload) epoch(j *ddpJob, num int) *ddpEpoch {
	ep := j.epochs[num]
	if ep == nil {
		ep = &ddpEpoch{got: make([][]int, j.w)}
		j.epochs[num] = ep
	}
	return ep
}

func (w *ddpWorkload) register() {
	name := fmt.Sprintf("job%d", w.names)
	w.names++
	cfg := JobConfig{BatchSize: 1 + w.c.IntN(9), Seed: uint64(w.c.IntN(5)), Kind: Kind(w.c.IntN(3)),
		WorldSize: 1 + w.c.IntN(6), DropLast: w.c.IntN(2) == 0}
	if w.c.IntN(3) == 0 {
		a := w.c.IntN(w.n)
		for i := a; i < a+1+w.c.IntN(w.n-a); i++ {
			cfg.Subset = append(cfg.Subset, i)
		}
	}
	j := &ddpJob{w: cfg.WorldSize, dropLast: cfg.DropLast, batch: cfg.BatchSize, epochs: map[int]*ddpEpoch{}}
	if cfg.Subset != nil && len(cfg.Subset) < w.n {
		j.subset, j.inSub = cfg.Subset, map[int]bool{}
		for _, i := range cfg.Subset {
			j.inSub[i] = true
		}
	}
	j.m = w.n
	if j.subset != nil {
		j.m = len(j.subset)
	}
	err := w.s.RegisterJob(name, cfg)
	switch {
	case errors.Is(err, ErrTooManyJobs):
		return
	case cfg.DropLast && j.m < j.w:
		if !errors.Is(err, ErrBadConfig) {
			w.t.Fatalf("drop_last with %d samples over %d ranks: %v, want ErrBadConfig", j.m, j.w, err)
		}
		return
	case err != nil:
		w.t.Fatalf("register %s: %v", name, err)
	}
	j.share = (j.m + j.w - 1) / j.w
	if j.dropLast {
		j.share = j.m / j.w
	}
	for range j.w {
		j.ranks = append(j.ranks, &ddpRank{cur: 1, speed: 1 + w.c.IntN(4)})
	}
	w.jobs[name] = j
	w.epoch(j, 1)
}

// behind reports whether rank k of j keeps epoch x-1 from completing: it is
// live and has not had its quota of an epoch before x.
func (w *ddpWorkload) behind(name string, j *ddpJob, k int, x int) bool {
	r := j.ranks[k]
	if r.lost || r.cur >= x {
		return false
	}
	if r.cur < x-1 {
		return true
	}
	st, err := w.s.RankStatus(name, k)
	if err != nil {
		w.t.Fatal(err)
	}
	return len(j.epochs[r.cur].got[k]) < st.Quota
}

func (w *ddpWorkload) read(name string, k int) {
	j := w.jobs[name]
	r := j.ranks[k]
	batch, end, err := w.s.NextRank(name, k)
	if errors.Is(err, ErrRankAhead) {
		if !r.ended || !j.rejoined && !slices.ContainsFunc(rangeN(j.w), func(o int) bool { return w.behind(name, j, o, r.cur) }) {
			w.t.Fatalf("%s rank %d: ErrRankAhead in epoch %d (ended %v) with no live rank behind", name, k, r.cur, r.ended)
		}
		return
	}
	if err != nil {
		w.t.Fatalf("%s rank %d: %v", name, k, err)
	}
	if r.lost {
		// It rejoins: what it lost ends for it at once.
		r.lost, r.dead = false, false
		j.rejoined = true
		for x := r.cur; j.epochs[x] != nil; x++ {
			j.epochs[x].lossy = true
		}
	}
	r.started = true
	if r.ended {
		for o := range j.w {
			if o != k && !j.rejoined && w.behind(name, j, o, r.cur) {
				w.t.Fatalf("%s rank %d started epoch %d while rank %d is behind (in %d)", name, k, r.cur+1, o, j.ranks[o].cur)
			}
		}
		r.cur++
		r.ended = false
		if j.epochs[r.cur] == nil {
			ep := w.epoch(j, r.cur)
			for _, o := range j.ranks {
				ep.lossy = ep.lossy || o.lost
			}
		}
	}
	ep := j.epochs[r.cur]
	if end {
		r.ended = true
		if !ep.lossy && len(ep.got[k]) != j.share {
			w.t.Fatalf("%s rank %d: epoch %d ended after %d samples, want %d", name, k, r.cur, len(ep.got[k]), j.share)
		}
		w.closeEpochs(name, j)
		return
	}
	if len(batch) == 0 || len(batch) > j.batch {
		w.t.Fatalf("%s rank %d: batch of %d (batch size %d)", name, k, len(batch), j.batch)
	}
	for _, e := range batch {
		if e < 0 || e >= w.n || j.inSub != nil && !j.inSub[e] {
			w.t.Fatalf("%s rank %d: sample %d not in its subset", name, k, e)
		}
		if !w.resident[e] && !w.held[e] && !slices.Contains(w.inflight, e) && w.c.IntN(2) == 0 && w.s.Installed(e) {
			w.held[e] = true // a demand read offered to the buffer
		}
	}
	ep.got[k] = append(ep.got[k], batch...)
	if !ep.lossy && len(ep.got[k]) > j.share {
		w.t.Fatalf("%s rank %d: %d samples in epoch %d, share %d", name, k, len(ep.got[k]), r.cur, j.share)
	}
}

// closeEpochs checks every epoch that no rank still reads from.
func (w *ddpWorkload) closeEpochs(name string, j *ddpJob) {
	for x, ep := range j.epochs {
		if ep.checked {
			continue
		}
		open := false
		for _, r := range j.ranks {
			if !r.lost && (r.cur < x || r.cur == x && !r.ended) {
				open = true
			}
		}
		if open {
			continue
		}
		ep.checked = true
		w.closed++
		total, seen := 0, map[int]bool{}
		for _, g := range ep.got {
			total += len(g)
			for _, e := range g {
				seen[e] = true
			}
		}
		distinct := len(seen)
		if total > distinct {
			w.padded++
		}
		if ep.lossy {
			w.lossy++
		}
		want := j.share * j.w
		switch {
		case j.dropLast && distinct != total:
			w.t.Fatalf("%s epoch %d: drop_last, yet %d samples handed out, %d distinct", name, x, total, distinct)
		case ep.dropped:
			if total > want {
				w.t.Fatalf("%s epoch %d: %d samples handed out, more than %d", name, x, total, want)
			}
		case total != want || distinct != min(want, j.m):
			w.t.Fatalf("%s epoch %d (lossy %v): %d handed out, %d distinct; want %d and %d of the subset's %d",
				name, x, ep.lossy, total, distinct, want, min(want, j.m), j.m)
		}
	}
}

// passTime lets every lease but the live ranks' run out.
func (w *ddpWorkload) passTime() {
	touch := func() {
		for name, j := range w.jobs {
			for k, r := range j.ranks {
				if !r.dead && !r.lost {
					if err := w.s.Touch(name, k); err != nil {
						w.t.Fatal(err)
					}
				}
			}
		}
	}
	touch()
	w.clk.Advance(w.lease / 2)
	touch()
	w.clk.Advance(w.lease / 2)
	touch()
	w.clk.Advance(w.lease - time.Second)
	w.s.Reap()
	live := w.s.Jobs()
	for name, j := range w.jobs {
		var dying []*ddpRank
		alive := 0
		for _, r := range j.ranks {
			switch {
			case r.dead && !r.lost:
				dying = append(dying, r)
			case !r.dead && !r.lost:
				alive++
			}
		}
		if alive == 0 {
			if slices.Contains(live, name) {
				w.t.Fatalf("%s: every rank dead, the job not dropped", name)
			}
			if _, _, err := w.s.NextRank(name, 0); !errors.Is(err, ErrLeaseExpired) {
				w.t.Fatalf("next of expired job %s: %v", name, err)
			}
			delete(w.jobs, name)
			continue
		}
		if !slices.Contains(live, name) {
			w.t.Fatalf("%s dropped with %d live ranks", name, alive)
		}
		for _, d := range dying {
			d.lost = true
		}
		for _, d := range dying {
			// The epochs it had a share of: its own unless it ended it,
			// and those other ranks started. Who may take over.
			for x := d.cur; j.epochs[x] != nil; x++ {
				ep := j.epochs[x]
				if x == d.cur && d.ended {
					continue
				}
				ep.lossy = true
				taker := false
				for _, r := range j.ranks {
					if !r.lost && (r.cur == x && !r.ended || r.cur < x) {
						taker = true
					}
				}
				if !taker {
					ep.dropped = true
				}
			}
		}
		w.closeEpochs(name, j)
	}
}

func (w *ddpWorkload) step() {
	names := w.s.Jobs()
	slices.Sort(names)
	switch op := w.c.IntN(24); {
	case op == 0 || len(names) == 0:
		w.register()
	case op == 1 && w.c.IntN(4) == 0:
		name := names[w.c.IntN(len(names))]
		if err := w.s.EndJob(name); err != nil {
			w.t.Fatal(err)
		}
		delete(w.jobs, name)
	case op == 2:
		// A rank dies.
		j := w.jobs[names[w.c.IntN(len(names))]]
		r := j.ranks[w.c.IntN(j.w)]
		if !r.lost {
			r.dead = true
		}
	case op == 3:
		w.passTime()
	case op == 4:
		// A lost rank comes back.
		name := names[w.c.IntN(len(names))]
		j := w.jobs[name]
		if k := w.c.IntN(j.w); j.ranks[k].lost {
			w.read(name, k)
		}
	case op < 8:
		for _, e := range w.s.Prefetch(1 + w.c.IntN(8)) {
			if w.resident[e] || w.held[e] || slices.Contains(w.inflight, e) {
				w.t.Fatalf("prefetch of resident, held or in-flight sample %d", e)
			}
			w.inflight = append(w.inflight, e)
		}
	case op < 10 && len(w.inflight) > 0:
		k := w.c.IntN(len(w.inflight))
		e := w.inflight[k]
		w.inflight = slices.Delete(w.inflight, k, k+1)
		if w.c.IntN(6) == 0 {
			w.s.Failed(e)
		} else if w.s.Installed(e) {
			w.held[e] = true
		}
	case op == 10:
		w.resident[w.c.IntN(w.n)] = true
	default:
		// A live rank reads; faster ranks more often. A rank that has
		// not started yet may start late (a join).
		type pick struct {
			name string
			k    int
		}
		var picks []pick
		for _, n := range names {
			for k, r := range w.jobs[n].ranks {
				if r.dead || r.lost || !r.started && w.c.IntN(3) == 0 {
					continue
				}
				for range r.speed {
					picks = append(picks, pick{n, k})
				}
			}
		}
		if len(picks) > 0 {
			p := picks[w.c.IntN(len(picks))]
			w.read(p.name, p.k)
		}
	}
	for _, e := range w.s.Releases(nil) {
		if !w.held[e] {
			w.t.Fatalf("release of sample %d the buffer does not hold", e)
		}
		delete(w.held, e)
	}
	if err := w.s.check(); err != nil {
		w.t.Fatal(err)
	}
}

func rangeN(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestEveryEpochCoversTheSubsetOnceAcrossRanksWithEqualCounts: for random
// N, world sizes, drop_last, speeds, late starts, rank deaths and returns:
// each rank of an epoch without a loss gets exactly its share (ceil or
// floor of M/W), the shares are disjoint apart from padding (with
// drop_last: no sample twice), and together they are the subset (the share
// times W of it with drop_last); after a loss, the survivors still cover
// the subset unless nobody was left in that epoch; and no rank starts an
// epoch while a live rank has not finished the one before its own.
func TestEveryEpochCoversTheSubsetOnceAcrossRanksWithEqualCounts(t *testing.T) {
	runs := 200
	if testing.Short() || raceEnabled {
		runs = 50
	}
	closed, padded, lossy := 0, 0, 0
	for seed := range runs {
		c := &rngChooser{r: rand.New(rand.NewPCG(uint64(seed), 15)), steps: 1500}
		w := newDDPWorkload(t, c)
		for !c.Done() {
			w.step()
		}
		closed, padded, lossy = closed+w.closed, padded+w.padded, lossy+w.lossy
	}
	// The property must have been exercised: epochs of every kind closed.
	if closed < 5*runs || padded < runs/2 || lossy < runs/2 {
		t.Fatalf("only %d epochs checked (%d padded, %d with a lost rank) in %d runs", closed, padded, lossy, runs)
	}
	t.Logf("%d runs: %d epochs checked, %d padded, %d with a lost rank", runs, closed, padded, lossy)
}

func FuzzDDPWorkload(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte("\x30\x00\x05\x01\x03\x00\x20\x20\x20\x20\x20\x20\x20\x02\x00\x00\x03\x20\x20\x20\x20\x20"))
	f.Add(make([]byte, 300))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &byteChooser{b: b}
		w := newDDPWorkload(t, c)
		for steps := 0; !c.Done() && steps < 2000; steps++ {
			w.step()
		}
	})
}

// epochOf reads one epoch of every rank in turn (round robin, a batch
// each) and returns each rank's samples.
func epochOf(t *testing.T, s *Sampler, name string, w int) [][]int {
	t.Helper()
	out := make([][]int, w)
	done := make([]bool, w)
	for left := w; left > 0; {
		for r := range w {
			if done[r] {
				continue
			}
			b, end, err := s.NextRank(name, r)
			if err != nil {
				t.Fatal(err)
			}
			if end {
				done[r] = true
				left--
			}
			out[r] = append(out[r], b...)
		}
	}
	return out
}

// torchShares is torch's DistributedSampler(shuffle=False) over subset.
func torchShares(subset []int, w int, dropLast bool) [][]int {
	n := len(subset)
	per := (n + w - 1) / w
	if dropLast && n%w != 0 {
		per = (n - w + w - 1) / w
	}
	total := per * w
	idx := slices.Clone(subset)
	for len(idx) < total {
		idx = append(idx, subset[len(idx)%n])
	}
	idx = idx[:total]
	out := make([][]int, w)
	for r := range w {
		for i := r; i < total; i += w {
			out[r] = append(out[r], idx[i])
		}
	}
	return out
}

func TestSequentialRanksGetTorchsDistributedSamplerOrder(t *testing.T) {
	for _, c := range []struct {
		n, w     int
		dropLast bool
	}{{10, 3, false}, {10, 3, true}, {12, 4, false}, {3, 8, false}, {7, 7, true}, {1, 2, false}, {100, 8, false}} {
		s, _ := New(Options{Samples: c.n + 5, Lookahead: 2})
		subset := rangeSubset(5, 5+c.n)
		if err := s.RegisterJob("j", JobConfig{BatchSize: 2, Kind: KindSequential, Subset: subset, WorldSize: c.w, DropLast: c.dropLast}); err != nil {
			t.Fatal(err)
		}
		want := torchShares(subset, c.w, c.dropLast)
		for range 2 {
			if got := epochOf(t, s, "j", c.w); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("N=%d W=%d drop_last=%v: ranks got %v, torch gives %v", c.n, c.w, c.dropLast, got, want)
			}
		}
	}
}

func TestDropLastLeavesADifferentRemainderEachEpoch(t *testing.T) {
	s, _ := New(Options{Samples: 10})
	if err := s.RegisterJob("j", JobConfig{BatchSize: 4, Kind: KindRandom, WorldSize: 3, DropLast: true}); err != nil {
		t.Fatal(err)
	}
	left := map[int]bool{}
	for range 20 {
		seen := map[int]bool{}
		for r, share := range epochOf(t, s, "j", 3) {
			if len(share) != 3 {
				t.Fatalf("rank %d got %d samples, want floor(10/3) = 3", r, len(share))
			}
			for _, e := range share {
				if seen[e] {
					t.Fatalf("sample %d twice", e)
				}
				seen[e] = true
			}
		}
		for e := range 10 {
			if !seen[e] {
				left[e] = true
			}
		}
	}
	if len(left) < 5 {
		t.Fatalf("over 20 epochs the remainder was only %v", left)
	}
	if err := s.RegisterJob("k", JobConfig{BatchSize: 1, WorldSize: 11, DropLast: true}); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("drop_last with 10 samples over 11 ranks: %v, want ErrBadConfig", err)
	}
	if err := s.RegisterJob("k", JobConfig{BatchSize: 1, WorldSize: MaxWorldSize + 1}); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("world size %d: %v, want ErrBadConfig", MaxWorldSize+1, err)
	}
}

// A rank that ends its epoch may start the next while another is still in
// the first; not a third: it waits (ErrRankAhead, lease renewed) until the
// slow rank is through.
func TestARankWaitsRatherThanRunTwoEpochsAhead(t *testing.T) {
	clk := newClock()
	s, _ := New(Options{Samples: 8, Lease: time.Minute, Now: clk.Now})
	if err := s.RegisterJob("j", JobConfig{BatchSize: 2, WorldSize: 2}); err != nil {
		t.Fatal(err)
	}
	read := func(r int) ([]int, bool, error) { return s.NextRank("j", r) }
	for ep := 1; ep <= 2; ep++ {
		for range 2 {
			if b, _, err := read(0); err != nil || len(b) != 2 {
				t.Fatalf("rank 0, epoch %d: %v %v", ep, b, err)
			}
		}
		if _, end, err := read(0); err != nil || !end {
			t.Fatalf("rank 0, end of epoch %d: %v %v", ep, end, err)
		}
	}
	for range 3 {
		clk.Advance(40 * time.Second) // longer than the lease in all
		if _, _, err := read(0); !errors.Is(err, ErrRankAhead) {
			t.Fatalf("rank 0 starting epoch 3 with rank 1 in epoch 1: %v, want ErrRankAhead", err)
		}
		s.Touch("j", 1)
	}
	if st, _ := s.Status("j"); len(st.Lost) != 0 || st.Epoch != 1 {
		t.Fatalf("status %+v: rank 0 waited, nobody is lost, the slowest is in epoch 1", st)
	}
	b1, _, _ := read(1)
	if _, _, err := read(0); !errors.Is(err, ErrRankAhead) {
		t.Fatalf("rank 1 half through epoch 1: %v", err)
	}
	b2, end, _ := read(1)
	if end || len(b1)+len(b2) != 4 {
		t.Fatalf("rank 1's epoch 1: %v %v %v", b1, b2, end)
	}
	// Rank 1 has its share of epoch 1 (it has not read the end yet).
	if b, _, err := read(0); err != nil || len(b) != 2 {
		t.Fatalf("rank 0 after rank 1 finished epoch 1: %v %v", b, err)
	}
	if st, _ := s.RankStatus("j", 0); st.Epoch != 3 || st.Position != 2 {
		t.Fatalf("rank 0: %+v", st)
	}
}

// A rank that stops reading is lost after the lease: what it had planned
// and had yet to get goes to the other ranks, whose epoch still covers the
// subset, and the status names it.
func TestALostRanksShareGoesToTheLiveRanks(t *testing.T) {
	clk := newClock()
	s, _ := New(Options{Samples: 21, Lease: time.Minute, Now: clk.Now, BufferSlots: 4})
	if err := s.RegisterJob("j", JobConfig{BatchSize: 3, WorldSize: 3}); err != nil {
		t.Fatal(err)
	}
	got := map[int]int{}
	for r := range 3 {
		b, _, _ := s.NextRank("j", r)
		for _, e := range b {
			got[e]++
		}
	}
	s.Prefetch(4) // rank 2's window is planned, maybe prefetched
	for range 3 {
		clk.Advance(25 * time.Second)
		s.Touch("j", 0)
		s.Touch("j", 1)
	}
	st, _ := s.Status("j")
	if !slices.Equal(st.Lost, []int{2}) || st.RanksLost != 1 || st.RanksLive != 2 {
		t.Fatalf("status after rank 2 stopped: %+v", st)
	}
	counts := [2]int{}
	for r := range 2 {
		for {
			b, end, err := s.NextRank("j", r)
			if err != nil {
				t.Fatal(err)
			}
			if end {
				break
			}
			counts[r] += len(b)
			for _, e := range b {
				got[e]++
			}
		}
	}
	for e := range 21 {
		if got[e] != 1 {
			t.Fatalf("sample %d handed out %d times in the epoch with a lost rank (counts %v)", e, got[e], counts)
		}
	}
	if counts[0]+3 < counts[1] || counts[1]+3 < counts[0] {
		t.Fatalf("the survivors' counts %v differ by more than one batch", counts)
	}
	// The lost rank comes back: its epoch is over; it gets a share of the
	// next epoch created.
	if _, end, err := s.NextRank("j", 2); err != nil || !end {
		t.Fatalf("the lost rank's read: end %v, %v", end, err)
	}
	if st, _ := s.Status("j"); len(st.Lost) != 0 {
		t.Fatalf("rank 2 read again; still lost: %+v", st)
	}
	if b, _, err := s.NextRank("j", 2); err != nil || len(b) != 3 {
		t.Fatalf("rank 2's next epoch: %v %v", b, err)
	}
	if rs, _ := s.RankStatus("j", 2); rs.Quota != 7 || rs.Epoch != 2 || rs.Rejoined != 1 || rs.Losses != 1 {
		t.Fatalf("rank 2 in epoch 2: %+v", rs)
	}
}

// A job that reads only its views (no rank's next) stays alive: TouchJob
// renews every local rank's lease; without it the job is dropped.
func TestTouchJobKeepsEveryRankOfAJobAlive(t *testing.T) {
	clk := newClock()
	s, _ := New(Options{Samples: 12, Lease: time.Minute, Now: clk.Now})
	for _, name := range []string{"viewer", "idle"} {
		if err := s.RegisterJob(name, JobConfig{BatchSize: 3, WorldSize: 2}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		clk.Advance(25 * time.Second)
		if err := s.TouchJob("viewer"); err != nil {
			t.Fatalf("TouchJob: %v", err)
		}
	}
	if st, err := s.Status("viewer"); err != nil || st.RanksLive != 2 || len(st.Lost) != 0 {
		t.Errorf("a job touched by its views after 100 s (lease 60 s): %+v, %v; want both ranks live", st, err)
	}
	if _, err := s.Status("idle"); err == nil {
		t.Error("a job nobody read for 100 s (lease 60 s) is still there: the test shows nothing")
	}
	if err := s.TouchJob("nope"); err == nil {
		t.Error("TouchJob of an unknown job: no error")
	}
}
