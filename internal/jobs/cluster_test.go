package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/sampler"
)

// fakeCluster is ClusterJobs in memory: internal/cluster/epochs.go's scripts
// (shape, run, per-epoch seen set and counts, the two-epochs check).
type fakeCluster struct {
	mu      sync.Mutex
	down    bool
	shape   map[string]string
	members map[string]int
	runs    int
	seen    map[string]map[int32]bool // run/ep
	got     map[string]int            // run/ep/rank
	ended   map[string]map[int]int    // run → rank → epoch
	lost    map[string]map[int]int    // run/ep → lost rank → final count
	done    map[string]map[int]int    // run/ep → rank whose count is final → it
	claims  int
	leaves  int
}

func newFakeCluster() *fakeCluster {
	return &fakeCluster{shape: map[string]string{}, members: map[string]int{}, seen: map[string]map[int32]bool{},
		got: map[string]int{}, ended: map[string]map[int]int{}, lost: map[string]map[int]int{}, done: map[string]map[int]int{}}
}

var errDown = errors.New("fake cluster down")

func (f *fakeCluster) Usable() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.down
}

func (f *fakeCluster) Join(_ context.Context, name, shape string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return "", errDown
	}
	if f.members[name] > 0 {
		if f.shape[name] != shape {
			return "", fmt.Errorf("%w: another shape", ErrInvalid)
		}
	} else {
		f.runs++
		f.shape[name] = shape
		f.ended["r"+strconv.Itoa(f.runs)] = map[int]int{}
	}
	f.members[name]++
	return "r" + strconv.Itoa(f.runs), nil
}

func (f *fakeCluster) Leave(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leaves++
	f.members[name]--
	return nil
}

func (f *fakeCluster) Claim(_ context.Context, name, run string, world int, check bool, q sampler.ClaimRequest) (sampler.ClaimAnswer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return sampler.ClaimAnswer{}, errDown
	}
	ep, rank := q.Epoch, q.Rank
	if check && world > 0 && ep >= 3 {
		for r := range world {
			if f.ended[run][r] < ep-2 {
				return sampler.ClaimAnswer{}, fmt.Errorf("%w: rank %d", ErrAhead, r)
			}
		}
	}
	k := run + "/" + strconv.Itoa(ep)
	if f.seen[k] == nil {
		f.seen[k] = map[int32]bool{}
	}
	quota := sampler.ClusterQuota(q.Share, world, rank, f.lost[k], f.done[k])
	gk := k + "/" + strconv.Itoa(rank)
	var out []int32
	ex := 0
	for _, c := range q.Cands {
		if f.got[gk]+q.Padded >= quota || len(out) >= q.Want {
			break
		}
		ex++
		if !f.seen[k][c] {
			f.seen[k][c] = true
			f.got[gk]++
			out = append(out, c)
		}
	}
	f.claims += len(out)
	if q.Probe && f.got[gk]+q.Padded >= quota {
		if f.done[k] == nil {
			f.done[k] = map[int]int{}
		}
		f.done[k][rank] = f.got[gk] + q.Padded
	}
	return sampler.ClaimAnswer{Granted: out, Examined: ex, Quota: quota, Losses: len(f.lost[k])}, nil
}

func (f *fakeCluster) Seen(_ context.Context, name, run string, ep int) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, errDown
	}
	var b []byte
	for c := range f.seen[run+"/"+strconv.Itoa(ep)] {
		for int(c)/8 >= len(b) {
			b = append(b, 0)
		}
		b[c/8] |= 0x80 >> uint(c%8)
	}
	return b, nil
}

func (f *fakeCluster) Seed(_ context.Context, name, run string, ep, world int, bitmap []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errDown
	}
	k := run + "/" + strconv.Itoa(ep)
	if f.seen[k] == nil {
		f.seen[k] = map[int32]bool{}
	}
	for i, c := range bitmap {
		for bit := range 8 {
			if c&(0x80>>uint(bit)) != 0 {
				f.seen[k][int32(i*8+bit)] = true
			}
		}
	}
	for r := range world {
		f.ended[run][r] = max(f.ended[run][r], ep-1)
	}
	return nil
}

func (f *fakeCluster) LoseRank(_ context.Context, name, run string, ep, rank int, returned []int32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errDown
	}
	k := run + "/" + strconv.Itoa(ep)
	if f.lost[k] == nil {
		f.lost[k] = map[int]int{}
	}
	if _, ok := f.lost[k][rank]; ok {
		return nil
	}
	if _, ok := f.done[k][rank]; ok {
		return nil
	}
	gk := k + "/" + strconv.Itoa(rank)
	for _, c := range returned {
		if f.seen[k][c] {
			delete(f.seen[k], c)
			f.got[gk]--
		}
	}
	f.lost[k][rank] = f.got[gk]
	return nil
}

func (f *fakeCluster) EndEpoch(_ context.Context, name, run string, ep, rank int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errDown
	}
	f.ended[run][rank] = max(f.ended[run][rank], ep)
	return nil
}

// clusterJob registers job "d" with doc on a new manager ("a node") over
// n files, sharing fc.
func clusterJob(t *testing.T, fc *fakeCluster, n int, doc string, o Options) *Manager {
	t.Helper()
	o.Cluster = fc
	m, _ := newManagerWith(t, n, o)
	if _, err := m.Register("d", nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Configure(jr(m, "d"), []byte(doc)); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestClusterJobIsRefusedWithoutACluster(t *testing.T) {
	m, _ := newManager(t, 10)
	if _, err := m.Register("d", nil); err != nil {
		t.Fatal(err)
	}
	err := m.Configure(jr(m, "d"), []byte("world_size=2\ncluster=true\n"))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "[cluster]") {
		t.Errorf("cluster=true on a mount without [cluster]: %v, want EINVAL naming [cluster]", err)
	}
}

func TestClusterJobRanksOnTwoNodesShareEachEpochExactlyOnce(t *testing.T) {
	for _, n := range []int{24, 23} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			fc := newFakeCluster()
			doc := "batch_size=4\nworld_size=2\ncluster=true\n"
			nodes := []*Manager{clusterJob(t, fc, n, doc, Options{}), clusterJob(t, fc, n, doc, Options{})}
			for ep := 1; ep <= 2; ep++ {
				shares := make([][]string, 2)
				var wg sync.WaitGroup
				for r := range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						shares[r] = rankEpoch(t, nodes[r], "d", r)
					}()
				}
				wg.Wait()
				quota := (n + 1) / 2
				count := map[string]int{}
				for r, sh := range shares {
					if len(sh) != quota {
						t.Errorf("epoch %d rank %d: %d paths, want %d", ep, r, len(sh), quota)
					}
					for _, p := range sh {
						count[p]++
					}
				}
				if len(count) != n {
					t.Errorf("epoch %d: %d distinct paths of %d", ep, len(count), n)
				}
				for p, k := range count {
					if k > 1 && n%2 == 0 {
						t.Errorf("epoch %d: %s went to %d ranks", ep, p, k)
					}
				}
			}
			b, err := nodes[0].Status(jr(nodes[0], "d"))
			st := parseStatus(t, b, err)
			if st["cluster"] != "true" || st["ranks_remote"] != "1" || st["claimed"] == "0" || st["claim_fallbacks"] != "0" {
				t.Errorf("status: cluster=%s ranks_remote=%s claimed=%s claim_fallbacks=%s", st["cluster"], st["ranks_remote"], st["claimed"], st["claim_fallbacks"])
			}
		})
	}
}

func TestClusterJobWithAnotherConfigOnAnotherNodeIsRefused(t *testing.T) {
	fc := newFakeCluster()
	clusterJob(t, fc, 10, "world_size=2\ncluster=true\n", Options{})
	m, _ := newManagerWith(t, 10, Options{Cluster: fc})
	m.Register("d", nil)
	if err := m.Configure(jr(m, "d"), []byte("world_size=2\nseed=5\ncluster=true\n")); !errors.Is(err, ErrInvalid) {
		t.Errorf("another config on a second node: %v, want EINVAL", err)
	}
}

func TestClusterJobLeavesTheClusterWhenItEnds(t *testing.T) {
	fc := newFakeCluster()
	m := clusterJob(t, fc, 10, "world_size=2\ncluster=true\n", Options{})
	if err := m.End("d"); err != nil {
		t.Fatal(err)
	}
	m.bg.Wait()
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.leaves != 1 || fc.members["d"] != 0 {
		t.Errorf("after the end: %d leaves, %d members, want 1 and 0", fc.leaves, fc.members["d"])
	}
}

func TestClusterJobReadsGoOnLocallyWhenTheClusterFails(t *testing.T) {
	fc := newFakeCluster()
	m := clusterJob(t, fc, 20, "batch_size=2\nworld_size=2\ncluster=true\n", Options{})
	fc.mu.Lock()
	fc.down = true
	fc.mu.Unlock()
	got := rankEpoch(t, m, "d", 0)
	if len(got) != 10 || len(slices.Compact(slices.Sorted(slices.Values(got)))) != 10 {
		t.Errorf("rank 0 with the cluster down: %d paths (%v), want its quota of 10 distinct", len(got), got)
	}
	if st := m.Stats(); st.ClaimFallbacks != 1 {
		t.Errorf("claim fallbacks %d, want 1", st.ClaimFallbacks)
	}
}

func TestClusterJobRankWaitsForAnotherNodeAtMostALease(t *testing.T) {
	fc := newFakeCluster()
	m := clusterJob(t, fc, 8, "batch_size=4\nworld_size=2\ncluster=true\n", Options{Lease: 400 * time.Millisecond})
	rankEpoch(t, m, "d", 0)
	rankEpoch(t, m, "d", 0)
	// Rank 1 (another node) never reads: epoch 3 waits for it, then goes
	// on without it.
	start := time.Now()
	b, end, err := m.NextRank(context.Background(), jr(m, "d"), 0)
	if err != nil || end || len(b) == 0 {
		t.Fatalf("epoch 3: %q end=%v err=%v", b, end, err)
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Errorf("epoch 3 started after %v, before rank 1 (two epochs behind) was given up", time.Since(start))
	}
	if st := m.Stats(); st.AheadTimeouts != 1 {
		t.Errorf("ahead timeouts %d, want 1", st.AheadTimeouts)
	}
}
