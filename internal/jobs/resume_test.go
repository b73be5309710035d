package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/epochfs/epochfs/internal/ctlpath"
)

// readBatch reads one batch of a rank: its paths, or nil at the epoch's end.
func readBatch(t testing.TB, m *Manager, name string, rank int) []string {
	t.Helper()
	b, end, err := m.NextRank(context.Background(), jr(m, name), rank)
	if err != nil {
		t.Fatal(err)
	}
	if end {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func configure(t testing.TB, m *Manager, name, doc string) {
	t.Helper()
	if _, err := m.Register(name, nil); err != nil && !errors.Is(err, ErrExists) {
		t.Fatal(err)
	}
	if err := m.Configure(jr(m, name), []byte(doc)); err != nil {
		t.Fatal(err)
	}
}

// TestAStateResumesTheEpochOnAnotherMountWithAnotherWorldSize: a job of 2
// ranks is interrupted mid-epoch; its state, with the last batch given
// back as unread, resumes on a manager over another copy of the same files
// with 3 ranks: across both, every file comes once, apart from torch's
// padding, the next epoch is whole, and the state is unchanged by
// reading it.
func TestAStateResumesTheEpochOnAnotherMountWithAnotherWorldSize(t *testing.T) {
	a, paths := newManager(t, 101)
	configure(t, a, "r", "batch_size=4\nseed=3\nworld_size=2\n")
	var seen []string
	for range 5 {
		seen = append(seen, readBatch(t, a, "r", 0)...)
		seen = append(seen, readBatch(t, a, "r", 1)...)
	}
	unread := readBatch(t, a, "r", 1) // read ahead and never used
	state, err := a.State(jr(a, "r"))
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := a.State(jr(a, "r")); !bytes.Equal(again, state) {
		t.Fatal("two reads of a state differ")
	}
	doc := bytes.Clone(state)
	for _, p := range unread {
		doc = append(doc, "unread "+ctlpath.Quote(p)+"\n"...)
	}

	b := newManagerOf(t, paths, nil)
	configure(t, b, "r2", "batch_size=5\nseed=3\nworld_size=3\n")
	if err := b.Resume(jr(b, "r2"), doc); err != nil {
		t.Fatal(err)
	}
	st := statusOf(t)(b.Status(jr(b, "r2")))
	left := 101 - len(seen)
	if st["epoch"] != "0" || st["per_rank"] != fmt.Sprint((left+2)/3) {
		t.Fatalf("resumed status: epoch %s per_rank %s, want 0 (no read yet) and %d", st["epoch"], st["per_rank"], (left+2)/3)
	}
	var rest []string
	counts := make([]int, 3)
	for r := range 3 {
		got := rankEpoch(t, b, "r2", r)
		counts[r] = len(got)
		rest = append(rest, got...)
	}
	if counts[0] != counts[1] || counts[1] != counts[2] {
		t.Fatalf("resumed ranks got %v samples: want equal counts", counts)
	}
	all := map[string]int{}
	for _, p := range append(seen, rest...) {
		all[p]++
	}
	repeats := 0
	for _, p := range paths {
		if all[p] == 0 {
			t.Fatalf("%s never handed out in the interrupted epoch", p)
		}
		repeats += all[p] - 1
	}
	if pad := 3*counts[0] - left; repeats != pad {
		t.Fatalf("%d repeats across the runs, want torch's padding %d", repeats, pad)
	}
	if st := statusOf(t)(b.Status(jr(b, "r2"))); st["epoch"] != "1" || st["resumed"] != fmt.Sprint(len(seen)) {
		t.Fatalf("status: epoch %s resumed %s, want 1 and %d", st["epoch"], st["resumed"], len(seen))
	}
	var next []string
	for r := range 3 {
		next = append(next, rankEpoch(t, b, "r2", r)...)
	}
	if len(next) != 102 || !subsetOf(paths, next) {
		t.Fatalf("the epoch after the resumed one has %d samples, want 101 and one padding", len(next))
	}
}

func subsetOf(want, got []string) bool {
	in := map[string]bool{}
	for _, p := range got {
		in[p] = true
	}
	for _, p := range want {
		if !in[p] {
			return false
		}
	}
	return true
}

// TestABadStateIsRefusedAndChangesNothing: forged, truncated, of another
// dataset, subset or seed, or written after the first read: EINVAL, the
// reason named, the job as it was.
func TestABadStateIsRefusedAndChangesNothing(t *testing.T) {
	a, paths := newManager(t, 40)
	configure(t, a, "r", "batch_size=4\nseed=3\n")
	readBatch(t, a, "r", 0)
	state, err := a.State(jr(a, "r"))
	if err != nil {
		t.Fatal(err)
	}
	other := newManagerOf(t, append(paths[:39:39], "c9/extra.jpg"), nil)
	forged := bytes.Replace(state, []byte("handed=4"), []byte("handed=3"), 1)
	bad := map[string]struct {
		doc  []byte
		want string
	}{
		"forged":    {forged, "check does not match"},
		"truncated": {state[:len(state)/2], "no check line"},
		"empty":     {nil, "no check line"},
		"trailing":  {append(bytes.Clone(state), "junk\n"...), "only unread PATH lines"},
		"unread":    {append(bytes.Clone(state), "unread c0/none.jpg\n"...), "not a sample of the job"},
		"twice":     {append(bytes.Clone(state), "unread c0/img000.jpg\nunread c0/img000.jpg\n"...), "given back twice"},
	}
	b := newManagerOf(t, paths, nil)
	for name, c := range bad {
		configure(t, b, "x", "batch_size=4\nseed=3\n")
		err := b.Resume(jr(b, "x"), c.doc)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Resume = %v, want ErrInvalid naming %q", name, err, c.want)
		}
		if got := len(epochOf(t, b, "x")); got != 40 {
			t.Errorf("%s: after the refusal the job's epoch has %d samples, want all 40", name, got)
		}
	}
	configure(t, b, "x", "batch_size=4\nseed=4\n")
	if err := b.Resume(jr(b, "x"), state); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "seed=3") {
		t.Errorf("another seed: Resume = %v, want ErrInvalid naming the seed", err)
	}
	configure(t, b, "x", "batch_size=4\nseed=3\nsubset=c0\n")
	if err := b.Resume(jr(b, "x"), state); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "another dataset or subset") {
		t.Errorf("another subset: Resume = %v, want ErrInvalid", err)
	} else if !regexp.MustCompile(`job "x" has [1-9][0-9]* \(`).MatchString(err.Error()) {
		t.Errorf("another subset: %v: the message does not give the job's own count of samples", err)
	}
	configure(t, other, "x", "batch_size=4\nseed=3\n")
	if err := other.Resume(jr(other, "x"), state); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "another dataset or subset") {
		t.Errorf("another dataset: Resume = %v, want ErrInvalid", err)
	}
	configure(t, b, "x", "batch_size=4\nseed=3\n")
	readBatch(t, b, "x", 0)
	if err := b.Resume(jr(b, "x"), state); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "has read already") {
		t.Errorf("after a read: Resume = %v, want ErrInvalid", err)
	}
}

// epochOf reads the rest of the job's epoch.
func epochOf(t testing.TB, m *Manager, name string) []string { return epoch(t, m, name) }

// TestTheStateOfFilesARefreshAddedFollowsPathOrder: the state names
// samples by their place in path order, whatever their numbers: a catalog
// that numbered an added file last and one that walked it in place agree.
func TestPathCompareIsTheWalksOrder(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"a/x", "ab/y", -1},
		{"a-c", "a/b", 1}, // the directory a is listed before the file a-c
		{"a/b", "a/b", 0},
		{"a/b/c", "a/bc", -1},
		{"z", "a/b", 1},
	} {
		if got := pathCompare(c.a, c.b); got != c.want && (got < 0) != (c.want < 0) {
			t.Errorf("pathCompare(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// FuzzParseState: any document parses or is refused with ErrInvalid,
// never a panic; what parses formats back to a document that parses the
// same.
func FuzzParseState(f *testing.F) {
	m, _ := newManager(f, 30)
	configure(f, m, "r", "batch_size=4\nseed=3\nworld_size=2\n")
	readBatch(f, m, "r", 0)
	readBatch(f, m, "r", 1)
	state, err := m.State(jr(m, "r"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(state, false)
	f.Add(state, true)
	f.Add(append(bytes.Clone(state), "unread c0/img000.jpg\n"...), false)
	f.Add([]byte("epochfs-state 1\ncheck 00000000\n"), true)
	f.Fuzz(func(t *testing.T, doc []byte, sign bool) {
		if sign {
			// The fuzzer cannot forge a checksum: this checks the lines
			// the checksum covers as a forger who computes it would.
			body, _, _ := bytes.Cut(doc, []byte("check "))
			doc = fmt.Appendf(bytes.Clone(body), "check %08x\n", crc32.Checksum(body, castagnoli))
		}
		d, err := parseState(doc)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		again, err := d.format()
		if err != nil {
			t.Fatal(err)
		}
		d2, err := parseState(again)
		if err != nil {
			t.Fatalf("a parsed state formats to one that does not parse: %v", err)
		}
		if d2.Samples != d.Samples || d2.Hash != d.Hash || len(d2.Epochs) != len(d.Epochs) {
			t.Fatal("the state changed in a round trip")
		}
		for i := range d.Epochs {
			if !d.Epochs[i].Set.Equals(d2.Epochs[i].Set) {
				t.Fatal("an epoch's set changed in a round trip")
			}
		}
	})
}

// mergeStates is what the Python DistributedSampler does with the state
// documents of a cluster job's nodes: the first one's, with the unread
// lines of every one.
func mergeStates(docs ...[]byte) []byte {
	i := bytes.Index(docs[0], []byte("\ncheck "))
	end := i + 1 + bytes.IndexByte(docs[0][i+1:], '\n') + 1
	out := bytes.Clone(docs[0][:end])
	for _, d := range docs {
		for _, l := range strings.SplitAfter(string(d), "\n") {
			if strings.HasPrefix(l, "unread ") {
				out = append(out, l...)
			}
		}
	}
	return out
}

// TestAClusterJobResumesOnOtherNodesWithAnotherWorldSize: a cluster job
// of 2 ranks (rank 0 on node A, rank 1 on node B) is interrupted; the
// documents of its nodes, merged, resume a cluster job of 3 ranks on two
// other nodes (ranks 0 and 1 on C, 2 on D): every sample of the epoch
// comes once across both runs, apart from padding.
func TestAClusterJobResumesOnOtherNodesWithAnotherWorldSize(t *testing.T) {
	fc := newFakeCluster()
	const n = 61
	node := func(job, doc string) *Manager {
		m, _ := newManagerWith(t, n, Options{Cluster: fc})
		configure(t, m, job, doc)
		return m
	}
	a := node("old", "batch_size=3\nseed=4\nworld_size=2\ncluster=true\n")
	b := node("old", "batch_size=3\nseed=4\nworld_size=2\ncluster=true\n")
	var seen []string
	for range 4 {
		seen = append(seen, readBatch(t, a, "old", 0)...)
		seen = append(seen, readBatch(t, b, "old", 1)...)
	}
	sa, err := a.State(jr(a, "old"))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.State(jr(b, "old"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(sa, []byte("\nunread ")) || !bytes.Contains(sb, []byte("\nunread ")) {
		t.Fatal("no node's state gives back what its ranks drew ahead: the test shows nothing")
	}
	doc := mergeStates(sa, sb)
	c := node("new", "batch_size=2\nseed=4\nworld_size=3\ncluster=true\n")
	d := node("new", "batch_size=2\nseed=4\nworld_size=3\ncluster=true\n")
	for _, m := range []*Manager{c, d} {
		if err := m.Resume(jr(m, "new"), doc); err != nil {
			t.Fatal(err)
		}
	}
	// The ranks read at once, as a job's do (a rank that first reads on
	// a node after the node's other ranks completed the epoch is dealt
	// into the next one).
	shares := make([][]string, 3)
	for r, m := range []*Manager{c, c, d} {
		shares[r] = readBatch(t, m, "new", r) // every rank in the epoch first
	}
	var wg sync.WaitGroup
	for r, m := range []*Manager{c, c, d} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shares[r] = append(shares[r], rankEpoch(t, m, "new", r)...)
		}()
	}
	wg.Wait()
	var rest []string
	counts := make([]int, 3)
	for r, sh := range shares {
		counts[r] = len(sh)
		rest = append(rest, sh...)
	}
	left := n - len(seen)
	if want := (left + 2) / 3; counts[0] != want || counts[1] != want || counts[2] != want {
		t.Fatalf("resumed ranks got %v, want %d each", counts, want)
	}
	count := map[string]int{}
	for _, p := range append(seen, rest...) {
		count[p]++
	}
	if len(count) != n {
		t.Fatalf("%d of %d samples handed out across the runs", len(count), n)
	}
	repeats := len(seen) + len(rest) - n
	if pad := 3*counts[0] - left; repeats != pad {
		t.Fatalf("%d repeats, want the padding %d", repeats, pad)
	}
}
