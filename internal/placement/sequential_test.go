package placement

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
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
			waitFor(t, "copies settled", func() bool { return e.p.Stats().Queued == 0 && e.p.cp.flights.Size() == 0 })
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

// A user's reader in path order is read ahead only over the files that
// user could open: a root-only file among the next ones stays uncopied (a
// fill has the same rule: fill_test.go). Found by make ci: a shuffled
// user's reads, then a fill, in path order, read a root-only file ahead.
func TestReadingAheadCopiesOnlyWhatTheReaderMayOpen(t *testing.T) {
	d := seqDataset(40)
	e := newEnv(t, d, oneTier(1<<30), Options{})
	secret := []string{"d/005", "d/009"}
	e.close()
	for _, p := range secret {
		if err := os.Chmod(filepath.Join(e.src, p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.open(true)
	ctx := WithCaller(context.Background(), 4321, 4321)
	for _, p := range []string{"d/000", "d/001", "d/002", "d/003"} {
		if _, err := e.p.ReadFile(ctx, e.entry(p)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "copies settled", func() bool { return e.p.Stats().Queued == 0 && e.p.cp.flights.Size() == 0 })
	if e.p.Stats().ReadAhead == 0 {
		t.Fatal("no copy read ahead of a reader in path order")
	}
	for _, p := range secret {
		if e.entry(p).Tier() >= 0 {
			t.Errorf("%s (mode 0600, root's) copied ahead of uid 4321", p)
		}
	}
	if e.entry("d/006").Tier() < 0 {
		t.Error("d/006, readable, not read ahead")
	}
}
