package catalog

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// mappedRSS sums the resident bytes of this process's mappings of files
// under dir (/proc/self/smaps).
func mappedRSS(t *testing.T, dir string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rss int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if isMapping(line) {
			fields := strings.Fields(line)
			in = len(fields) >= 6 && strings.HasPrefix(strings.Join(fields[5:], " "), dir+"/")
			continue
		}
		if v, ok := strings.CutPrefix(line, "Rss:"); ok && in {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("smaps: %q: %v", line, err)
			}
			rss += kb << 10
		}
	}
	return rss
}

// isMapping reports that an smaps line starts a mapping ("start-end perms
// ..."), anonymous or not.
func isMapping(line string) bool {
	lo, hi, ok := strings.Cut(strings.Fields(line + " x")[0], "-")
	_, err1 := strconv.ParseUint(lo, 16, 64)
	_, err2 := strconv.ParseUint(hi, 16, 64)
	return ok && err1 == nil && err2 == nil
}

// After a load read every record, PageOut hands the pages of the
// catalog's mapped files back to the kernel, and the catalog still reads
// its records (the pages fault back in).
func TestPageOutHandsBackTheCatalogsMappedPages(t *testing.T) {
	src := t.TempDir()
	writeDataset(t, src, wideDataset(40, 50))
	state := t.TempDir()
	c := openCat(t, Options{StateDir: state, Source: src, Tiers: []string{"mem"}})
	c.Close()
	c = openCat(t, Options{StateDir: state, Source: src, Tiers: []string{"mem"}})
	defer c.Close()
	if c.Walked() {
		t.Fatal("walked again instead of loading")
	}
	// Written back, as the files of a catalog are once their writes are
	// 30 s old: the kernel writes dirty pages back before it reclaims
	// them.
	d, err := os.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		t.Fatal(err)
	}
	d.Close()
	before := mappedRSS(t, c.mapDir)
	if before == 0 {
		t.Fatalf("no page of the catalog's files (%s) is mapped after a load: nothing to test", c.mapDir)
	}
	n, err := c.PageOut()
	if err != nil {
		t.Fatal(err)
	}
	after := mappedRSS(t, c.mapDir)
	t.Logf("mapped %d bytes; resident %d before, %d after", n, before, after)
	if n == 0 || after > before/4 {
		t.Errorf("PageOut over %d mapped bytes: resident %d → %d bytes, want at most a quarter left", n, before, after)
	}
	p := "a03/b03/f07"
	if _, err := c.StoredTier(p); err != nil {
		t.Fatalf("the catalog cannot read %s after PageOut: %v", p, err)
	}
}

func TestMappedUnderParsesMapsLines(t *testing.T) {
	dir := "/var/state/catalog"
	for _, tc := range []struct {
		line       string
		start, end uintptr
		ok         bool
	}{
		{"7f0000000000-7f0000010000 r--s 00000000 08:01 1234 /var/state/catalog/000001.sst", 0x7f0000000000, 0x7f0000010000, true},
		{"7f0000000000-7f0000010000 rw-s 00000000 08:01 1234 /var/state/catalog/00001.mem", 0x7f0000000000, 0x7f0000010000, true},
		{"7f0000000000-7f0000010000 rw-s 00000000 08:01 1234 /var/state/catalog/a b.vlog (deleted)", 0x7f0000000000, 0x7f0000010000, true},
		{"7f0000000000-7f0000010000 r--p 00000000 08:01 1234 /var/state/catalog/000001.sst", 0, 0, false}, // private
		{"7f0000000000-7f0000010000 r--s 00000000 08:01 1234 /var/state/catalogue/x", 0, 0, false},        // another directory
		{"7f0000000000-7f0000010000 rw-p 00000000 00:00 0", 0, 0, false},                                  // anonymous
		{"7f0000010000-7f0000000000 r--s 00000000 08:01 1234 /var/state/catalog/x", 0, 0, false},          // end before start
		{"zz-7f0000010000 r--s 00000000 08:01 1234 /var/state/catalog/x", 0, 0, false},
		{"", 0, 0, false},
	} {
		r, ok := mappedUnder([]byte(tc.line), dir)
		if ok != tc.ok || (ok && (r[0] != tc.start || r[1] != tc.end)) {
			t.Errorf("%q: %x %v, want %x-%x %v", tc.line, r, ok, tc.start, tc.end, tc.ok)
		}
	}
}

func FuzzMappedUnder(f *testing.F) {
	f.Add([]byte("7f0000000000-7f0000010000 r--s 00000000 08:01 1234 /d/catalog/000001.sst"))
	f.Add([]byte("0-1 rw-s 0 0:0 0 /d/catalog/x"))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, ok := mappedUnder(line, "/d/catalog")
		if ok && (r[1] <= r[0] || !bytes.Contains(line, []byte("/d/catalog/"))) {
			t.Fatalf("%q: accepted %x", line, r)
		}
	})
}
