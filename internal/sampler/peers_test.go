package sampler

import (
	"sync"
	"testing"
	"time"
)

// split is a node's view of a dataset split between nodes: it holds the
// samples i with i%nodes == node, a peer holds the others.
type split struct{ node, nodes int }

func (s split) Resident(i int) bool { return i%s.nodes == s.node }
func (s split) PeerHeld(i int) bool { return i%s.nodes != s.node }

// A cluster job over a dataset split between three nodes: each epoch every
// sample is read once, and with ODS most samples a rank reads are its own
// node's; each epoch's reads are counted by where they were.
func TestClusterJobOverPeersReadsItsOwnNodesSamplesFirstAndCountsWhere(t *testing.T) {
	const n, w, epochs = 3000, 3, 3
	local := map[Kind]float64{}
	for _, kind := range []Kind{KindRandom, KindODS} {
		fc := newFakeCluster(w)
		var nodes []*Sampler
		for node := range w {
			s, err := New(Options{Samples: n, BufferSlots: 8, Lease: time.Hour, Residency: split{node, w}})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.RegisterJob("j", JobConfig{BatchSize: 16, Seed: 9, Kind: kind, WorldSize: w,
				Claimer: fakeClaimer{c: fc, node: node}}); err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, s)
		}
		var ownRead, all int
		for ep := 1; ep <= epochs; ep++ {
			shares := make([][]int, w)
			var wg sync.WaitGroup
			for r := range w {
				wg.Add(1)
				go func() {
					defer wg.Done()
					shares[r] = readEpoch(t, nodes[r], r)
				}()
			}
			wg.Wait()
			checkEpoch(t, kind.String(), shares, n, w, false)
			for r, sh := range shares {
				for _, e := range sh {
					all++
					if e%w == r {
						ownRead++
					}
				}
			}
		}
		local[kind] = float64(ownRead) / float64(all)
		// The status agrees with what was read, epoch by epoch.
		for r, s := range nodes {
			st, err := s.Status("j")
			if err != nil {
				t.Fatal(err)
			}
			if len(st.EpochReads) != epochs {
				t.Fatalf("%s node %d: %d epochs counted, want %d", kind, r, len(st.EpochReads), epochs)
			}
			for i, er := range st.EpochReads {
				if er.Epoch != i+1 || er.Source != 0 || er.Local+er.Peer != perRank(n, w, false) {
					t.Errorf("%s node %d epoch %d: %+v; want local+peer = %d, source 0", kind, r, i+1, er, perRank(n, w, false))
				}
			}
			if st.PeerReads+st.ResidentReads+st.BufferReads != epochs*perRank(n, w, false) || st.SourceReads != 0 {
				t.Errorf("%s node %d: resident %d buffer %d peer %d source %d", kind, r, st.ResidentReads, st.BufferReads, st.PeerReads, st.SourceReads)
			}
		}
	}
	t.Logf("share of samples read on the node that holds them: random %.3f, ods %.3f", local[KindRandom], local[KindODS])
	if local[KindRandom] > 0.4 {
		t.Errorf("random draws read %.3f locally; a third expected", local[KindRandom])
	}
	if local[KindODS] < 0.8 {
		t.Errorf("ODS read %.3f of its samples on the node that holds them, want at least 0.8", local[KindODS])
	}
}
