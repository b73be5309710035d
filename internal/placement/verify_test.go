package placement

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/tier"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// gate is a tier Statfs hook that blocks every reservation until opened:
// the placer's workers then cannot copy, and a test sees what New did
// before any copy.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func newGate(t testing.TB) *gate {
	g := &gate{ch: make(chan struct{})}
	t.Cleanup(g.open) // a failed test must not leave workers blocked
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

func (g *gate) statfs(string) (uint64, uint64, error) {
	<-g.ch
	return 1 << 50, 1 << 51, nil
}

// storedTier reads the tier name the catalog's stored record of p gives.
func storedTier(t testing.TB, c *catalog.Catalog, p string) string {
	t.Helper()
	tier, err := c.StoredTier(p)
	if err != nil {
		t.Fatal(err)
	}
	return tier
}

func TestNewForgetsMissingAndWrongSizeCopiesAndPlacesThemAgain(t *testing.T) {
	d := sizedDataset()
	// Two tiers in use: mem takes half of the dataset.
	e := newEnv(t, d, []tier.Options{{Name: "mem", Quota: d.Bytes() / 2}, {Name: "nvme", Quota: 1 << 30}}, Options{})
	e.p.warmups.queueAll()
	e.waitResident()
	if e.tiers[0].Files() == 0 || e.tiers[1].Files() == 0 {
		t.Fatalf("test setup: tiers hold %d and %d files; want both in use", e.tiers[0].Files(), e.tiers[1].Files())
	}
	copyOf := func(p string) string { return e.tiers[e.entry(p).Tier()].Path(p) }
	missing := []string{"val/mib+1", "z/small-00", "empty"}
	wrong := []string{"train/b/img-2.jpg", "big/two.tar"}
	lost := append(append([]string{}, missing...), wrong...)
	var lostBytes int64
	for _, p := range lost {
		lostBytes += int64(len(d[p]))
	}
	var missingNames, wrongNames []string
	for _, p := range missing {
		missingNames = append(missingNames, copyOf(p))
	}
	for _, p := range wrong {
		wrongNames = append(wrongNames, copyOf(p))
	}
	e.close()
	for _, name := range missingNames {
		if err := os.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	for i, name := range wrongNames {
		// One copy shorter, one longer than the record.
		if err := os.Truncate(name, int64(len(d[wrong[i]])+2*i-1)); err != nil {
			t.Fatal(err)
		}
	}

	// Reopen with copies held back until the test has looked.
	g := newGate(t)
	for i := range e.topts {
		e.topts[i].Statfs = g.statfs
	}
	e.open(false)
	st := e.p.Stats()
	if st.CopiesCheckedAtMount != int64(len(d)) || st.CopiesMissingAtMount != int64(len(missing)) || st.CopiesWrongSizeAtMount != int64(len(wrong)) {
		t.Errorf("check at mount: checked %d missing %d wrong size %d; want %d %d %d", st.CopiesCheckedAtMount,
			st.CopiesMissingAtMount, st.CopiesWrongSizeAtMount, len(d), len(missing), len(wrong))
	}
	files, bytes := e.p.residency()
	if files != int64(len(d)-len(lost)) || bytes != d.Bytes()-lostBytes {
		t.Errorf("resident after the check: %d files %d bytes; want %d %d", files, bytes, len(d)-len(lost), d.Bytes()-lostBytes)
	}
	e.checkAccounting() // the tiers account only the good copies
	for _, p := range lost {
		if e.entry(p).Tier() != -1 {
			t.Errorf("%s: still recorded in tier %d", p, e.entry(p).Tier())
		}
		if got := storedTier(t, e.cat, p); got != "" {
			t.Errorf("%s: the stored record still names tier %q", p, got)
		}
	}
	for _, name := range wrongNames {
		if _, err := os.Lstat(name); !os.IsNotExist(err) {
			t.Errorf("wrong-size copy %s not removed: %v", name, err)
		}
	}
	// The lost files are queued through warmup.
	if w := e.p.warmups.progressAll(); w.Files != int64(len(lost)) || w.Done != 0 || w.BytesTotal != lostBytes {
		t.Errorf("warmup after the check: %+v; want %d files, none done, %d bytes", w, len(lost), lostBytes)
	}
	// Queued is two counters (the queue and the files being fed to it) read
	// one after the other, so a worker taking a file can make it one off for
	// a moment; with the copies held back it settles at the lost files.
	deadline := time.Now().Add(10 * time.Second)
	for e.p.Stats().Queued != int64(len(lost)) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if q := e.p.Stats().Queued; q != int64(len(lost)) {
		t.Errorf("queued %d, want the %d lost files", q, len(lost))
	}

	g.open()
	e.waitResident()
	e.checkAccounting()
	if w := e.p.warmups.progressAll(); w.Done != int64(len(lost)) || w.Pct != 100 {
		t.Errorf("warmup after the copies: %+v", w)
	}
	if st := e.p.Stats(); st.Done != int64(len(lost)) || st.Failed != 0 || st.BytesPlaced != lostBytes {
		t.Errorf("stats %+v; want %d copies of %d bytes, none failed", st, len(lost), lostBytes)
	}
	for _, p := range lost {
		b, err := os.ReadFile(e.tiers[e.entry(p).Tier()].Path(p))
		if err != nil || !bytesEqual(b, d[p]) {
			t.Errorf("%s not placed again (%v)", p, err)
		}
	}
	// Nothing read the files, yet they are back; a remount sees them.
	e.close()
	e.open(false)
	if st := e.p.Stats(); st.CopiesCheckedAtMount != int64(len(d)) || st.CopiesMissingAtMount+st.CopiesWrongSizeAtMount != 0 {
		t.Errorf("second remount: %+v", st)
	}
	if n, _ := e.p.residency(); n != int64(len(d)) {
		t.Errorf("second remount: %d of %d resident", n, len(d))
	}
}

func TestNewWithAWipedTierKeepsTheOtherTiersCopies(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, []tier.Options{{Name: "mem", Quota: d.Bytes() / 3}, {Name: "nvme", Quota: 1 << 30}}, Options{})
	e.p.warmups.queueAll()
	e.waitResident()
	inMem, inNVMe := e.tiers[0].Files(), e.tiers[1].Files()
	e.close()
	// A RAM tier after a reboot: empty.
	if err := os.RemoveAll(e.topts[0].Dir); err != nil {
		t.Fatal(err)
	}
	g := newGate(t)
	e.topts[0].Statfs = g.statfs
	e.topts[1].Statfs = g.statfs
	e.open(false)
	if st := e.p.Stats(); st.CopiesMissingAtMount != inMem || st.CopiesWrongSizeAtMount != 0 {
		t.Errorf("missing %d wrong %d; want %d 0", st.CopiesMissingAtMount, st.CopiesWrongSizeAtMount, inMem)
	}
	if e.tiers[0].Files() != 0 || e.tiers[1].Files() != inNVMe {
		t.Errorf("tiers account %d and %d files; want 0 and %d", e.tiers[0].Files(), e.tiers[1].Files(), inNVMe)
	}
	g.open()
	e.waitResident()
	e.checkAccounting()
	if e.tiers[0].Files() != inMem {
		t.Errorf("mem holds %d files again, want %d", e.tiers[0].Files(), inMem)
	}
	e.readAllFiles()
}

func TestCopiesUnderHashedNamesAreFoundAtRemount(t *testing.T) {
	// A tier directory so deep that a 400-byte dataset path cannot keep
	// its plain name there.
	dir := fastDir(t)
	for len(dir) < 3700 {
		dir = filepath.Join(dir, strings.Repeat("t", 200))
	}
	long := strings.Repeat("c", 200) + "/" + strings.Repeat("f", 200)
	d := dataset{long: content(long, 5000), "short": content("short", 100)}
	e := newEnv(t, d, []tier.Options{{Name: "mem", Quota: 1 << 30, Dir: dir}}, Options{})
	e.readAllFiles()
	e.waitResident()
	if name := e.tiers[0].Path(long); !strings.Contains(name, "/hashed/") {
		t.Fatalf("Path(%d-byte path) = %s, want a hashed name", len(long), name)
	}
	e.close()
	e.open(false)
	if st := e.p.Stats(); st.CopiesCheckedAtMount != 2 || st.CopiesMissingAtMount+st.CopiesWrongSizeAtMount != 0 {
		t.Errorf("remount: %+v", st)
	}
	e.readAllFiles()
	if st := e.source.Stats(); st.Opens != 0 {
		t.Errorf("remount read the source %d times", st.Opens)
	}
}

// A copy that fails for a reason of its own (here a directory holds its
// name in the tier) is counted as failed and logged once, the file is
// served from the source at every read, and the tier keeps its health.
func TestCopyFailingForItsOwnReasonIsServedFromTheSourceAndLeavesTheTierHealthy(t *testing.T) {
	d := sizedDataset()
	core, logs := observer.New(zapcore.DebugLevel)
	e := newEnv(t, d, oneTier(1<<30), Options{Logger: zap.New(core)})
	bad := "train/b/img-110k.jpg"
	if err := os.MkdirAll(filepath.Join(e.tiers[0].Path(bad), "in-the-way"), 0o700); err != nil {
		t.Fatal(err)
	}
	const passes = 4
	for i := 0; i < passes; i++ {
		e.readAllFiles()
		waitFor(t, "copies to end", func() bool { return e.p.Stats().Queued == 0 && e.p.cp.flights.Size() == 0 })
	}
	if n, _ := e.p.residency(); n != int64(len(d)-1) || e.entry(bad).Tier() != -1 {
		t.Errorf("%d resident, %s in tier %d; want every other file resident", n, bad, e.entry(bad).Tier())
	}
	if !e.tiers[0].Healthy() || e.tiers[0].Errors() != 0 {
		t.Errorf("tier healthy=%v errors=%d after failures of one file", e.tiers[0].Healthy(), e.tiers[0].Errors())
	}
	st := e.p.Stats()
	if st.Failed < passes {
		t.Errorf("placements failed %d, want at least one per pass (%d)", st.Failed, passes)
	}
	warns := logs.FilterMessage("placement failed").FilterField(zap.String("path", bad)).Len()
	if warns != 1 {
		t.Errorf("%d warnings for %s, want 1", warns, bad)
	}
	if again := logs.FilterMessage("placement failed again").Len(); int64(again) != st.Failed-1 {
		t.Errorf("%d debug lines for later failures, want %d", again, st.Failed-1)
	}
	r, err := e.p.Open(context.Background(), e.entry(bad))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := readCheck(context.Background(), r, d[bad], readPattern{buf: 1 << 20}); err != nil {
		t.Error(err)
	}
}

func bytesEqual(a, b []byte) bool { return bytes.Equal(a, b) }

// BenchmarkCheckCopies measures the check of recorded copies a mount does
// (New → checkCopies): 200000 resident copies of 1000 bytes in 1000
// directories of a tier on disk (the temp directory) or on tmpfs, their
// inodes cached (the files were just made). Reported per copy.
func BenchmarkCheckCopies(b *testing.B) {
	b.Run("disk", func(b *testing.B) { benchmarkCheckCopies(b, b.TempDir()) })
	b.Run("tmpfs", func(b *testing.B) { benchmarkCheckCopies(b, fastDir(b)) })
}

func benchmarkCheckCopies(b *testing.B, dir string) {
	const dirs, perDir = 1000, 200
	tr, err := tier.Open(tier.Options{Name: "disk", Dir: filepath.Join(dir, "tier"), Quota: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	var top []*catalog.Entry
	for i := 0; i < dirs; i++ {
		dir := fmt.Sprintf("n%08d", i)
		var kids []*catalog.Entry
		if err := os.MkdirAll(tr.Path(dir), 0o700); err != nil {
			b.Fatal(err)
		}
		for j := 0; j < perDir; j++ {
			e := catalog.NewFile(fmt.Sprintf("%s/n%08d_%07d.JPEG", dir, i, j), catalog.Attr{Size: 1000})
			e.SetTier(0)
			f, err := os.Create(tr.Path(e.Path()))
			if err != nil {
				b.Fatal(err)
			}
			f.Truncate(1000)
			f.Close()
			kids = append(kids, e)
		}
		top = append(top, catalog.NewDir(dir, kids))
	}
	cat := catalog.NewTree(catalog.NewDir("", top), []string{"disk"})
	p := &Placer{o: Options{Tiers: []*tier.Tier{tr}}, cat: cat, log: zap.NewNop()}
	b.ResetTimer()
	for range b.N {
		if lost := p.checkCopies(); len(lost) != 0 {
			b.Fatalf("%d copies lost", len(lost))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dirs*perDir), "ns/copy")
}

// walkTo finds p in a catalog that may still be loading: each directory
// on the way is read on demand, as a lookup through the mount reads it.
func (e *env) walkTo(p string) *catalog.Entry {
	e.t.Helper()
	en := e.cat.Root()
	for _, name := range strings.Split(p, "/") {
		if err := e.cat.List(context.Background(), en); err != nil {
			e.t.Fatal(err)
		}
		if en = en.Lookup(name); en == nil {
			e.t.Fatalf("%s: not found while loading", p)
		}
	}
	return en
}

// A remount whose catalog loads in the background serves the recorded
// copies before the load ends, but not a copy of the wrong size nor a
// missing one (the source instead, nothing dropped or accounted yet), nor
// the copy of a file the source changed (dropped by the open's check
// without unaccounting it). Once the load ends the copies are checked:
// the tiers account exactly the good ones, the lost ones are placed again.
func TestABackgroundLoadServesCopiesAndChecksThemAfter(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{})
	e.p.warmups.queueAll()
	e.waitResident()
	missing, wrong, changed := "val/mib+1", "train/b/img-2.jpg", "z/small-02"
	copyOf := func(p string) string { return e.tiers[0].Path(p) }
	e.close()
	if err := os.Remove(copyOf(missing)); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(copyOf(wrong), 10); err != nil {
		t.Fatal(err)
	}
	d[changed] = content("new "+changed, 4321)
	if err := os.WriteFile(filepath.Join(e.src, changed), d[changed], 0o644); err != nil {
		t.Fatal(err)
	}

	e.load = make(chan struct{})
	e.open(false)
	if !e.cat.Loading() || !e.p.cp.walking() {
		t.Fatal("the catalog is not loading in the background, or the placer's gate is open")
	}
	before := e.source.Stats()
	for _, p := range d.Paths() {
		r, err := e.p.Open(context.Background(), e.walkTo(p))
		if err != nil {
			t.Fatalf("%s during the load: %v", p, err)
		}
		if err := readCheck(context.Background(), r, d[p], readPattern{buf: 1 << 20}); err != nil {
			t.Errorf("%s during the load: %v", p, err)
		}
		r.Close()
	}
	if used, files := e.usedTotal(); used != 0 || files != 0 {
		t.Errorf("during the load the tiers account %d bytes in %d files, want none", used, files)
	}
	if st := e.p.Stats(); st.CopiesCheckedAtMount != 0 || st.Done != 0 {
		t.Errorf("checked or copied during the load: %+v", st)
	}
	if n := e.source.Stats().Opens - before.Opens; n < 3 {
		t.Errorf("%d source opens during the load, want at least the 3 files without a good copy", n)
	}
	if e.walkTo(changed).Tier() != -1 {
		t.Error("the changed file's copy is still recorded")
	}
	if _, err := os.Lstat(copyOf(changed)); !os.IsNotExist(err) {
		t.Errorf("the changed file's old copy is still in the tier: %v", err)
	}
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	if err := e.p.WaitReady(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitReady during the load: %v, want the caller's deadline", err)
	}
	cancel()
	close(e.load)
	if err := e.p.WaitReady(context.Background()); err != nil {
		t.Fatalf("WaitReady after the load: %v", err)
	}
	if e.p.cp.walking() {
		t.Fatal("WaitReady returned before the placer's gate opened")
	}
	if st := e.p.Stats(); st.CopiesCheckedAtMount != int64(len(d)-1) || st.CopiesMissingAtMount != 1 || st.CopiesWrongSizeAtMount != 1 {
		t.Errorf("check after the load: %+v; want %d checked, 1 missing, 1 of the wrong size", st, len(d)-1)
	}
	e.checkAccounting()
	e.waitResident()
	e.checkAccounting()
	e.readAllFiles()
}

// After a background load stopped by a damaged record the placer copies
// nothing (the catalog is partial and not written): the resident files of
// the directories read are served from their copies, a file without one
// from the source, and no copy starts, not even a reader's.
func TestAFailedLoadCopiesNothing(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{})
	e.p.warmups.queueAll()
	e.waitResident()
	lost := "train/a/page-1"
	lostCopy := e.tiers[0].Path(lost)
	if !e.p.op.dropCopy(e.entry(lost), 0) {
		t.Fatalf("%s had no copy to drop", lost)
	}
	e.close()
	db, err := badger.Open(badger.DefaultOptions(filepath.Join(e.state, "catalog")).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("fval/zz-damaged"), []byte{0xff, 1}) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	e.load = make(chan struct{})
	e.open(false)
	read := func() {
		opens := e.source.Stats().Opens
		for _, p := range []string{"train/a/page", "big/two.tar"} {
			r, err := e.p.Open(context.Background(), e.walkTo(p))
			if err != nil {
				t.Fatal(err)
			}
			if err := readCheck(context.Background(), r, d[p], readPattern{buf: 1 << 20}); err != nil {
				t.Errorf("%s: %v", p, err)
			}
			r.Close()
		}
		if n := e.source.Stats().Opens - opens; n != 0 {
			t.Errorf("%d source opens for resident files, want their copies", n)
		}
	}
	read() // their directories read on demand, before the load goes on
	close(e.load)
	if err := e.cat.WaitWalk(context.Background()); !errors.Is(err, catalog.ErrBadRecord) {
		t.Fatalf("WaitWalk: %v, want the damaged record's error", err)
	}
	if !e.p.cp.walking() {
		t.Fatal("the placer's gate opened after a failed load")
	}
	if err := e.p.WaitReady(context.Background()); !errors.Is(err, catalog.ErrBadRecord) {
		t.Errorf("WaitReady after a failed load: %v, want its error", err)
	}
	read()
	opens := e.source.Stats().Opens
	r, err := e.p.Open(context.Background(), e.walkTo(lost))
	if err != nil {
		t.Fatal(err)
	}
	if err := readCheck(context.Background(), r, d[lost], readPattern{buf: 1 << 20}); err != nil {
		t.Errorf("%s: %v", lost, err)
	}
	r.Close()
	if n := e.source.Stats().Opens - opens; n != 1 {
		t.Errorf("%d source opens for a file without a copy, want 1", n)
	}
	if err := e.cat.List(context.Background(), e.cat.Root().Lookup("val")); !errors.Is(err, catalog.ErrBadRecord) {
		t.Errorf("List(val): %v, want the damaged record's error", err)
	}
	time.Sleep(50 * time.Millisecond)
	if st := e.p.Stats(); st.Done != 0 || st.CopiesCheckedAtMount != 0 {
		t.Errorf("copies made or checked after a failed load: %+v", st)
	}
	if _, err := os.Lstat(lostCopy); !os.IsNotExist(err) {
		t.Errorf("the missing copy of %s was made again after a failed load (%v)", lost, err)
	}
}
