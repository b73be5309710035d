package placement

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/source"
)

// openRead opens p, reads it whole and compares it with want.
func (e *env) openRead(p string, want []byte) error {
	e.t.Helper()
	ctx := context.Background()
	r, err := e.p.Open(ctx, e.entry(p))
	if err != nil {
		return err
	}
	defer r.Close()
	return readCheck(ctx, r, want, readPattern{buf: 1 << 20})
}

func (e *env) readEveryFileOnce() {
	e.t.Helper()
	for _, p := range e.data.Paths() {
		if err := e.openRead(p, e.data[p]); err != nil {
			e.t.Fatalf("%s: %v", p, err)
		}
	}
}

// (Without a TTL, as every test here, no check of an earlier mount counts.)
func TestValidateOnceStatsEachFileAtItsFirstOpenOfTheMountOnly(t *testing.T) {
	e := newEnv(t, sizedDataset(), oneTier(1<<30), Options{})
	e.p.warmups.queueAll()
	e.waitResident()
	n := int64(len(e.data))
	// The copies checked each file as they opened it: this mount's check.
	before := e.source.Stats().Stats
	e.readEveryFileOnce()
	if got := e.source.Stats().Stats - before; got != 0 {
		t.Fatalf("first epoch after a warmup: %d source stats, want 0 (the copies were the checks)", got)
	}
	e.close()
	e.open(false)
	for epoch := 1; epoch <= 3; epoch++ {
		before := e.source.Stats().Stats
		e.readEveryFileOnce()
		got := e.source.Stats().Stats - before
		if want := map[bool]int64{true: n, false: 0}[epoch == 1]; got != want {
			t.Fatalf("epoch %d: %d source stats, want %d", epoch, got, want)
		}
	}
	// Every remount checks every file again, once.
	e.close()
	e.open(false)
	e.readEveryFileOnce()
	e.readEveryFileOnce()
	if got := e.source.Stats().Stats; got != n {
		t.Fatalf("after a second remount: %d source stats for two passes, want %d", got, n)
	}
}

func TestValidateOpenStatsEveryOpen(t *testing.T) {
	e := newEnv(t, sizedDataset(), oneTier(1<<30), Options{Validate: ValidateOpen})
	e.p.warmups.queueAll()
	e.waitResident()
	before := e.source.Stats().Stats
	e.readEveryFileOnce()
	e.readEveryFileOnce()
	if got, want := e.source.Stats().Stats-before, 2*int64(len(e.data)); got != want {
		t.Fatalf("%d source stats for two passes, want %d", got, want)
	}
}

// ValidateNever trusts resident copies; a file read from the source is
// checked at its open (its bytes come from the source), by the open of the
// source itself: no lstat.
func TestValidateNeverChecksOnlyFilesReadFromTheSource(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<20+100), Options{Validate: ValidateNever})
	e.p.warmups.queueAll()
	waitFor(t, "placement settled", func() bool { return e.p.Stats().Queued == 0 && e.p.cp.flights.Size() == 0 })
	var resident, other int64
	for _, p := range d.Paths() {
		if e.entry(p).Tier() >= 0 {
			resident++
		} else {
			other++
		}
	}
	if resident == 0 || other == 0 {
		t.Fatalf("want some files resident and some not: %d, %d", resident, other)
	}
	before := e.source.Stats()
	e.readEveryFileOnce()
	after := e.source.Stats()
	if got := after.Stats - before.Stats; got != 0 {
		t.Errorf("%d source stats, want none (an open's check is the source open)", got)
	}
	if got := after.Opens - before.Opens; got != other {
		t.Errorf("%d source opens, want one per non-resident file (%d)", got, other)
	}
}

// breakSource makes every path below the source root fail with ENOTDIR
// (not "does not exist"); the returned func repairs it.
func breakSource(t *testing.T, root string) func() {
	t.Helper()
	aside := root + ".aside"
	if err := os.Rename(root, aside); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	return func() {
		os.Remove(root)
		if err := os.Rename(aside, root); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStaleIfErrorServesResidentCopiesWhileTheSourceFails(t *testing.T) {
	d := sizedDataset()
	d["late/not-resident"] = content("late", 5000)
	e := newEnv(t, d, oneTier(1<<30), Options{Validate: ValidateOpen})
	for _, p := range d.Paths() {
		if p != "late/not-resident" {
			e.p.cp.enqueue(e.entry(p))
		}
	}
	waitFor(t, "placement settled", func() bool { return e.p.Stats().Queued == 0 && e.p.cp.flights.Size() == 0 })
	repair := breakSource(t, e.src)
	for _, p := range d.Paths() {
		err := e.openRead(p, d[p])
		if p == "late/not-resident" {
			if !errors.Is(err, source.ErrSource) || errors.Is(err, ErrVanished) {
				t.Errorf("open of a non-resident file while the source fails: %v, want a source error", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("resident %s while the source fails: %v", p, err)
		}
	}
	if got, want := e.p.Stats().StaleOnError, int64(len(d)-1); got != want {
		t.Errorf("StaleOnError = %d, want %d", got, want)
	}
	if e.p.Stats().Removed != 0 || e.cat.Files() != int64(len(d)) {
		t.Error("a failing source removed files from the dataset")
	}
	repair()
	e.readEveryFileOnce()
}

// A copy is recorded only if the source still holds the version it
// started from; a same-size rewrite during the copy, which an open's
// validation has already recorded, is not taken for a good copy.
func TestACopyIsRecordedOnlyForTheVersionItStartedFrom(t *testing.T) {
	const size = 3 << 20
	d := dataset{"f": content("old", size)}
	e := newEnvSource(t, d, oneTier(1<<30), Options{Validate: ValidateOpen}, source.Options{Bandwidth: 2 << 20})
	en := e.entry("f")
	e.p.cp.enqueue(en)
	waitFor(t, "the copy under way", func() bool {
		f, ok := e.p.cp.flights.Load(en)
		if !ok {
			return false
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.copied > 0
	})
	fresh := content("new", size)
	full := filepath.Join(e.src, "f")
	if err := os.WriteFile(full, fresh, 0o644); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	os.Chtimes(full, future, future)
	// The open validates: it records the new version.
	r, err := e.p.Open(context.Background(), en)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	waitFor(t, "the copy ended", func() bool { return e.p.cp.flights.Size() == 0 && e.p.Stats().Queued == 0 })
	if i := en.Tier(); i >= 0 {
		got, _ := os.ReadFile(e.tiers[i].Path("f"))
		if !bytes.Equal(got, fresh) {
			t.Fatal("a copy of the old version was recorded as the new one")
		}
	}
	e.data["f"] = fresh
	if err := e.openRead("f", fresh); err != nil {
		t.Fatal(err)
	}
	e.checkAccounting()
}

func TestNotifyIsToldOfChangedAndRemovedFiles(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{Validate: ValidateOpen})
	var mu sync.Mutex
	var evs []Event
	e.p.SetNotify(func(ev Event) { mu.Lock(); evs = append(evs, ev); mu.Unlock() })
	if err := os.WriteFile(filepath.Join(e.src, "z/small-00"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(e.src, "z/small-01"))
	r, err := e.p.Open(context.Background(), e.entry("z/small-00"))
	if err != nil || !r.Changed() {
		t.Fatalf("open of a changed file: %v, changed %v", err, r != nil && r.Changed())
	}
	r.Close()
	gone := e.entry("z/small-01")
	if _, err := e.p.Open(context.Background(), gone); !errors.Is(err, ErrVanished) {
		t.Fatalf("open of a removed file: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(evs) != 2 || evs[0].Kind != EntryChanged || evs[0].Entry.Path() != "z/small-00" ||
		evs[1].Kind != EntryRemoved || evs[1].Entry != gone {
		t.Fatalf("events: %+v", evs)
	}
	if e.cat.Find("z/small-01") != nil || e.cat.Files() != int64(len(d)-1) {
		t.Fatal("the removed file is still in the catalog")
	}
}

func TestReadFileReturnsTheWholeFileFromTierOrSource(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{})
	for _, pass := range []string{"source", "tier"} {
		for _, p := range d.Paths() {
			got, err := e.p.ReadFile(context.Background(), e.entry(p))
			if err != nil || !bytes.Equal(got, d[p]) {
				t.Fatalf("%s pass: ReadFile(%s): %d bytes, %v", pass, p, len(got), err)
			}
		}
		e.waitResident()
	}
}

// A first epoch costs the source one open per file and no lstat: the open
// of a file that is not resident is its check, its descriptor feeds the
// copy, and readers of a file whose copy is under way join it. Every file
// is read by several readers at once, the way a DataLoader's workers and
// a second job meet on a file.
func TestFirstEpochOpensEachFileOnceAndStatsNone(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{})
	e.readAllFiles() // every file by len(patterns) readers at once
	waitFor(t, "placement settled", func() bool { return e.p.Stats().Queued == 0 && e.p.cp.flights.Size() == 0 })
	st := e.source.Stats()
	if st.Stats != 0 {
		t.Errorf("%d source stats in the first epoch, want 0", st.Stats)
	}
	if st.Opens != int64(len(d)) {
		t.Errorf("%d source opens for %d files, want one per file", st.Opens, len(d))
	}
	if st.Bytes != d.Bytes() {
		t.Errorf("%d bytes read from the source, want each file once (%d)", st.Bytes, d.Bytes())
	}
	for _, p := range d.Paths() {
		if e.entry(p).Tier() < 0 {
			t.Errorf("%s not resident after the first epoch", p)
		}
	}
	if e.p.val.checks.Size() != 0 {
		t.Errorf("%d checks left behind", e.p.val.checks.Size())
	}
}

// The checks of one mount survive a remount within validate_ttl: the next
// mount's first epoch over the resident files sends the source nothing.
// Without a TTL every remount checks each file again at its first open.
func TestValidateTTLTrustsTheChecksOfAnEarlierMount(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ttl   time.Duration
		stats bool // the first epoch after the remount stats each file
	}{
		{"ttl 24h", 24 * time.Hour, false},
		{"ttl 0", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, sizedDataset(), oneTier(1<<30), Options{ValidateTTL: tc.ttl})
			e.readEveryFileOnce()
			e.waitResident()
			e.close()
			e.open(false)
			if e.p.val.rechecksPending() != 0 {
				t.Fatalf("%d files queued for revalidation right after they were checked", e.p.val.rechecksPending())
			}
			before := e.source.Stats()
			e.readEveryFileOnce()
			after := e.source.Stats()
			want := int64(0)
			if tc.stats {
				want = int64(len(e.data))
			}
			if got := after.Stats - before.Stats; got != want {
				t.Errorf("first epoch after the remount: %d source stats, want %d", got, want)
			}
			if got := after.Opens - before.Opens; got != 0 {
				t.Errorf("first epoch after the remount: %d source opens, want 0", got)
			}
		})
	}
}

// Resident files checked longer ago than the TTL are served at once (no
// stat in the open) and revalidated in the background; a file changed on
// the source meanwhile is found by that revalidation, and the checks it
// makes are recorded for the next mount.
func TestValidateTTLRevalidatesOlderChecksInTheBackground(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{ValidateTTL: time.Second})
	e.readEveryFileOnce()
	e.waitResident()
	e.close()
	time.Sleep(2100 * time.Millisecond) // every check is older than the TTL
	changed := "train/a/page"
	if err := os.WriteFile(filepath.Join(e.src, changed), []byte("new content"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.open(false)
	waitFor(t, "the background revalidation", func() bool { return e.p.val.rechecksPending() == 0 && !e.p.Scrubber().Status().Running })
	if got := e.source.Stats().Stats; got != int64(len(d)) {
		t.Errorf("the revalidation sent %d stats, want one per resident file (%d)", got, len(d))
	}
	if st := e.p.Scrubber().Status(); st.Kind != ScrubRevalidate || st.Checked != int64(len(d)) || st.Changed != 1 {
		t.Errorf("revalidation status %+v, want %d checked and 1 changed", st, len(d))
	}
	if en := e.entry(changed); en.Attr().Size != int64(len("new content")) || en.Tier() >= 0 {
		t.Errorf("the changed file: size %d tier %d, want the new size and its copy dropped", en.Attr().Size, en.Tier())
	}
	// Reads now send nothing for the checked files, and the changed
	// file reads its new bytes.
	d[changed] = []byte("new content")
	before := e.source.Stats().Stats
	e.readEveryFileOnce()
	if got := e.source.Stats().Stats - before; got != 0 {
		t.Errorf("%d stats after the revalidation, want 0", got)
	}
	// The next mount trusts those checks.
	e.waitResident()
	e.close()
	e.popts.ValidateTTL = time.Hour
	e.open(false)
	if n := e.p.val.rechecksPending(); n != 0 {
		t.Errorf("%d files to revalidate after a remount, want 0 (the checks were recorded)", n)
	}
}
