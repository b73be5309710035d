package mount

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/epochfs/epochfs/test/faultfs"
)

// faultMount mounts an env over a faultfs view of dir with a 1 GiB tier;
// prepare, if set, runs before the mount (delays, options). The source's
// cleanup runs before the mount's.
func faultMount(t *testing.T, dir string, prepare func(*faultfs.FS, *env)) (*env, *faultfs.FS) {
	t.Helper()
	f := faultfs.Start(t, dir)
	e := newEnv(t, f.Mnt(), 1<<30)
	if prepare != nil {
		prepare(f, e)
	}
	e.mount()
	t.Cleanup(f.Close)
	return e, f
}

// The first epoch costs the source one open per file: the open of a file
// that is not resident is its check (an fstat of the descriptor, no lstat
// by path), the copy reads through that descriptor, and the readers follow
// the copy. Counted by epochfs (source_opens, source_stats) and by the
// source itself (faultfs serves every request: no kernel caching there).
func TestFirstEpochOpensEachFileOnceAtTheSource(t *testing.T) {
	requireFUSE(t)
	dir, paths := makeSamples(t, 100, 16<<10)
	e, f := faultMount(t, dir, nil)
	before := f.Counts()
	readPass(t, dir, e.mnt, paths, 1)
	e.settle()
	after := f.Counts()
	n := int64(len(paths))
	if got := e.num("source_opens"); got != n {
		t.Errorf("%d source opens for %d files, want one per file", got, n)
	}
	if got := e.num("source_stats"); got != 0 {
		t.Errorf("%d source stats (lstat by path) in the first epoch, want none", got)
	}
	if got := after["open"] - before["open"]; got != n {
		t.Errorf("the source served %d opens for %d files, want one per file", got, n)
	}
	if r, all := e.num("files_resident"), e.num("files_total"); r != all {
		t.Fatalf("%d of %d files resident after the first epoch", r, all)
	}
	t.Logf("per file at the source: %v → %v", before, after)
	// Later epochs: nothing at all but the check of the source root's
	// identity, at most once a second (source.Options.IdentityInterval:
	// a stat and a statfs of the root), which a slow pass meets.
	before = f.Counts()
	start := time.Now()
	readPass(t, dir, e.mnt, paths, 2)
	checks := int64(time.Since(start)/time.Second) + 1
	after = f.Counts()
	statfs := after["statfs"] - before["statfs"]
	if statfs > checks {
		t.Errorf("second epoch: %d statfs requests at the source in %d s, want at most one a second", statfs, checks)
	}
	for op, c := range after {
		switch n := c - before[op]; {
		case op == "statfs":
		case op == "getattr" && n <= 2*statfs: // the root's, by path and by descriptor
		case n != 0:
			t.Errorf("second epoch: %d %s requests at the source, want 0", n, op)
		}
	}
}

// The next job's remount within validate_ttl trusts the checks the first
// mount recorded: its first epoch sends the source no request at all. An
// unmount and a mount of the same state is what the per-job prolog and
// epilog do.
func TestRemountWithinTheTTLSendsTheSourceNothing(t *testing.T) {
	requireFUSE(t)
	dir, paths := makeSamples(t, 100, 16<<10)
	e, f := faultMount(t, dir, func(_ *faultfs.FS, e *env) { e.opts.validateTTL = 24 * time.Hour })
	readPass(t, dir, e.mnt, paths, 1)
	e.settle()
	e.unmount()
	mountBefore := f.Counts()
	e.mount()
	// The mount itself checks the source root (a stat and a statfs: is it
	// still the PFS it was?), nothing under it.
	before := f.Counts()
	for op, c := range before {
		if c-mountBefore[op] > 1 {
			t.Errorf("the remount sent %d %s requests, want at most one (the root)", c-mountBefore[op], op)
		}
	}
	if st := e.status(); st["validate_ttl"] != "24h0m0s" || st["revalidate_pending"] != "0" {
		t.Errorf("status validate_ttl=%s revalidate_pending=%s, want 24h0m0s and 0", st["validate_ttl"], st["revalidate_pending"])
	}
	readPass(t, dir, e.mnt, paths, 2)
	after := f.Counts()
	for op, c := range after {
		if c != before[op] {
			t.Errorf("first epoch of the remount: %d %s requests at the source, want 0", c-before[op], op)
		}
	}
	if got := e.num("source_stats") + e.num("source_opens"); got != 0 {
		t.Errorf("first epoch of the remount: %d source stats and opens, want 0", got)
	}
}

// cat of every file in path order (a reader without shuffling) is read
// ahead: the copies of the next files start before cat asks, and the
// source still sees one open per file.
func TestCatInPathOrderIsReadAheadWithOneOpenPerFile(t *testing.T) {
	requireFUSE(t)
	dir, paths := makeSamples(t, 200, 8<<10)
	e, f := faultMount(t, dir, nil)
	before := f.Counts()
	out, err := exec.Command("bash", "-c", "cd "+e.mnt+" && find . -type f -not -path './.epochfs/*' -print0 | sort -z | xargs -0 cat | wc -c").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != fmt.Sprint(len(paths)*(8<<10)) {
		t.Fatalf("cat of every file: %q, %v", out, err)
	}
	e.settle()
	after := f.Counts()
	if n := e.num("read_ahead_copies"); n < int64(len(paths))/2 {
		t.Errorf("read_ahead_copies = %d for %d files read in path order", n, len(paths))
	}
	if got := after["open"] - before["open"]; got != int64(len(paths)) {
		t.Errorf("the source served %d opens for %d files, want one per file", got, len(paths))
	}
	if r := e.num("files_resident"); r != int64(len(paths)) {
		t.Errorf("%d of %d files resident", r, len(paths))
	}
}

// A reader that opens a tree's files in no order (an unprivileged user's
// shuffled cat, as a shuffling loader does) has the rest of the tree copied
// after placement.fill_after of them; the files that user may not open are
// not copied for it. Driven through the CLI with a config file.
func TestAShuffledReaderHasTheRestOfItsTreeCopied(t *testing.T) {
	requireFUSE(t)
	src, paths := makeSamples(t, 64, 4<<10)
	secret := []string{paths[5], paths[22], paths[40]}
	for _, p := range secret {
		if err := os.Chmod(filepath.Join(src, p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	base := t.TempDir()
	for d := base; d != "/" && d != "/tmp"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // others reach the mount point
	}
	mnt, tierDir, cfg := filepath.Join(base, "mnt"), filepath.Join(base, "tier"), filepath.Join(base, "epochfs.toml")
	os.Mkdir(mnt, 0o755)
	if err := os.WriteFile(cfg, []byte("[placement]\nfill_after = 8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	binMount(t, src, mnt, filepath.Join(base, "state"), "--config", cfg, "--tier=disk="+tierDir+":1GiB")
	// Ten readable files in a shuffled order, as the test user.
	code, out := shell(t, true, `cd "$1" && find . -type f -perm -o=r -not -path './.epochfs/*' | shuf -n 10 | xargs cat | wc -c`, mnt)
	if code != 0 || strings.TrimSpace(out) != strconv.Itoa(10*4<<10) {
		t.Fatalf("shuffled cat as the test user: exit %d: %s", code, out)
	}
	want := strconv.Itoa(len(paths) - len(secret))
	deadline := time.Now().Add(30 * time.Second)
	for statusOf(t, mnt)["files_resident"] != want || statusOf(t, mnt)["placements_queued"] != "0" {
		if time.Now().After(deadline) {
			t.Fatalf("not every readable file resident after 30 s: %v", statusOf(t, mnt))
		}
		time.Sleep(50 * time.Millisecond)
	}
	st := statusOf(t, mnt)
	if st["fills"] != "1" {
		t.Errorf("fills = %s, want 1 (the dataset's root, the smallest directory holding four classes)", st["fills"])
	}
	for _, p := range secret {
		if _, err := os.Lstat(filepath.Join(tierDir, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s (0600, root's) has a tier copy after a fill for the test user: %v", p, err)
		}
	}
	if code, out := cli(t, "unmount", mnt); code != 0 {
		t.Fatal(out)
	}
}

// The next job's mount registers the copies the last one left before its
// readers open them (fuse.prewarm): its first epoch opens every resident
// file as a later epoch does, from a kept copy with its registration, and
// registers nothing more. Within a budget smaller than the dataset it
// keeps what fits and releases none for it; the readers' opens release the
// prewarmed copies first, within the budget, and read every file right.
func TestARemountPrewarmsTheKeptCopies(t *testing.T) {
	requireFUSE(t)
	dir, paths := makeSamples(t, 100, 16<<10)
	for _, tc := range []struct {
		name       string
		keptCopies int
		prewarm    bool
	}{
		{"within the budget", 0, true},
		{"a budget of 40", 40, true},
		{"off", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := faultMount(t, dir, func(_ *faultfs.FS, e *env) {
				e.opts.validateTTL = 24 * time.Hour
				e.opts.keptCopies = tc.keptCopies
				e.opts.prewarm = tc.prewarm
			})
			requirePassthrough(t, e)
			readPass(t, dir, e.mnt, paths, 1)
			e.settle()
			e.unmount()
			e.mount()
			st := e.status()
			if !tc.prewarm {
				if st["prewarm"] != "off" || st["prewarm_copies"] != "0" {
					t.Fatalf("prewarm=%s prewarm_copies=%s with fuse.prewarm off, want off and 0", st["prewarm"], st["prewarm_copies"])
				}
				readPass(t, dir, e.mnt, paths, 2)
				if n := e.num("kept_misses"); n != int64(len(paths)) {
					t.Errorf("kept_misses=%d without prewarm, want %d (every first open opens its copy)", n, len(paths))
				}
				return
			}
			waitFor(t, func() bool { return e.status()["prewarm"] == "done" })
			want := int64(len(paths))
			if tc.keptCopies > 0 {
				want = int64(tc.keptCopies)
			}
			if n := e.num("prewarm_copies"); n != want {
				t.Fatalf("prewarm_copies=%d, want %d", n, want)
			}
			if n := e.num("passthrough_registrations"); n != want {
				t.Fatalf("passthrough_registrations=%d after the prewarm, want %d", n, want)
			}
			if n := e.num("kept_misses"); n != 0 {
				t.Fatalf("kept_misses=%d before any open, want 0 (a prewarm is not a reader's miss)", n)
			}
			readPass(t, dir, e.mnt, paths, 2)
			st = e.status()
			misses, _ := strconv.ParseInt(st["kept_misses"], 10, 64)
			regs, _ := strconv.ParseInt(st["passthrough_registrations"], 10, 64)
			if tc.keptCopies == 0 {
				if misses != 0 || regs != want {
					t.Errorf("first epoch after the remount: kept_misses=%d passthrough_registrations=%d, want 0 and %d", misses, regs, want)
				}
				return
			}
			// The readers' opens beyond the budget release copies, the
			// prewarmed ones that nobody opened first.
			if misses < int64(len(paths))-want {
				t.Errorf("first epoch after the remount: kept_misses=%d, want at least %d", misses, int64(len(paths))-want)
			}
			if n, _ := strconv.ParseInt(st["kept_copies"], 10, 64); n > int64(tc.keptCopies) {
				t.Errorf("kept_copies=%d over the budget of %d", n, tc.keptCopies)
			}
		})
	}
}
