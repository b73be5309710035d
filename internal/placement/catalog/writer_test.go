package catalog

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// roomy is free space far above any floor.
const roomy = 1 << 40

// fakeDisk is the state directory's file system as the catalog sees it.
type fakeDisk struct {
	mu    sync.Mutex
	free  uint64
	left  int // checks that still see free before the disk fills; -1: no limit
	calls int
	gate  chan struct{} // if set, a check waits until it is closed
}

func newFakeDisk(free uint64) *fakeDisk { return &fakeDisk{free: free, left: -1} }

func (d *fakeDisk) statfs(string) (uint64, uint64, error) {
	d.mu.Lock()
	gate := d.gate
	d.mu.Unlock()
	if gate != nil {
		<-gate
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.left == 0 {
		d.free = 0
	}
	if d.left > 0 {
		d.left--
	}
	return d.free, roomy, nil
}

// set makes the disk report free bytes from now on.
func (d *fakeDisk) set(free uint64) {
	d.mu.Lock()
	d.free, d.left = free, -1
	d.mu.Unlock()
}

// fillAfter lets n more checks see room; the disk is full after them.
func (d *fakeDisk) fillAfter(n int) {
	d.mu.Lock()
	d.free, d.left = roomy, n
	d.mu.Unlock()
}

// leftChecks is how many more checks see room (-1: all of them).
func (d *fakeDisk) leftChecks() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.left
}

func (d *fakeDisk) checks() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

// observed is a logger whose Info and above entries the test reads.
func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.InfoLevel)
	return zap.New(core), logs
}

// diskOpts are catalog options over a fake disk, checking every few
// milliseconds.
func diskOpts(src, state string, d *fakeDisk, log *zap.Logger) Options {
	return Options{
		StateDir: state, Source: src, Tiers: []string{"mem", "nvme"}, Workers: 3,
		Statfs: d.statfs, RetryInterval: 5 * time.Millisecond, Logger: log,
	}
}

// stored reads the record of p from the catalog's database.
func stored(t *testing.T, c *Catalog, p string) (rec record, ok bool) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.db.View(func(txn *badger.Txn) error {
		v := getValue(txn, fileKey(p))
		if v == nil {
			return nil
		}
		var err error
		rec, err = decodeRecord(v)
		ok = true
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec, ok
}

func storedComplete(t *testing.T, c *Catalog) bool {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var v []byte
	c.db.View(func(txn *badger.Txn) error { v = getValue(txn, keyComplete); return nil })
	return v != nil
}

func waitHealth(t *testing.T, c *Catalog, state string, pending int) {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for {
		s, n := c.Health()
		if s == state && n == pending {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after %v for the catalog %s with %d pending: it is %s with %d", liveness, state, pending, s, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func warnings(logs *observer.ObservedLogs, msg string) []observer.LoggedEntry {
	return logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet(msg).All()
}

// wideSource is a source of n small files in directories of 500.
func wideSource(t *testing.T, n int) string {
	t.Helper()
	src := fastDir(t)
	for i := 0; i < n; i++ {
		dir := filepath.Join(src, fmt.Sprintf("d%03d", i/500))
		if i%500 == 0 {
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), []byte{byte(i)}, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

func TestCatalogBelowTheFloorWritesNothingAndCatchesUp(t *testing.T) {
	src := catalogTree(t)
	state := fastDir(t)
	d := newFakeDisk(roomy)
	log, logs := observed()
	c := openCat(t, diskOpts(src, state, d, log))
	defer func() { c.Close() }()
	if s, n := c.Health(); s != HealthOK || n != 0 {
		t.Fatalf("fresh catalog: %s with %d pending", s, n)
	}
	e := c.Find("a/a.txt")
	gone := "top.txt"

	d.set(DefaultCatalogMinFree - 1)
	e.SetTier(0)
	if err := c.Persist(e); err != nil {
		t.Fatal(err)
	}
	c.forget(gone)
	c.Persist(e) // the latest state per path: still one update
	waitHealth(t, c, HealthDegraded, 2)
	if e.Tier() != 0 {
		t.Fatal("the in-memory residency was lost")
	}
	if rec, _ := stored(t, c, e.Path()); rec.Tier != "" {
		t.Errorf("a record was written below the floor: tier %q", rec.Tier)
	}
	if _, ok := stored(t, c, gone); !ok {
		t.Error("a record was deleted below the floor")
	}
	// Several checks while degraded; the state is logged once.
	at := d.checks()
	waitFor(t, "more floor checks", func() bool { return d.checks() > at+3 })
	ws := warnings(logs, "catalog degraded")
	if len(ws) != 1 {
		t.Fatalf("%d degraded warnings, want 1", len(ws))
	}
	f := ws[0].ContextMap()
	if f["free"] != uint64(DefaultCatalogMinFree-1) || f["floor"].(uint64) < DefaultCatalogMinFree {
		t.Errorf("degraded warning fields %v: want free %d and a floor of at least %d", f, DefaultCatalogMinFree-1, DefaultCatalogMinFree)
	}

	d.set(roomy)
	waitHealth(t, c, HealthOK, 0)
	if rec, _ := stored(t, c, e.Path()); rec.Tier != "mem" {
		t.Errorf("after the catch-up the record has tier %q, want mem", rec.Tier)
	}
	if _, ok := stored(t, c, gone); ok {
		t.Error("after the catch-up the forgotten record is still there")
	}
	if len(logs.FilterMessageSnippet("caught up").All()) != 1 {
		t.Error("the return to ok was not logged")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openCat(t, diskOpts(src, state, newFakeDisk(roomy), nil))
	if c.Walked() {
		t.Error("the remount walked the source")
	}
	if got := c.Find(e.Path()); got == nil || got.Tier() != 0 {
		t.Errorf("residency of %s not kept across the remount", e.Path())
	}
	if c.Find(gone) != nil {
		t.Errorf("forgotten %s is back after the remount", gone)
	}
}

func TestCatalogMountedOnAFullStateDirWalksAndStoresOnceThereIsRoom(t *testing.T) {
	src := catalogTree(t)
	state := fastDir(t)
	want := expectedEntries(t, src)
	d := newFakeDisk(0)
	c := openCat(t, diskOpts(src, state, d, nil))
	if !c.Walked() || len(dump(c)) != len(want) {
		t.Fatalf("walked %v, %d entries, want a walk of %d", c.Walked(), len(dump(c)), len(want))
	}
	if s, n := c.Health(); s != HealthDegraded || n != len(want) {
		t.Fatalf("mounted full: %s with %d pending, want degraded with %d", s, n, len(want))
	}
	e := c.Find("a/b/c/deep.bin")
	e.SetTier(1)
	c.Persist(e)
	if _, n := c.Health(); n != len(want)+1 {
		t.Errorf("%d pending after a placement, want %d", n, len(want)+1)
	}
	// Closed while still full: nothing was written, the next mount walks.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(state, "catalog", "MANIFEST")); err == nil {
		t.Fatal("a catalog was written below the floor")
	}
	c = openCat(t, diskOpts(src, state, d, nil))
	if !c.Walked() {
		t.Fatal("a walk that was never stored was not redone")
	}
	e = c.Find("a/b/c/deep.bin")
	e.SetTier(1)
	c.Persist(e)
	d.set(roomy)
	waitHealth(t, c, HealthOK, 0)
	if !storedComplete(t, c) {
		t.Error("the catch-up did not complete the catalog")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openCat(t, diskOpts(src, state, d, nil))
	defer c.Close()
	if c.Walked() {
		t.Error("the walk stored by the catch-up was not loaded")
	}
	if len(dump(c)) != len(want) || c.Find("a/b/c/deep.bin").Tier() != 1 {
		t.Errorf("after the remount: %d entries, deep.bin in tier %d", len(dump(c)), c.Find("a/b/c/deep.bin").Tier())
	}
}

func TestCatalogMountedOnAFullStateDirLoadsItsCatalogReadOnly(t *testing.T) {
	src := catalogTree(t)
	state := fastDir(t)
	d := newFakeDisk(roomy)
	c := openCat(t, diskOpts(src, state, d, nil))
	one := c.Find("a/b/sibling")
	one.SetTier(0)
	c.Persist(one)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	d.set(0)
	c = openCat(t, diskOpts(src, state, d, nil))
	defer func() { c.Close() }()
	if c.Walked() {
		t.Error("a complete catalog was not loaded below the floor")
	}
	if c.Find("a/b/sibling").Tier() != 0 {
		t.Error("residency lost in the read-only load")
	}
	if s, n := c.Health(); s != HealthDegraded || n != 0 {
		t.Fatalf("loaded below the floor: %s with %d pending", s, n)
	}
	two := c.Find("z/zz/zzz")
	two.SetTier(1)
	c.Persist(two)
	if rec, _ := stored(t, c, two.Path()); rec.Tier != "" {
		t.Fatal("written to the read-only catalog")
	}
	d.set(roomy)
	waitHealth(t, c, HealthOK, 0)
	if rec, _ := stored(t, c, two.Path()); rec.Tier != "nvme" {
		t.Errorf("after the catch-up %s has tier %q", two.Path(), rec.Tier)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openCat(t, diskOpts(src, state, d, nil))
	if c.Walked() || c.Find("a/b/sibling").Tier() != 0 || c.Find("z/zz/zzz").Tier() != 1 {
		t.Error("residency not kept across the read-only mount")
	}
}

func TestCatalogCatchUpWritesInBatchesAndResumesWhereTheDiskFilledAgain(t *testing.T) {
	n := 3*catalogBatchRecords + 100
	src := wideSource(t, n)
	state := fastDir(t)
	d := newFakeDisk(roomy)
	c := openCat(t, diskOpts(src, state, d, nil))
	defer c.Close()
	d.set(0)
	c.Root().Files(func(e *Entry) bool {
		e.SetTier(0)
		c.Persist(e)
		return true
	})
	waitHealth(t, c, HealthDegraded, n)
	// Room for two checks of the floor, then full again: at most two
	// batches are written, and the catalog stays degraded with the rest.
	d.fillAfter(2)
	deadline := time.Now().Add(liveness)
	for {
		s, p := c.Health()
		if s == HealthDegraded && p < n && d.leftChecks() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after %v for the catalog to write a batch and degrade again: %s with %d pending of %d", liveness, s, p, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a batch whose check passed may still be landing
	if s, p := c.Health(); s != HealthDegraded || p < n-2*catalogBatchRecords || p >= n {
		t.Fatalf("after room for two batches: %s with %d pending; want degraded with %d..%d", s, p, n-2*catalogBatchRecords, n-1)
	}
	d.set(roomy)
	waitHealth(t, c, HealthOK, 0)
	c.Root().Files(func(e *Entry) bool {
		if rec, _ := stored(t, c, e.Path()); rec.Tier != "mem" {
			t.Fatalf("%s stored with tier %q after the catch-up", e.Path(), rec.Tier)
		}
		return true
	})
}

// A walk's store that the floor cuts short is left whole to the catch-up,
// which redoes it: written in batches (the floor after the first batch),
// and as one stream (stream.go: the floor after a few chunks, then the
// batches it falls back to find no room either).
func TestCatalogWalkStoreCutByTheFloorIsRedoneWhole(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunk  int
		checks int // the room checks that pass
	}{
		// The open, the clearing of old records and one batch; then full.
		{"batches", -1, 3},
		// The open, the stream's first check and two chunks'; then full.
		{"stream", 4 << 10, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 2*catalogBatchRecords + 10
			src := wideSource(t, n)
			state := fastDir(t)
			d := newFakeDisk(roomy)
			d.fillAfter(tc.checks)
			o := diskOpts(src, state, d, nil)
			o.streamChunk = tc.chunk
			c := openCat(t, o)
			defer func() { c.Close() }()
			entries := countEntries(c.Root())
			if s, p := c.Health(); s != HealthDegraded || p != entries {
				t.Fatalf("store cut short: %s with %d pending, want degraded with %d", s, p, entries)
			}
			if d.leftChecks() != 0 {
				t.Fatalf("the store was not cut by the floor: %d checks left (the test's premise)", d.leftChecks())
			}
			if storedComplete(t, c) {
				t.Fatal("a cut store marked the catalog complete")
			}
			if _, ok := stored(t, c, c.Root().Children().At(0).Path()); tc.chunk < 0 && !ok {
				t.Fatal("the first batch was not written (the test's premise)")
			}
			d.set(roomy)
			waitHealth(t, c, HealthOK, 0)
			if !storedComplete(t, c) {
				t.Fatal("the catch-up did not complete the catalog")
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			c = openCat(t, o)
			if c.Walked() || c.Files() != int64(n) {
				t.Errorf("remount walked %v, %d files, want a load of %d", c.Walked(), c.Files(), n)
			}
		})
	}
}

func TestCatalogWriteErrorDegradesLikeAFullDisk(t *testing.T) {
	src := catalogTree(t)
	state := fastDir(t)
	log, logs := observed()
	o := diskOpts(src, state, newFakeDisk(roomy), log)
	// The test runs the catch-up itself: a write batch on a closed badger
	// can block, which the repair below must not race with.
	o.RetryInterval = time.Hour
	c := openCat(t, o)
	defer func() { c.Close() }()
	// Break the database under the catalog: every write now fails.
	c.mu.Lock()
	broken := c.db
	c.mu.Unlock()
	if err := broken.Close(); err != nil {
		t.Fatal(err)
	}
	e := c.Find("link")
	e.SetTier(0) // a symlink's record is written like any other
	if err := c.Persist(e); err != nil {
		t.Fatalf("persist returned %v; a failed write must not reach the caller", err)
	}
	waitHealth(t, c, HealthDegraded, 1)
	ws := warnings(logs, "catalog degraded")
	if len(ws) != 1 || ws[0].ContextMap()["error"] == nil {
		t.Fatalf("write error not logged once with its error: %v", ws)
	}
	// Repair it: the catch-up writes what was kept.
	db, err := badger.Open(catalogOptions(filepath.Join(state, "catalog"), false))
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.db = db
	c.mu.Unlock()
	c.catchUp()
	if s, n := c.Health(); s != HealthOK || n != 0 {
		t.Fatalf("after the repair: %s with %d pending", s, n)
	}
	if rec, _ := stored(t, c, "link"); rec.Tier != "mem" {
		t.Errorf("after the repair the record has tier %q", rec.Tier)
	}
}

func TestCatalogCloseBelowTheFloorWritesNoTable(t *testing.T) {
	src := catalogTree(t)
	state := fastDir(t)
	d := newFakeDisk(roomy)
	log, logs := observed()
	c := openCat(t, diskOpts(src, state, d, log))
	e := c.Find("a/b/sibling")
	e.SetTier(1)
	c.Persist(e)
	waitHealth(t, c, HealthOK, 0) // written
	dir := filepath.Join(state, "catalog")
	before := tableBytes(dir)
	c.mu.Lock()
	db := c.db
	c.mu.Unlock()
	d.set(0)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing badger would have flushed the memtable into a new table.
	if after := tableBytes(dir); after != before {
		t.Errorf("tables grew from %d to %d bytes in a Close below the floor", before, after)
	}
	if len(warnings(logs, "catalog left open")) != 1 {
		t.Error("the skipped close was not logged")
	}
	// The process would exit here; close what the catalog left open so
	// the next open can take the directory lock.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	c = openCat(t, diskOpts(src, state, newFakeDisk(roomy), nil))
	defer c.Close()
	if c.Find("a/b/sibling").Tier() != 1 {
		t.Error("an update written before the disk filled was lost")
	}
}

func TestCatalogConcurrentUpdatesWhileTheDiskFillsEndWithTheLatestState(t *testing.T) {
	n := 3000
	src := wideSource(t, n)
	state := fastDir(t)
	d := newFakeDisk(roomy)
	c := openCat(t, diskOpts(src, state, d, nil))
	defer c.Close()
	var files []*Entry
	c.Root().Files(func(e *Entry) bool { files = append(files, e); return true })
	const workers = 4
	forgotten := make([]atomic.Bool, n)
	var wg sync.WaitGroup
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() { // the disk fills and empties
		defer close(stopped)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Millisecond):
			}
			if i%2 == 0 {
				d.set(0)
			} else {
				d.set(roomy)
			}
		}
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for round := 0; round < 4000; round++ {
				i := w + workers*r.IntN(n/workers)
				e := files[i]
				if r.IntN(10) == 0 {
					forgotten[i].Store(true)
					c.forget(e.Path())
					continue
				}
				forgotten[i].Store(false)
				e.SetTier(r.IntN(3) - 1)
				c.Persist(e)
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	<-stopped // its last set must not come after ours
	d.set(roomy)
	waitHealth(t, c, HealthOK, 0)
	for i, e := range files {
		rec, ok := stored(t, c, e.Path())
		if forgotten[i].Load() {
			if ok {
				t.Fatalf("%s: forgotten last, but its record is there", e.Path())
			}
			continue
		}
		want := c.TierName(e.Tier())
		if want == "source" {
			want = ""
		}
		if !ok || rec.Tier != want {
			t.Fatalf("%s: stored tier %q (record %v), the last update said %q", e.Path(), rec.Tier, ok, want)
		}
	}
}

func TestCatalogInAStateDirectoryNotYetMadeIsWritten(t *testing.T) {
	src := catalogTree(t)
	state := filepath.Join(fastDir(t), "not", "yet")
	c := openCat(t, Options{StateDir: state, Source: src, Tiers: []string{"mem"}, RetryInterval: time.Millisecond})
	if s, n := c.Health(); s != HealthOK || n != 0 {
		t.Fatalf("catalog in a new state directory: %s with %d pending", s, n)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openCat(t, Options{StateDir: state, Source: src, Tiers: []string{"mem"}})
	defer c.Close()
	if c.Walked() {
		t.Error("the walk was not stored")
	}
}

// Updates are written in batches by the writer goroutine: the updates made
// while a batch is being written (here: while its floor check waits) make
// the next batch, and Close writes what is still pending.
func TestCatalogBatchesUpdatesMadeDuringAWriteAndCloseWritesTheRest(t *testing.T) {
	n := 3000
	src := wideSource(t, n)
	state := fastDir(t)
	d := newFakeDisk(roomy)
	o := diskOpts(src, state, d, nil)
	o.RetryInterval = time.Hour // no floor check but the writes'
	c := openCat(t, o)
	var files []*Entry
	c.Root().Files(func(e *Entry) bool { files = append(files, e); return true })
	gate := make(chan struct{})
	d.mu.Lock()
	d.gate = gate
	d.mu.Unlock()
	checks, batches := d.checks(), c.w.batches.Load()
	files[0].SetTier(1)
	c.Persist(files[0]) // its batch waits in the floor check
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 1 + w; i < n; i += 4 {
				files[i].SetTier(1)
				c.Persist(files[i])
			}
		}(w)
	}
	wg.Wait()
	d.mu.Lock()
	d.gate = nil
	d.mu.Unlock()
	close(gate)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// The first batch, then the 2,999 others (fewer than catalogBatchRecords)
	// in one; Close's own floor checks come on top.
	if got := c.w.batches.Load() - batches; got > 2 {
		t.Errorf("%d updates took %d batches, want 2", n, got)
	}
	if got := d.checks() - checks; got > 4 {
		t.Errorf("%d updates took %d floor checks, want at most 4", n, got)
	}
	c = openCat(t, diskOpts(src, state, newFakeDisk(roomy), nil))
	defer c.Close()
	for _, e := range files {
		if got := c.Find(e.Path()); got == nil || got.Tier() != 1 {
			t.Fatalf("%s: residency not recorded after Close", e.Path())
		}
	}
}

// A busy catalog writes one batch per catalogBatchGap, not one per update
// back to back (each batch syncs the tiers' file systems), while an update
// to an idle catalog is written at once.
func TestCatalogWritesABusyStreamOfUpdatesOneBatchPerGapAndAnIdleUpdateAtOnce(t *testing.T) {
	n := 400
	src := wideSource(t, n)
	state := fastDir(t)
	o := diskOpts(src, state, newFakeDisk(roomy), nil)
	o.RetryInterval = time.Hour // no periodic floor check
	c := openCat(t, o)
	var files []*Entry
	c.Root().Files(func(e *Entry) bool { files = append(files, e); return true })
	time.Sleep(catalogBatchGap) // the catalog is idle

	// Idle: written at once, never held back for the gap.
	batches, held := c.w.batches.Load(), c.w.held.Load()
	files[0].SetTier(1)
	c.Persist(files[0])
	waitFor(t, "the idle update written", func() bool { return c.w.batches.Load() > batches })
	if n := c.w.held.Load() - held; n != 0 {
		t.Errorf("an update to an idle catalog was held back for the gap (%d times)", n)
	}

	// Busy: an update every millisecond for 4 gaps.
	batches, held = c.w.batches.Load(), c.w.held.Load()
	start := time.Now()
	for i := 1; i < n && time.Since(start) < 4*catalogBatchGap; i++ {
		files[i].SetTier(1)
		c.Persist(files[i])
		time.Sleep(time.Millisecond)
	}
	busy := time.Since(start)
	written := c.w.batches.Load() - batches
	// One batch per gap, not one per update: the bound leaves room for a
	// loaded machine (a batch that starts late, one at each end) and is
	// still far below the updates made.
	if limit := 2*int64(busy/catalogBatchGap) + 3; written > limit {
		t.Errorf("%v of updates took %d batches, want at most %d (about one per %v)", busy, written, limit, catalogBatchGap)
	}
	if written == 0 {
		t.Error("no batch written during a busy stream of updates")
	}
	if c.w.held.Load() == held {
		t.Error("no batch held back for the gap during a busy stream of updates")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openCat(t, diskOpts(src, state, newFakeDisk(roomy), nil))
	defer c.Close()
	for _, e := range files {
		if e.Tier() == 1 {
			if got := c.Find(e.Path()); got == nil || got.Tier() != 1 {
				t.Fatalf("%s: residency not recorded after Close", e.Path())
			}
		}
	}
}
