package jobs

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/sampler"
	"github.com/epochfs/epochfs/internal/status"
)

// rankEpoch reads one epoch of a rank.
func rankEpoch(t testing.TB, m *Manager, name string, rank int) []string {
	t.Helper()
	var out []string
	for i := 0; ; i++ {
		b, end, err := m.NextRank(context.Background(), jr(m, name), rank)
		if err != nil {
			t.Fatal(err)
		}
		if end {
			return out
		}
		out = append(out, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")...)
		if i > 10000 {
			t.Fatal("epoch does not end")
		}
	}
}

func statusOf(t testing.TB) func(d *status.Doc, err error) map[string]string {
	return func(d *status.Doc, err error) map[string]string { return parseStatus(t, d, err) }
}

func parseStatus(t testing.TB, d *status.Doc, err error) map[string]string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return d.Map()
}

func TestRanksShareEachEpochWithEqualCounts(t *testing.T) {
	m, paths := newManager(t, 23)
	if _, err := m.Register("d", nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Configure(jr(m, "d"), []byte("batch_size=4\nworld_size=3\nsampler=random\n")); err != nil {
		t.Fatal(err)
	}
	if in, _ := m.Lookup("d"); in.WorldSize != 3 {
		t.Fatalf("lookup: %+v", in)
	}
	if _, _, err := m.Next(context.Background(), jr(m, "d")); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "rank/R/next") {
		t.Fatalf("the job's own next with 3 ranks: %v, want ErrInvalid naming rank/R/next", err)
	}
	if _, _, err := m.NextRank(context.Background(), jr(m, "d"), 3); !errors.Is(err, ErrNoJob) || !errors.Is(err, sampler.ErrNoRank) {
		t.Fatalf("rank 3 of 3: %v, want ErrNoJob wrapping sampler.ErrNoRank", err)
	}
	for ep := 1; ep <= 2; ep++ {
		seen := map[string]int{}
		for r := range 3 {
			got := rankEpoch(t, m, "d", r)
			if len(got) != 8 { // ceil(23/3)
				t.Fatalf("epoch %d rank %d: %d paths, want 8", ep, r, len(got))
			}
			for _, p := range got {
				seen[p]++
			}
		}
		dups := 0
		for _, p := range paths {
			if seen[p] == 0 {
				t.Fatalf("epoch %d: %s not handed out", ep, p)
			}
			dups += seen[p] - 1
		}
		if dups != 1 { // 3·8 − 23
			t.Fatalf("epoch %d: %d padding samples, want 1", ep, dups)
		}
	}
	st := statusOf(t)(m.Status(jr(m, "d")))
	if st["world_size"] != "3" || st["per_rank"] != "8" || st["padded"] != "2" || st["ranks_lost"] != "none" || st["epoch"] != "2" {
		t.Fatalf("status %v", st)
	}
	rs := statusOf(t)(m.RankStatus(jr(m, "d"), 1))
	if rs["rank"] != "1" || rs["state"] != "ended" || rs["epoch"] != "2" || rs["quota"] != "8" || rs["position"] != "8" {
		t.Fatalf("rank status %v", rs)
	}
}

// TestAWaitingRankGoesOnWhenTheSlowestCatchesUp: a rank two epochs ahead
// waits in NextRank; it goes on once the slow rank has its share, and
// gives up with its context.
func TestAWaitingRankGoesOnWhenTheSlowestCatchesUp(t *testing.T) {
	m, _ := newManager(t, 8)
	if _, err := m.Register("d", nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Configure(jr(m, "d"), []byte("batch_size=2\nworld_size=2\n")); err != nil {
		t.Fatal(err)
	}
	rankEpoch(t, m, "d", 0)
	rankEpoch(t, m, "d", 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := m.NextRank(ctx, jr(m, "d"), 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("a rank two epochs ahead, its context ended: %v, want context.Canceled", err)
	}
	var wg sync.WaitGroup
	var got []byte
	var gerr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		got, _, gerr = m.NextRank(context.Background(), jr(m, "d"), 0)
	}()
	// Rank 1 reads its epoch 1; whenever the waiting rank runs, it must
	// not get a batch before rank 1 has its whole share.
	if b := rankEpoch(t, m, "d", 1); len(b) != 4 {
		t.Fatalf("rank 1: %d paths", len(b))
	}
	wg.Wait()
	if gerr != nil || strings.Count(string(got), "\n") != 2 {
		t.Fatalf("the waiting rank: %q %v", got, gerr)
	}
	if rs := statusOf(t)(m.RankStatus(jr(m, "d"), 0)); rs["epoch"] != "3" {
		t.Fatalf("rank 0 after waiting: %v", rs)
	}
}

// TestALostRankShowsInTheJobsStatus: a rank that stops reading is lost
// after the lease; the other finishes the epoch with every sample.
func TestALostRankShowsInTheJobsStatus(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	m, paths := newManagerWith(t, 12, Options{Now: clock, Lease: time.Minute})
	if _, err := m.Register("d", nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Configure(jr(m, "d"), []byte("batch_size=2\nworld_size=2\n")); err != nil {
		t.Fatal(err)
	}
	b0, _, _ := m.NextRank(context.Background(), jr(m, "d"), 0)
	b1, _, _ := m.NextRank(context.Background(), jr(m, "d"), 1)
	for range 3 {
		advance(25 * time.Second)
		if err := m.s.Touch(m.jobs["d"].key, 0); err != nil {
			t.Fatal(err)
		}
	}
	rest := rankEpoch(t, m, "d", 0)
	all := append(strings.Split(strings.TrimSpace(string(b0)+string(b1)), "\n"), rest...)
	if !sortedEqual(all, paths) {
		t.Fatalf("rank 1 lost: the epoch handed out %d paths, not the %d files once", len(all), len(paths))
	}
	st := statusOf(t)(m.Status(jr(m, "d")))
	if st["ranks_lost"] != "1" || st["rank_losses"] != "1" || st["ranks_live"] != "1" {
		t.Fatalf("status after rank 1 was lost: %v", st)
	}
	if rs := statusOf(t)(m.RankStatus(jr(m, "d"), 1)); rs["state"] != "lost" {
		t.Fatalf("rank 1: %v", rs)
	}
}
