package placement

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

func seqDataset(n int) dataset {
	d := dataset{}
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("d/%03d", i)
		d[p] = content(p, 3000+i)
	}
	return d
}

// A reader that opens the files in path order is read ahead: the copies
// of the next files start before it asks, its opens join them, and the
// source still sees one open per file. A shuffled reader starts none.
func TestAReaderInPathOrderIsReadAhead(t *testing.T) {
	for _, shuffled := range []bool{false, true} {
		t.Run(fmt.Sprintf("shuffled=%v", shuffled), func(t *testing.T) {
			d := seqDataset(60)
			e := newEnv(t, d, oneTier(1<<30), Options{})
			order := d.Paths()
			if shuffled {
				rand.New(rand.NewPCG(7, 7)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			}
			for _, p := range order {
				got, err := e.p.ReadFile(context.Background(), e.entry(p))
				if err != nil || string(got) != string(d[p]) {
					t.Fatalf("%s: %d bytes, %v", p, len(got), err)
				}
			}
			waitFor(t, "copies settled", func() bool { return e.p.Stats().Queued == 0 && e.p.flights.Size() == 0 })
			st, ss := e.p.Stats(), e.source.Stats()
			if shuffled && st.ReadAhead != 0 {
				t.Errorf("a shuffled reader started %d copies ahead", st.ReadAhead)
			}
			if !shuffled && st.ReadAhead < int64(len(d))/2 {
				t.Errorf("a reader in path order started %d copies ahead of %d files", st.ReadAhead, len(d))
			}
			if ss.Opens != int64(len(d)) || ss.Bytes != d.Bytes() {
				t.Errorf("%d source opens and %d bytes, want one open and one read per file (%d, %d)", ss.Opens, ss.Bytes, len(d), d.Bytes())
			}
		})
	}
}
