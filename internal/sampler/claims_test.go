package sampler

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeCluster is the claim script of internal/cluster/epochs.go in memory: per
// epoch a seen set and per-rank counts, shared by the nodes' claimers.
type fakeCluster struct {
	mu    sync.Mutex
	seen  map[int]map[int32]bool
	got   map[[2]int]int
	fin   map[int]int         // rank → last epoch ended
	lost  map[int]map[int]int // epoch → lost rank → its final count
	done  map[int]map[int]int // epoch → rank whose count is final → it
	world int
	fail  func() bool // claims fail while it says so
	calls int
	// proposed[node][epoch]: samples each node was told were elsewhere.
	away map[[2]int]map[int32]bool
	bad  []string // proposals of a sample known to be elsewhere
}

func newFakeCluster(world int) *fakeCluster {
	return &fakeCluster{seen: map[int]map[int32]bool{}, got: map[[2]int]int{}, fin: map[int]int{},
		lost: map[int]map[int]int{}, done: map[int]map[int]int{}, world: world, away: map[[2]int]map[int32]bool{}}
}

type fakeClaimer struct {
	c    *fakeCluster
	node int
}

var errFakeDown = errors.New("fake cluster down")

func (f fakeClaimer) Claim(q ClaimRequest) (ClaimAnswer, error) {
	ep, rank, share, want, cands := q.Epoch, q.Rank, q.Share, q.Want, q.Cands
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.fail != nil && c.fail() {
		return ClaimAnswer{}, errFakeDown
	}
	if ep >= 3 {
		for r := range c.world {
			if c.fin[r] < ep-2 {
				return ClaimAnswer{}, fmt.Errorf("rank %d in epoch %d: %w", r, c.fin[r]+1, ErrRankAhead)
			}
		}
	}
	if c.seen[ep] == nil {
		c.seen[ep] = map[int32]bool{}
	}
	away := c.away[[2]int{f.node, ep}]
	if away == nil {
		away = map[int32]bool{}
		c.away[[2]int{f.node, ep}] = away
	}
	k := [2]int{ep, rank}
	quota := ClusterQuota(share, c.world, rank, c.lost[ep], c.done[ep])
	var out []int32
	ex := 0
	for _, l := range cands {
		if c.got[k]+q.Padded >= quota || len(out) >= want {
			break
		}
		if away[l] {
			c.bad = append(c.bad, fmt.Sprintf("node %d epoch %d proposed %d again", f.node, ep, l))
		}
		ex++
		if c.seen[ep][l] {
			away[l] = true
			continue
		}
		c.seen[ep][l] = true
		c.got[k]++
		out = append(out, l)
	}
	if q.Probe && c.got[k]+q.Padded >= quota {
		if c.done[ep] == nil {
			c.done[ep] = map[int]int{}
		}
		c.done[ep][rank] = c.got[k] + q.Padded
	}
	return ClaimAnswer{Granted: out, Examined: ex, Quota: quota, Losses: len(c.lost[ep])}, nil
}

func (f fakeClaimer) Ended(ep, rank int) {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	f.c.fin[rank] = max(f.c.fin[rank], ep)
}

func (f fakeClaimer) Lost(ep, rank int, returned []int32) {
	c := f.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost[ep] == nil {
		c.lost[ep] = map[int]int{}
	}
	if _, ok := c.lost[ep][rank]; ok {
		return
	}
	if _, ok := c.done[ep][rank]; ok {
		return // its count was final: nothing of it is left
	}
	k := [2]int{ep, rank}
	for _, l := range returned {
		if c.seen[ep][l] {
			delete(c.seen[ep], l)
			c.got[k]--
		}
	}
	c.lost[ep][rank] = c.got[k]
	// Every node may propose what it was told was elsewhere again.
	for key := range c.away {
		if key[1] == ep {
			delete(c.away, key)
		}
	}
}

// clusterNodes registers job "j" on one sampler per node, each with its
// own residency, all claiming through c.
func clusterNodes(t *testing.T, c *fakeCluster, n, nodes int, cfg JobConfig, resident func(node, i int) bool) []*Sampler {
	t.Helper()
	var out []*Sampler
	for node := range nodes {
		s, err := New(Options{Samples: n, BufferSlots: 8, Lease: time.Hour,
			Residency: ResidencyFunc(func(i int) bool { return resident != nil && resident(node, i) })})
		if err != nil {
			t.Fatal(err)
		}
		cfg := cfg
		cfg.Claimer = fakeClaimer{c: c, node: node}
		if err := s.RegisterJob("j", cfg); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// readEpoch reads rank r's next epoch on s until its end, retrying while
// it must wait.
func readEpoch(t *testing.T, s *Sampler, r int) []int {
	t.Helper()
	var out []int
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, end, err := s.NextRank("j", r)
		if errors.Is(err, ErrRankAhead) || errors.Is(err, ErrClaimPending) {
			if time.Now().After(deadline) {
				t.Errorf("rank %d waited 20 s", r)
				return out
			}
			time.Sleep(100 * time.Microsecond)
			continue
		}
		if err != nil {
			t.Error(err)
			return out
		}
		if end {
			return out
		}
		out = append(out, b...)
	}
}

// checkEpoch: every rank got its quota, the shares are disjoint apart from
// padding, and their union is the subset (all of it without drop_last).
func checkEpoch(t *testing.T, what string, shares [][]int, m, w int, dropLast bool) {
	t.Helper()
	q := perRank(m, w, dropLast)
	count := map[int]int{}
	for r, sh := range shares {
		if len(sh) != q {
			t.Errorf("%s: rank %d got %d samples, want %d", what, r, len(sh), q)
		}
		for _, e := range sh {
			count[e]++
		}
	}
	dups := 0
	for e, k := range count {
		if e < 0 || e >= m {
			t.Errorf("%s: sample %d outside the subset", what, e)
		}
		dups += k - 1
	}
	wantDistinct := m
	if dropLast {
		wantDistinct = q * w
	}
	if len(count) != wantDistinct || dups != q*w-wantDistinct {
		t.Errorf("%s: %d distinct samples and %d repeats, want %d and %d (padding)", what, len(count), dups, wantDistinct, q*w-wantDistinct)
	}
}

func TestClusterRanksOnSeveralNodesGetDisjointSharesCoveringTheSubset(t *testing.T) {
	for _, kind := range Kinds() {
		for _, c := range []struct {
			n, w, batch int
			dropLast    bool
		}{{200, 2, 8, false}, {201, 2, 8, false}, {103, 3, 4, false}, {103, 3, 4, true}, {5, 3, 2, false}} {
			name := fmt.Sprintf("%s/n=%d/w=%d/drop_last=%v", kind, c.n, c.w, c.dropLast)
			t.Run(name, func(t *testing.T) {
				fc := newFakeCluster(c.w)
				nodes := clusterNodes(t, fc, c.n, c.w, JobConfig{BatchSize: c.batch, Seed: 3, Kind: kind,
					WorldSize: c.w, DropLast: c.dropLast}, func(node, i int) bool { return i%c.w == node })
				for ep := 1; ep <= 3; ep++ {
					shares := make([][]int, c.w)
					var wg sync.WaitGroup
					for r := range c.w {
						wg.Add(1)
						go func() {
							defer wg.Done()
							shares[r] = readEpoch(t, nodes[r], r)
						}()
					}
					wg.Wait()
					checkEpoch(t, fmt.Sprintf("epoch %d", ep), shares, c.n, c.w, c.dropLast)
				}
				for _, s := range nodes {
					if err := s.check(); err != nil {
						t.Error(err)
					}
					st, _ := s.Status("j")
					if !st.Cluster || st.RanksRemote != c.w-1 || st.RanksLive != 1 || st.ClaimFallbacks != 0 {
						t.Errorf("status: cluster=%v remote=%d live=%d fallbacks=%d, want true, %d, 1, 0",
							st.Cluster, st.RanksRemote, st.RanksLive, st.ClaimFallbacks, c.w-1)
					}
				}
				if len(fc.bad) > 0 {
					t.Errorf("samples known to be elsewhere were proposed again: %v", fc.bad[:min(3, len(fc.bad))])
				}
			})
		}
	}
}

func TestClusterSequentialRanksGetTorchsOrderAcrossNodes(t *testing.T) {
	const n, w = 10, 3
	fc := newFakeCluster(w)
	nodes := clusterNodes(t, fc, n, w, JobConfig{BatchSize: 2, Kind: KindSequential, WorldSize: w}, nil)
	want := torchShares(slices.Collect(func(yield func(int) bool) {
		for i := range n {
			if !yield(i) {
				return
			}
		}
	}), w, false)
	for r := range w {
		if got := readEpoch(t, nodes[r], r); !slices.Equal(got, want[r]) {
			t.Errorf("rank %d: %v, want torch's %v", r, got, want[r])
		}
	}
}

func TestClusterNodesClaimTheirResidentSamplesFirst(t *testing.T) {
	const n, w = 2000, 2
	fc := newFakeCluster(w)
	// Node 0 holds the first half, node 1 the second.
	nodes := clusterNodes(t, fc, n, w, JobConfig{BatchSize: 16, Seed: 1, WorldSize: w},
		func(node, i int) bool { return i/(n/2) == node })
	// The ranks read in turn, a batch each, so neither is ahead.
	shares := make([][]int, w)
	for done := 0; done < w; {
		done = 0
		for r := range w {
			b, end, err := nodes[r].NextRank("j", r)
			if err != nil {
				t.Fatal(err)
			}
			if end || len(shares[r]) == n/w {
				done++
			}
			shares[r] = append(shares[r], b...)
		}
	}
	checkEpoch(t, "epoch 1", shares, n, w, false)
	for r := range w {
		local := 0
		for _, e := range shares[r] {
			if e/(n/2) == r {
				local++
			}
		}
		// Drawn uniformly, half would be local.
		if local < len(shares[r])*9/10 {
			t.Errorf("rank %d: %d of its %d samples were resident on its node, want at least 90%%", r, local, len(shares[r]))
		}
	}
}

func TestClusterClaimFailureFallsBackToLocalDrawsAndIsCounted(t *testing.T) {
	const n, w = 300, 2
	fc := newFakeCluster(w)
	down := false
	fc.fail = func() bool { return down }
	nodes := clusterNodes(t, fc, n, w, JobConfig{BatchSize: 10, WorldSize: w}, nil)
	// A few batches through the cluster, then it fails.
	for range 3 {
		if _, _, err := nodes[0].NextRank("j", 0); err != nil {
			t.Fatal(err)
		}
	}
	fc.mu.Lock()
	down = true
	fc.mu.Unlock()
	got := readEpoch(t, nodes[0], 0)
	if len(got)+30 != perRank(n, w, false) {
		t.Errorf("rank 0 got %d samples after the failure, want %d", len(got), perRank(n, w, false)-30)
	}
	if dup := len(got) - len(slices.Compact(slices.Sorted(slices.Values(got)))); dup != 0 {
		t.Errorf("%d samples repeated in the fallback epoch", dup)
	}
	st, _ := nodes[0].Status("j")
	if st.ClaimFallbacks != 1 {
		t.Errorf("claim_fallbacks=%d, want 1", st.ClaimFallbacks)
	}
	// The next epoch claims again once the cluster is back.
	fc.mu.Lock()
	down = false
	before := fc.calls
	fc.mu.Unlock()
	readEpoch(t, nodes[0], 0)
	if fc.calls == before {
		t.Error("no claim in the epoch after the cluster came back")
	}
}

func TestClusterRankOfAnotherNodeIsNeverLostHere(t *testing.T) {
	clk := newClock()
	fc := newFakeCluster(2)
	s, err := New(Options{Samples: 100, Lease: time.Minute, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterJob("j", JobConfig{BatchSize: 5, WorldSize: 2, Claimer: fakeClaimer{c: fc}}); err != nil {
		t.Fatal(err)
	}
	total := 0
	for {
		clk.Advance(20 * time.Second) // rank 1 never reads here: 3 leases pass
		b, end, err := s.NextRank("j", 0)
		if err != nil {
			t.Fatal(err)
		}
		if end {
			break
		}
		total += len(b)
	}
	st, _ := s.Status("j")
	if total != 50 || st.RanksLost != 0 || len(st.Lost) != 0 || st.RanksRemote != 1 {
		t.Errorf("rank 0 got %d (want its quota 50), rank losses %d, lost %v, remote %d (want 1)", total, st.RanksLost, st.Lost, st.RanksRemote)
	}
	// Rank 1 reads here after all: it gets its own share.
	if got := readEpoch(t, s, 1); len(got) != 50 {
		t.Errorf("rank 1 arriving late got %d samples, want 50", len(got))
	}
}

func TestClusterRankWaitsRatherThanStartAThirdEpochBeforeOtherNodes(t *testing.T) {
	const n, w = 40, 2
	fc := newFakeCluster(w)
	nodes := clusterNodes(t, fc, n, w, JobConfig{BatchSize: 40, WorldSize: w}, nil)
	readEpoch(t, nodes[0], 0)
	readEpoch(t, nodes[0], 0)
	if _, _, err := nodes[0].NextRank("j", 0); !errors.Is(err, ErrRankAhead) {
		t.Fatalf("rank 0 started epoch 3 with rank 1 (another node) in epoch 1: %v", err)
	}
	readEpoch(t, nodes[1], 1) // rank 1 ends epoch 1
	if b, _, err := nodes[0].NextRank("j", 0); err != nil || len(b) != n/w {
		t.Errorf("rank 0 after rank 1 ended epoch 1: %d samples, %v", len(b), err)
	}
}

// TestClusterALostRanksShareIsTakenOverOnEveryNode: ranks 0 and 1 read on
// node A, 2 and 3 on node B; rank 1 stops after two batches and is lost
// on A (its lease); A tells the cluster, which shares what rank 1 had not
// read, and the samples it was granted and never handed, over ranks 0, 2
// and 3: the epoch still holds every sample once (padding aside), B's
// ranks took over part of it, and the next epoch is whole with rank 1
// back.
func TestClusterALostRanksShareIsTakenOverOnEveryNode(t *testing.T) {
	for _, kind := range Kinds() {
		t.Run(kind.String(), func(t *testing.T) {
			const n, w, lease = 97, 4, 10 * time.Second
			clock := newClock()
			fc := newFakeCluster(w)
			var nodes []*Sampler
			for node := range 2 {
				s, err := New(Options{Samples: n, BufferSlots: 8, Lease: lease, Now: clock.Now})
				if err != nil {
					t.Fatal(err)
				}
				if err := s.RegisterJob("j", JobConfig{BatchSize: 4, Seed: 2, Kind: kind, WorldSize: w,
					Claimer: fakeClaimer{c: fc, node: node}}); err != nil {
					t.Fatal(err)
				}
				nodes = append(nodes, s)
			}
			on := func(r int) *Sampler { return nodes[r/2] }
			shares := make([][]int, w)
			ended := make([]bool, w)
			read := func(r int) {
				b, end, err := on(r).NextRank("j", r)
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
				ended[r] = ended[r] || end
				shares[r] = append(shares[r], b...)
				if err := on(r).check(); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				for r := range w {
					read(r)
				}
			}
			// Rank 1 stops; the others read on, each within the lease.
			for range 4 {
				clock.Advance(lease / 3)
				for _, r := range []int{0, 2, 3} {
					read(r)
				}
			}
			nodes[0].Reap() // rank 1 is lost on A: A tells the cluster
			if st, _ := nodes[0].RankStatus("j", 1); !st.Lost {
				t.Fatal("rank 1 is not lost")
			}
			for guard := 0; !ended[0] || !ended[2] || !ended[3]; guard++ {
				if guard > 1000 {
					t.Fatal("the epoch does not end")
				}
				for _, r := range []int{0, 2, 3} {
					if !ended[r] {
						read(r)
					}
				}
			}
			count := map[int]int{}
			total := 0
			for _, sh := range shares {
				for _, e := range sh {
					count[e]++
					total++
				}
			}
			padded := 0
			for _, s := range nodes {
				st, _ := s.Status("j")
				padded += st.Padded
			}
			if len(count) != n || total-n != padded {
				t.Fatalf("epoch 1: %d of %d samples handed out, %d repeats, %d padding", len(count), n, total-n, padded)
			}
			if st, _ := nodes[1].Status("j"); st.TakenOver == 0 || st.Dropped != 0 {
				t.Fatalf("node B took over %d samples and dropped %d: want some taken over, none dropped", st.TakenOver, st.Dropped)
			}
			if len(shares[2]) == len(shares[1]) {
				t.Fatalf("counts %d %d %d %d: rank 1's share was not shared out", len(shares[0]), len(shares[1]), len(shares[2]), len(shares[3]))
			}
			// Rank 1 reads again: the epoch it lost ends for it at once,
			// and it gets its share of epoch 2.
			if b, end, err := on(1).NextRank("j", 1); err != nil || !end || len(b) != 0 {
				t.Fatalf("rank 1 back: %v %v %v, want the end of its lost epoch", b, end, err)
			}
			next := make([][]int, w)
			for r := range w {
				next[r] = readEpoch(t, on(r), r)
			}
			checkEpoch(t, "epoch 2", next, n, w, false)
		})
	}
}
