package placement

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/placement/internal/fixture"
	"github.com/epochfs/epochfs/internal/source"
	"github.com/epochfs/epochfs/internal/tier"
)

// The shared fixtures (internal/fixture), by the names these tests use.

type dataset = fixture.Dataset

var (
	waitFor      = fixture.WaitFor
	fastDir      = fixture.FastDir
	content      = fixture.Content
	writeDataset = fixture.WriteDataset
	openSource   = fixture.OpenSource
)

// sizedDataset is a tree of files from 0 B to a few MiB, in nested
// directories, with a non-ASCII name.
func sizedDataset() dataset {
	sizes := map[string]int{
		"empty":                   0,
		"one":                     1,
		"train/a/page-1":          4095,
		"train/a/page":            4096,
		"train/a/page+1":          4097,
		"train/b/img-110k.jpg":    110_000,
		"train/b/img-2.jpg":       123_457,
		"train/b/deep/er/x.bin":   65_537,
		"val/mib-1":               1<<20 - 1,
		"val/mib":                 1 << 20,
		"val/mib+1":               1<<20 + 1,
		"val/ünïcödé/日本語.bin":     300_001,
		"big/three-and-a-bit.tar": 3<<20 + 12_345,
		"big/two.tar":             2<<20 + 7,
		"z/small-00":              17,
		"z/small-01":              999,
		"z/small-02":              31_000,
	}
	d := dataset{}
	for p, n := range sizes {
		d[p] = content(p, n)
	}
	return d
}

// env is a source, a catalog, tiers and a placer over them.
type env struct {
	t      testing.TB
	src    string
	state  string
	data   dataset
	topts  []tier.Options
	cat    *catalog.Catalog
	source *source.Source
	tiers  []*tier.Tier
	p      *Placer
	popts  Options
	sopts  source.Options // Root is set by open
	// load, if set, opens the catalog with a background load held until
	// it is closed (catalog.Options.LoadHold).
	load chan struct{}
}

// newEnv writes data into a fresh source and opens everything over it.
// Each tier option needs Name and Quota; Dir defaults to a temp dir.
func newEnv(t testing.TB, data dataset, topts []tier.Options, popts Options) *env {
	t.Helper()
	return newEnvSource(t, data, topts, popts, source.Options{})
}

// newEnvSource is newEnv with source options (Root is filled in).
func newEnvSource(t testing.TB, data dataset, topts []tier.Options, popts Options, sopts source.Options) *env {
	t.Helper()
	e := &env{t: t, src: t.TempDir(), state: fastDir(t), data: data, popts: popts, sopts: sopts}
	writeDataset(t, e.src, data)
	for i := range topts {
		if topts[i].Dir == "" {
			topts[i].Dir = filepath.Join(fastDir(t), topts[i].Name)
		}
	}
	e.topts = topts
	e.open(false)
	t.Cleanup(e.close)
	return e
}

func (e *env) tierNames() []string {
	var names []string
	for _, o := range e.topts {
		names = append(names, o.Name)
	}
	return names
}

// open opens the catalog, the tiers and the placer.
func (e *env) open(rescan bool) {
	e.t.Helper()
	cat, err := catalog.Open(context.Background(), catalog.Options{
		StateDir: e.state, Source: e.src, Tiers: e.tierNames(), Rescan: rescan, Workers: 3,
		Background: e.load != nil, LoadHold: e.load,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.cat = cat
	e.tiers = nil
	for _, o := range e.topts {
		tr, err := tier.Open(o)
		if err != nil {
			e.t.Fatal(err)
		}
		e.tiers = append(e.tiers, tr)
	}
	so := e.sopts
	so.Root = e.src
	if so.IdentityInterval == 0 {
		// Every call checks the root: tests break the source and expect
		// the next call to see it.
		so.IdentityInterval, so.RecheckInterval = time.Nanosecond, time.Nanosecond
	}
	e.source = openSource(e.t, so)
	o := e.popts
	o.Catalog, o.Source, o.Tiers = cat, e.source, e.tiers
	if o.Workers == 0 {
		o.Workers = 3
	}
	if o.MaxDrop == 0 {
		// The test datasets are small: one removed file is a tenth of
		// them. The guard's own test sets it (dropguard_test.go).
		o.MaxDrop = 1
	}
	p, err := New(o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.p = p
}

// close closes the placer, then the catalog (as the mount does).
func (e *env) close() {
	if e.p != nil {
		e.p.Close()
		e.p = nil
	}
	if e.cat != nil {
		if err := e.cat.Close(); err != nil {
			e.t.Error(err)
		}
		e.cat = nil
	}
}

func (e *env) entry(p string) *catalog.Entry {
	e.t.Helper()
	en := e.cat.Find(p)
	if en == nil {
		e.t.Fatalf("no catalog entry for %q", p)
	}
	return en
}

// usedTotal sums the tiers' installed bytes.
func (e *env) usedTotal() (used, files int64) {
	for _, t := range e.tiers {
		used += t.Used()
		files += t.Files()
	}
	return used, files
}

// checkAccounting fails unless the tiers account exactly the resident
// files the catalog records.
func (e *env) checkAccounting() {
	e.t.Helper()
	files, bytes := e.p.residency()
	used, tfiles := e.usedTotal()
	if used != bytes || tfiles != files {
		e.t.Errorf("tiers account %d bytes in %d files; the catalog has %d bytes in %d resident files", used, tfiles, bytes, files)
	}
	for i, t := range e.tiers {
		if t.Used() > t.Quota() {
			e.t.Errorf("tier %d uses %d bytes over its quota %d", i, t.Used(), t.Quota())
		}
	}
}

// waitResident waits until every file of the dataset is resident.
func (e *env) waitResident() {
	e.t.Helper()
	waitFor(e.t, "every file resident and every copy ended", func() bool {
		n, _ := e.p.residency()
		return n == e.cat.Files() && e.p.Stats().Queued == 0 && e.p.cp.flights.Size() == 0
	})
}

// readPattern is how a test reads a file: from off, in chunks of buf
// bytes, at most max bytes (0: to the end).
type readPattern struct {
	buf      int
	off, max int64
}

var patterns = []readPattern{
	{buf: 1 << 20}, {buf: 65_537}, {buf: 4093, off: 1}, {buf: 1, max: 300},
	{buf: 777_777, off: -1},      // off -1: a third of the file
	{buf: 13, off: -2, max: 100}, // off -2: the last byte
	{buf: 8, off: -3},            // off -3: past the end
}

// readCheck reads the file through r with the pattern and compares every
// chunk with want. A short read before the end of the file is an error.
func readCheck(ctx context.Context, r *Reader, want []byte, pt readPattern) error {
	size := int64(len(want))
	off := pt.off
	switch off {
	case -1:
		off = size / 3
	case -2:
		off = size - 1
		if off < 0 {
			off = 0
		}
	case -3:
		off = size + 5
	}
	end := size
	if pt.max > 0 && off+pt.max < end {
		end = off + pt.max
	}
	buf := make([]byte, pt.buf)
	for {
		n, err := r.ReadAt(ctx, buf, off)
		if err != nil {
			return fmt.Errorf("ReadAt(%d bytes at %d): %w", len(buf), off, err)
		}
		exp := int64(len(buf))
		if off >= size {
			exp = 0
		} else if size-off < exp {
			exp = size - off
		}
		if int64(n) != exp {
			return fmt.Errorf("ReadAt(%d bytes at %d) of a %d-byte file returned %d bytes, want %d", len(buf), off, size, n, exp)
		}
		if n > 0 && !bytes.Equal(buf[:n], want[off:off+int64(n)]) {
			return fmt.Errorf("ReadAt(%d bytes at %d): data differs from the source", len(buf), off)
		}
		off += int64(n)
		if n == 0 || off >= end {
			return nil
		}
	}
}

// readAllFiles opens every file of the dataset concurrently (one goroutine
// per file and pattern) and checks its bytes.
func (e *env) readAllFiles() {
	e.t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, p := range e.data.Paths() {
		want := e.data[p]
		en := e.entry(p)
		for _, pt := range patterns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := e.p.Open(ctx, en)
				if err != nil {
					e.t.Errorf("open %s: %v", p, err)
					return
				}
				defer r.Close()
				if err := readCheck(ctx, r, want, pt); err != nil {
					e.t.Errorf("%s %+v: %v", p, pt, err)
				}
			}()
		}
	}
	wg.Wait()
}

// tempFiles lists the copy temp files under a tier's DIR/.tmp.
func tempFiles(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dir, ".tmp"))
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if strings.HasPrefix(de.Name(), "copy-") {
			out = append(out, de.Name())
		}
	}
	return out
}
