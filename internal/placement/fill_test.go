package placement

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func fillDataset() dataset {
	d := dataset{}
	for i := 0; i < 30; i++ {
		p := fmt.Sprintf("train/c%d/%03d", i%3, i)
		d[p] = content(p, 2000+i)
		v := fmt.Sprintf("val/%03d", i)
		d[v] = content(v, 1000+i)
	}
	return d
}

func shuffledUnder(d dataset, dir string, seed uint64) []string {
	var out []string
	for _, p := range d.Paths() {
		if strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	rand.New(rand.NewPCG(seed, seed)).Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// residentUnder counts the files under dir that have a copy.
func (e *env) residentUnder(dir string) (resident, all int) {
	for _, p := range e.data.Paths() {
		if strings.HasPrefix(p, dir+"/") {
			all++
			if e.entry(p).Tier() >= 0 {
				resident++
			}
		}
	}
	return resident, all
}

// A reader that opens FillAfter files of a tree in no order has the rest
// of the smallest directory holding them copied in the background: train/
// (three class directories), not val/, until it reads val/ too. Every file
// is still opened at the source once.
func TestAReaderInNoOrderHasItsDirectoryFilled(t *testing.T) {
	d := fillDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{FillAfter: 8})
	ctx := context.Background()
	read := func(paths []string) {
		t.Helper()
		for _, p := range paths {
			got, err := e.p.ReadFile(ctx, e.entry(p))
			if err != nil || string(got) != string(d[p]) {
				t.Fatalf("%s: %d bytes, %v", p, len(got), err)
			}
		}
	}
	settled := func() bool { return e.p.Stats().Queued == 0 && e.p.cp.flights.Size() == 0 }
	train := shuffledUnder(d, "train", 3)
	read(train[:7])
	waitFor(t, "copies settled", settled)
	if st := e.p.Stats(); st.Fills != 0 {
		t.Fatalf("%d fills after 7 files, want none before 8", st.Fills)
	}
	read(train[7:8])
	waitFor(t, "train/ filled", func() bool { n, all := e.residentUnder("train"); return n == all && settled() })
	st := e.p.Stats()
	if st.Fills != 1 || st.FillQueued != int64(len(train)-8) {
		t.Errorf("fills %d, fill_copies %d; want 1 fill of the %d files not read", st.Fills, st.FillQueued, len(train)-8)
	}
	if n, _ := e.residentUnder("val"); n != 0 {
		t.Errorf("%d files of val/ copied; nothing of it was read", n)
	}
	// Reading the filled tree again counts nothing; val/ is filled in turn.
	read(train)
	val := shuffledUnder(d, "val", 5)
	read(val[:8])
	waitFor(t, "val/ filled", func() bool { n, all := e.residentUnder("val"); return n == all && settled() })
	if st := e.p.Stats(); st.Fills != 2 {
		t.Errorf("%d fills, want 2 (train/, then val/)", st.Fills)
	}
	if ss := e.source.Stats(); ss.Opens != int64(len(d)) {
		t.Errorf("%d source opens for %d files, want one each", ss.Opens, len(d))
	}
	e.checkAccounting()
}

// With fill_after 0 nothing but what is read is copied.
func TestFillAfterZeroCopiesOnlyWhatIsRead(t *testing.T) {
	d := fillDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{})
	train := shuffledUnder(d, "train", 3)
	for _, p := range train[:20] {
		if _, err := e.p.ReadFile(context.Background(), e.entry(p)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "copies settled", func() bool { return e.p.Stats().Queued == 0 && e.p.cp.flights.Size() == 0 })
	if n, _ := e.residentUnder("train"); n != 20 || e.p.Stats().Fills != 0 {
		t.Errorf("%d files resident and %d fills after 20 read with fill_after 0", n, e.p.Stats().Fills)
	}
}

// A fill started by a user's reads queues only the files that user could
// open: a root-only file in the tree stays uncopied until someone who may
// read it does.
func TestAFillQueuesOnlyWhatItsReaderMayOpen(t *testing.T) {
	d := fillDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{FillAfter: 4})
	secret := []string{"train/c0/000", "train/c1/013", "train/c2/029"}
	e.close()
	for _, p := range secret {
		if err := os.Chmod(filepath.Join(e.src, p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.open(true)
	ctx := WithCaller(context.Background(), 4321, 4321)
	var read int
	for _, p := range shuffledUnder(d, "train", 9) {
		if strings.HasSuffix(p, "000") || strings.HasSuffix(p, "013") || strings.HasSuffix(p, "029") {
			continue
		}
		if _, err := e.p.ReadFile(ctx, e.entry(p)); err != nil {
			t.Fatal(err)
		}
		if read++; read == 4 {
			break
		}
	}
	waitFor(t, "train/ filled", func() bool {
		n, all := e.residentUnder("train")
		return n == all-len(secret) && e.p.Stats().Queued == 0 && e.p.cp.flights.Size() == 0
	})
	for _, p := range secret {
		if e.entry(p).Tier() >= 0 {
			t.Errorf("%s (mode 0600, root's) copied by a fill of uid 4321", p)
		}
	}
	if st := e.p.Stats(); st.Fills != 1 {
		t.Errorf("%d fills, want 1", st.Fills)
	}
}

func TestCommonDir(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"a/b", "a/b", "a/b"}, {"a/b", "a/c", "a"}, {"a/b/c", "a/b", "a/b"}, {"a", "b", ""},
		{"", "a/b", ""}, {"ab/c", "a/c", ""}, {"a/bc", "a/b", "a"}, {"a/b", "a/b/c/d", "a/b"},
	} {
		if got := commonDir(c.a, c.b); got != c.want {
			t.Errorf("commonDir(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
	if under("ab", "a") || !under("a/b", "a") || !under("x", "") {
		t.Error("under: a prefix that is not a directory counts")
	}
}
