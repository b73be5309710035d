package placement

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// shareRemote is a Sharer over a remote that holds every file: this node
// keeps the files of rank 0, takes the others in the order of their rank,
// and may drop a copy only of a file held elsewhere.
type shareRemote struct {
	*rangedRemote
	mu      sync.Mutex
	rank    map[string]int
	only    map[string]bool // held nowhere else
	holds   map[string]int
	dropped []string
}

func newShareRemote(d dataset) *shareRemote {
	return &shareRemote{
		rangedRemote: &rangedRemote{heldRemote: &heldRemote{data: d, copies: map[string]int{}}},
		rank:         map[string]int{}, only: map[string]bool{}, holds: map[string]int{},
	}
}

func (s *shareRemote) Keeps(k RemoteKey) bool { return s.Rank(k) == 0 }
func (s *shareRemote) Sharing() bool          { return true }

func (s *shareRemote) Rank(k RemoteKey) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rank[k.Path]
}

func (s *shareRemote) Holds(k RemoteKey) {
	s.mu.Lock()
	s.holds[k.Path]++
	s.mu.Unlock()
}

func (s *shareRemote) Dropped(k RemoteKey) {
	s.mu.Lock()
	s.dropped = append(s.dropped, k.Path)
	s.mu.Unlock()
}

func (s *shareRemote) HeldElsewhere(_ context.Context, k RemoteKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.only[k.Path]
}

// copyShare runs a share pass and waits for its copies.
func (e *env) copyShare() {
	e.t.Helper()
	if _, err := e.p.CopyShare(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	waitFor(e.t, "the pass's copies", func() bool { return e.p.Stats().Queued == 0 })
}

func (e *env) resident(paths ...string) (in []string) {
	for _, p := range paths {
		if e.entry(p).Tier() >= 0 {
			in = append(in, p)
		}
	}
	return in
}

// TestASharerKeepsItsShareFirstThenWhateverElseFits: a node's tier takes
// its share, then copies of files beyond it in the order of their rank
// while room lasts; when its share grows, copies beyond it that another
// node holds are dropped (the last to be needed first) to make room, and
// a copy held nowhere else is never dropped.
func TestASharerKeepsItsShareFirstThenWhateverElseFits(t *testing.T) {
	const n, size = 24, 10_000
	d := dataset{}
	var paths []string
	for i := range n {
		p := fmt.Sprintf("f/%02d", i)
		d[p] = content(p, size)
		paths = append(paths, p)
	}
	rem := newShareRemote(d)
	// Ranks: 0-5 kept here; 6-11 rank 1; 12-17 rank 2; 18-23 rank 3.
	for i, p := range paths {
		rem.rank[p] = i / 6
	}
	// Room for 12 files: the share (6), then 6 more.
	e := newEnv(t, d, oneTier(12*size), Options{Remote: rem})
	e.copyShare()
	if got := e.resident(paths[:6]...); len(got) != 6 {
		t.Fatalf("share: %d of 6 files resident", len(got))
	}
	if got := e.resident(paths[6:12]...); len(got) != 6 {
		t.Errorf("rank 1: %v resident, want all 6 (the room beyond the share, taken by rank)", got)
	}
	if got := e.resident(paths[12:]...); len(got) != 0 {
		t.Errorf("ranks 2-3: %v resident, want none (no room left)", got)
	}
	if due, _ := e.p.ShareStats(); due != 0 {
		t.Errorf("share_due_bytes %d after the pass, want 0", due)
	}
	// Beyond the share and with no room beyond it: a peer's request is
	// refused, the tier untouched.
	if err := e.p.FetchNow(remoteKey(e.entry(paths[20]), e.entry(paths[20]).Attr())); !errors.Is(err, ErrNoRoom) {
		t.Errorf("FetchNow of a file beyond the share with no room: %v, want ErrNoRoom", err)
	}

	// The share grows by ranks 2 and 3 (a node left): 12 more files with
	// room for none. Copies beyond the share held elsewhere make way,
	// except f/06, held only here.
	rem.mu.Lock()
	for _, p := range paths[12:] {
		rem.rank[p] = 0
	}
	rem.only[paths[6]] = true
	rem.mu.Unlock()
	e.copyShare()
	if got := e.resident(paths[6:12]...); !slices.Equal(got, paths[6:7]) {
		t.Errorf("after the share grew, beyond it: %v resident, want only %s (held nowhere else)", got, paths[6])
	}
	rem.mu.Lock()
	dropped := slices.Sorted(slices.Values(rem.dropped))
	rem.mu.Unlock()
	if !slices.Equal(dropped, paths[7:12]) {
		t.Errorf("dropped %v, want %v", dropped, paths[7:12])
	}
	if _, drops := e.p.ShareStats(); drops != 5 {
		t.Errorf("beyond_share_dropped %d, want 5", drops)
	}
	// 5 slots freed for 12 files: the original share stays, 5 of the new
	// share fit, the other 7 found no room.
	if got := e.resident(paths[:6]...); len(got) != 6 {
		t.Errorf("the first share: %d of 6 resident after the drops", len(got))
	}
	if got := e.resident(paths[12:]...); len(got) != 5 {
		t.Errorf("the new share: %v resident, want 5 (the room the drops made)", got)
	}
	if st := e.p.Stats(); st.SkippedNoSpace != 7 {
		t.Errorf("placements_skipped_nospace %d, want 7", st.SkippedNoSpace)
	}
	// Every byte read is the file's, wherever it is kept.
	for _, p := range paths {
		r, err := e.p.Open(context.Background(), e.entry(p))
		if err != nil {
			t.Fatal(err)
		}
		got := readInParts(t, r)
		r.Close()
		if string(got) != string(d[p]) {
			t.Fatalf("%s: wrong bytes", p)
		}
	}
}
