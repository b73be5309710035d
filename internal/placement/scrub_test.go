package placement

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// scrub runs one request and waits for it.
func (e *env) scrub(req ScrubRequest) ScrubProgress {
	e.t.Helper()
	before := e.p.Scrubber().Status().Finished
	if err := e.p.Scrubber().Request(req); err != nil {
		e.t.Fatalf("Scrub(%+v): %v", req, err)
	}
	waitFor(e.t, "the scrub to finish", func() bool {
		s := e.p.Scrubber().Status()
		return s.Finished > before && !s.Running && s.Pending == 0
	})
	return e.p.Scrubber().Status()
}

// treePaths lists every entry under the catalog root.
func treePaths(c *catalog.Catalog) []string {
	var out []string
	c.Root().Walk(func(x *catalog.Entry) bool {
		if x.Path() != "" {
			out = append(out, x.Path())
		}
		return true
	})
	sort.Strings(out)
	return out
}

// sourcePaths lists every entry under a source root.
func sourcePaths(t *testing.T, root string) []string {
	var out []string
	filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if p != root {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

func TestRefreshPicksUpAddedRemovedAndChangedFilesWithoutARemount(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{})
	e.p.warmups.queueAll()
	e.waitResident()
	var mu sync.Mutex
	kinds := map[EventKind]int{}
	e.p.SetNotify(func(ev Event) { mu.Lock(); kinds[ev.Kind]++; mu.Unlock() })

	// On the source: a file changed, one added in an existing directory,
	// a new directory tree, a file and a directory removed, a file
	// replaced by a directory, a symlink added.
	w := func(p string, b []byte) {
		full := filepath.Join(e.src, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
		d[p] = b
	}
	w("train/a/page", content("changed", 5000))
	w("train/a/new.jpg", content("new", 7777))
	w("fresh/x/1.bin", content("f1", 100))
	w("fresh/x/2.bin", content("f2", 200))
	os.Remove(filepath.Join(e.src, "z/small-00"))
	delete(d, "z/small-00")
	os.RemoveAll(filepath.Join(e.src, "train/b"))
	for p := range d {
		if strings.HasPrefix(p, "train/b/") {
			delete(d, p)
		}
	}
	os.Remove(filepath.Join(e.src, "one"))
	delete(d, "one")
	w("one/inside", content("inside", 10))
	os.Symlink("train/a/page", filepath.Join(e.src, "link"))

	oldPage := e.entry("train/a/page")
	s := e.scrub(ScrubRequest{Kind: ScrubRefresh})
	if s.Errors != 0 || s.Changed != 1 || s.Dropped != 1 || s.Added != 4 || s.Removed != 5 {
		t.Fatalf("refresh: %+v; want 1 changed (its copy dropped), 4 added, 5 removed, no error", s)
	}
	if got, want := treePaths(e.cat), sourcePaths(t, e.src); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("tree after refresh:\n%v\nsource:\n%v", got, want)
	}
	// Warmup "all" places the new version again: any copy is of it.
	if i := oldPage.Tier(); i >= 0 {
		if got, _ := os.ReadFile(e.tiers[i].Path("train/a/page")); string(got) != string(d["train/a/page"]) {
			t.Error("the changed file kept its old copy")
		}
	}
	if e.cat.Files() != int64(len(d)) || e.cat.Bytes() != d.Bytes() {
		t.Errorf("catalog counts %d files %d bytes, want %d, %d", e.cat.Files(), e.cat.Bytes(), len(d), d.Bytes())
	}
	if l := e.cat.Find("link"); l == nil || l.Kind() != catalog.KindSymlink || l.Target() != "train/a/page" {
		t.Errorf("symlink: %+v", l)
	}
	e.readEveryFileOnce()
	mu.Lock()
	if kinds[EntryAdded] == 0 || kinds[EntryRemoved] == 0 || kinds[EntryChanged] == 0 {
		t.Errorf("events: %v", kinds)
	}
	mu.Unlock()
	// New entries get new IDs and indices: none collides.
	ids, idx := map[uint64]bool{}, map[int32]bool{}
	e.cat.Root().Walk(func(x *catalog.Entry) bool {
		if ids[x.ID()] || (x.Index >= 0 && idx[x.Index]) {
			t.Errorf("%s: ID %d or Index %d given twice", x.Path(), x.ID(), x.Index)
		}
		ids[x.ID()], idx[x.Index] = true, x.Index >= 0
		return true
	})
	e.cat.Root().Files(func(x *catalog.Entry) bool {
		if e.cat.ByIndex(int(x.Index)) != x {
			t.Errorf("ByIndex(%d) is not %s", x.Index, x.Path())
		}
		return true
	})
	if x := e.cat.ByIndex(int(oldPage.Index)); x != oldPage {
		t.Error("a changed file lost its number")
	}
	// The records were persisted: a remount loads the new tree.
	e.close()
	e.open(false)
	if e.cat.Walked() {
		t.Fatal("remount walked")
	}
	if got, want := treePaths(e.cat), sourcePaths(t, e.src); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("tree after remount:\n%v\nsource:\n%v", got, want)
	}
	e.readEveryFileOnce()
	e.checkAccounting()
}

func TestRefreshOfPathsAddsAPathTheCatalogDoesNotKnow(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{})
	for _, p := range []string{"new/deep/er/file.bin", "train/a/also-new"} {
		full := filepath.Join(e.src, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, content(p, 321), 0o644)
		d[p] = content(p, 321)
	}
	// Also new in train/a, but not asked for: a refresh of paths looks
	// only one level around the missing parents.
	os.WriteFile(filepath.Join(e.src, "train/a/unasked"), []byte("x"), 0o644)
	s := e.scrub(ScrubRequest{Kind: ScrubRefresh, Paths: []string{"new/deep/er/file.bin", "./train/a/also-new"}})
	if s.Errors != 0 || s.Added < 2 {
		t.Fatalf("refresh of new paths: %+v", s)
	}
	for _, p := range []string{"new/deep/er/file.bin", "train/a/also-new"} {
		if err := e.openRead(p, d[p]); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	s = e.scrub(ScrubRequest{Kind: ScrubRefresh, Paths: []string{"no/such/path"}})
	if s.Errors != 1 || !strings.Contains(s.LastErr, "no/such/path") {
		t.Fatalf("refresh of a path the source lacks: %+v", s)
	}
}

func TestRefreshOfAFailingSourceRemovesNothing(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{})
	repair := breakSource(t, e.src)
	s := e.scrub(ScrubRequest{Kind: ScrubRefresh})
	if s.Errors == 0 || s.Removed != 0 {
		t.Fatalf("refresh of a failing source: %+v", s)
	}
	repair()
	if e.cat.Files() != int64(len(d)) {
		t.Fatalf("%d files left of %d", e.cat.Files(), len(d))
	}
	e.readEveryFileOnce()
}

func TestVerifyDropsCopiesThatDifferFromTheSourceAndPlacesThemAgain(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{})
	e.p.warmups.queueAll()
	e.waitResident()
	// Same size, other bytes: only a content verify sees it.
	corrupt := filepath.Join(e.tiers[0].Path("val/mib"))
	b, _ := os.ReadFile(corrupt)
	b[len(b)/2] ^= 0xff
	os.WriteFile(corrupt, b, 0o600)
	// Truncated: the size check sees it.
	os.Truncate(e.tiers[0].Path("big/two.tar"), 1000)
	// Changed on the source behind the catalog's back.
	os.WriteFile(filepath.Join(e.src, "z/small-02"), content("other", 31_000), 0o644)
	later := time.Now().Add(time.Minute)
	os.Chtimes(filepath.Join(e.src, "z/small-02"), later, later)
	d["z/small-02"] = content("other", 31_000)

	s := e.scrub(ScrubRequest{Kind: ScrubVerify})
	if s.Dropped != 2 || s.Changed != 1 || s.Errors != 0 || s.Checked != int64(len(d)) {
		t.Fatalf("verify: %+v; want 2 dropped (the truncated copy, the changed file's), 1 changed, %d checked", s, len(d))
	}
	if e.entry("val/mib").Tier() < 0 {
		t.Fatal("a size-and-mtime verify dropped a same-size copy")
	}
	s = e.scrub(ScrubRequest{Kind: ScrubVerifyContent, Paths: []string{"val"}})
	if s.Dropped != 1 || s.Errors != 0 {
		t.Fatalf("content verify of val: %+v", s)
	}
	e.waitResident()
	for _, p := range []string{"val/mib", "big/two.tar", "z/small-02"} {
		got, _ := os.ReadFile(e.tiers[0].Path(p))
		if string(got) != string(d[p]) {
			t.Errorf("%s: the copy placed again differs from the source", p)
		}
	}
	e.readEveryFileOnce()
	e.checkAccounting()
	if err := e.p.Scrubber().Request(ScrubRequest{Kind: ScrubVerify, Paths: []string{"nope"}}); err == nil {
		t.Error("verify of a path not in the dataset was accepted")
	}
}

// TestARefreshAddsBeforeItRemoves: a directory renamed on the source is,
// for a refresh, a directory removed and one added; the dataset never
// has none of its files in between (a job made then was refused, "the
// dataset has no file left").
func TestARefreshAddsBeforeItRemoves(t *testing.T) {
	d := dataset{}
	for _, n := range []string{"1", "2", "3", "4"} {
		d["only/sub/f"+n] = content(n, 100)
	}
	e := newEnv(t, d, oneTier(1<<30), Options{})
	if err := os.Rename(filepath.Join(e.src, "only"), filepath.Join(e.src, "renamed")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var fewest int64 = -1
	var events []string
	e.p.SetNotify(func(ev Event) {
		var n int64
		e.cat.Root().Files(func(*catalog.Entry) bool { n++; return true })
		mu.Lock()
		if fewest < 0 || n < fewest {
			fewest = n
		}
		events = append(events, ev.Entry.Path())
		mu.Unlock()
	})
	s := e.scrub(ScrubRequest{Kind: ScrubRefresh})
	if s.Errors != 0 || s.Added != 4 || s.Removed != 4 {
		t.Fatalf("refresh: %+v; want 4 added, 4 removed, no error", s)
	}
	if got, want := treePaths(e.cat), sourcePaths(t, e.src); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("tree after refresh:\n%v\nsource:\n%v", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if fewest < 4 {
		t.Fatalf("the dataset had %d files at one point of the refresh (events %v); the source always had 4", fewest, events)
	}
}

// TestARefreshAddsThousandsOfFilesToADirectoryInBatches: more new files
// in one directory than a batch holds (addBatch), and a new directory
// beside them, all join the dataset, each numbered once and announced;
// removed from the source, they leave it together, within max_drop; and
// a new file waits for its batch at most addWait, not for the end of
// a scan of its directory that the refresh rate makes longer.
func TestARefreshAddsThousandsOfFilesToADirectoryInBatches(t *testing.T) {
	d := sizedDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{RefreshRate: 1e6, MaxDrop: DefaultMaxDrop})
	var mu sync.Mutex
	announced := 0
	e.p.SetNotify(func(ev Event) {
		if ev.Kind == EntryAdded {
			mu.Lock()
			announced++
			mu.Unlock()
		}
	})
	const n = addBatch + 100
	for i := range n {
		p := fmt.Sprintf("train/a/new-%05d", i)
		b := content(p, i%300)
		if err := os.WriteFile(filepath.Join(e.src, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
		d[p] = b
	}
	if err := os.MkdirAll(filepath.Join(e.src, "train/a/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	d["train/a/sub/x"] = content("x", 10)
	if err := os.WriteFile(filepath.Join(e.src, "train/a/sub/x"), d["train/a/sub/x"], 0o644); err != nil {
		t.Fatal(err)
	}
	s := e.scrub(ScrubRequest{Kind: ScrubRefresh})
	if s.Errors != 0 || s.Added != n+1 {
		t.Fatalf("refresh: %+v; want %d added, no error", s, n+1)
	}
	if got, want := treePaths(e.cat), sourcePaths(t, e.src); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the tree after the refresh has %d entries, the source %d", len(got), len(want))
	}
	if e.cat.Files() != int64(len(d)) || e.cat.Bytes() != d.Bytes() {
		t.Errorf("catalog counts %d files %d bytes, want %d, %d", e.cat.Files(), e.cat.Bytes(), len(d), d.Bytes())
	}
	seen := map[int32]bool{}
	e.cat.Root().Files(func(x *catalog.Entry) bool {
		if seen[x.Index] || e.cat.ByIndex(int(x.Index)) != x {
			t.Errorf("%s: Index %d given twice or not found", x.Path(), x.Index)
		}
		seen[x.Index] = true
		return true
	})
	mu.Lock()
	if announced != n+2 { // the files, the directory and its file
		t.Errorf("%d additions announced, want %d", announced, n+2)
	}
	mu.Unlock()

	// Removed from the source, they leave together (catalog.RemoveAll):
	// past max_drop the refresh keeps them, unless asked to drop them.
	files := e.cat.Files()
	for i := range n {
		p := fmt.Sprintf("train/a/new-%05d", i)
		if err := os.Remove(filepath.Join(e.src, p)); err != nil {
			t.Fatal(err)
		}
		delete(d, p)
	}
	s = e.scrub(ScrubRequest{Kind: ScrubRefresh})
	if s.Removed >= n || s.Held == 0 || !strings.Contains(s.LastErr, "train/a/new-") || e.cat.Files() <= files-n {
		t.Fatalf("a refresh past max_drop: %+v, %d files of %d; want most kept and the error naming one", s, e.cat.Files(), files)
	}
	s = e.scrub(ScrubRequest{Kind: ScrubRefresh, AllowDrop: true})
	if s.Errors != 0 || e.cat.Files() != files-n {
		t.Fatalf("a refresh allowed to drop: %+v, %d files; want %d", s, e.cat.Files(), files-n)
	}
	if got, want := treePaths(e.cat), sourcePaths(t, e.src); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the tree after the removal has %d entries, the source %d", len(got), len(want))
	}
	if e.cat.Bytes() != d.Bytes() {
		t.Errorf("catalog counts %d bytes, want %d", e.cat.Bytes(), d.Bytes())
	}

	// A slow scan: 400 entries at 200 a second, the new one first.
	sd := sizedDataset()
	for i := range 400 {
		sd[fmt.Sprintf("z/old-%03d", i)] = nil
	}
	slow := newEnv(t, sd, oneTier(1<<30), Options{RefreshRate: 200})
	if err := os.WriteFile(filepath.Join(slow.src, "z/a-new"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := slow.p.Scrubber().Request(ScrubRequest{Kind: ScrubRefresh, Paths: []string{"z"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new file to join while its directory is scanned", func() bool {
		if slow.cat.Find("z/a-new") != nil {
			if st := slow.p.Scrubber().Status(); !st.Running && st.Pending == 0 {
				t.Fatal("z/a-new joined only once the scan of z ended")
			}
			return true
		}
		return false
	})
}

// A refresh logs what it adds to or removes from a directory in one Info
// line a batch, naming the directory and the count, not one a file; a
// single entry keeps its line with its path.
func TestARefreshLogsADirectorysNewAndGoneEntriesOnceABatch(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	e := newEnv(t, sizedDataset(), oneTier(1<<30), Options{RefreshRate: 1e6, Logger: zap.New(core)})
	const n = 300
	write := func(p string) {
		if err := os.WriteFile(filepath.Join(e.src, p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		write(fmt.Sprintf("train/a/new-%03d", i))
	}
	write("train/b/alone")
	// lines returns the Info lines of msg, and the entries they cover.
	lines := func(msg string) (batches []observer.LoggedEntry, single []string, entries int64) {
		for _, l := range logs.FilterMessage(msg).TakeAll() {
			f := l.ContextMap()
			if p, ok := f["path"].(string); ok {
				single = append(single, p)
				entries++
				continue
			}
			if f["dir"] != "train/a" || f["entries"] != f["files"] {
				t.Errorf("%s: %v; want the directory train/a, all files", msg, f)
			}
			batches = append(batches, l)
			entries += f["entries"].(int64)
		}
		return batches, single, entries
	}
	if s := e.scrub(ScrubRequest{Kind: ScrubRefresh}); s.Errors != 0 || s.Added != n+1 {
		t.Fatalf("refresh: %+v; want %d added", s, n+1)
	}
	batches, single, entries := lines("added on the source; added to the dataset")
	if len(batches) == 0 || len(batches) > 5 || entries != n+1 || !slices.Contains(single, "train/b/alone") {
		t.Fatalf("additions logged in %d batch lines and %d single ones (%v…) for %d entries; want a few batches, train/b/alone alone, %d entries",
			len(batches), len(single), single[:min(3, len(single))], entries, n+1)
	}
	for i := range n {
		if err := os.Remove(filepath.Join(e.src, fmt.Sprintf("train/a/new-%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(e.src, "train/b/alone")); err != nil {
		t.Fatal(err)
	}
	if s := e.scrub(ScrubRequest{Kind: ScrubRefresh, AllowDrop: true}); s.Errors != 0 || s.Removed != n+1 {
		t.Fatalf("refresh: %+v; want %d removed", s, n+1)
	}
	batches, single, entries = lines("gone from the source; removed from the dataset")
	if len(batches) != 1 || entries != n+1 || !slices.Equal(single, []string{"train/b/alone"}) {
		t.Fatalf("removals logged in %d batch lines and %d single ones (%v…) for %d entries; want one batch and train/b/alone alone, %d entries",
			len(batches), len(single), single[:min(3, len(single))], entries, n+1)
	}
	if f := batches[0].ContextMap(); f["first"] != "train/a/new-000" || f["last"] != fmt.Sprintf("train/a/new-%03d", n-1) {
		t.Errorf("the batch line names %v … %v; want the first and last removed", f["first"], f["last"])
	}
}
