package catalog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/epochfs/epochfs/internal/source"
)

// fullListing is every entry below root with all it records.
func fullListing(root *Entry) []string {
	var out []string
	root.Walk(func(e *Entry) bool {
		out = append(out, fmt.Sprintf("%q %d %+v %q %d", e.Path(), e.Kind(), e.Attr(), e.Target(), e.Index))
		return true
	})
	return out
}

// streamSource is catalogTree with names that sort on either side of a
// directory's '/' ("a b", "a-b", "a.b", "a0", "a", "ab"), at the root and
// below, and a directory whose name is a prefix of a file's.
func streamSource(t *testing.T) string {
	t.Helper()
	src := catalogTree(t)
	for _, p := range []string{"a b", "a.b/x", "a0", "a/a b", "a/a-", "a/a/x", "a/a0", "ab/c", "a/b/c.d/e", "a/b/c-d", "a/b/c0"} {
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// The stream order is the store's: every entry once, the keys strictly
// ascending in bytes.
func TestStreamOrderIsTheStoresKeyOrder(t *testing.T) {
	c := openCat(t, Options{StateDir: t.TempDir(), Source: streamSource(t)})
	defer c.Close()
	var last []byte
	n := 0
	for e := range streamOrder(c.Root()) {
		k := fileKey(e.Path())
		if n > 0 && bytes.Compare(last, k) >= 0 {
			t.Errorf("%q comes after %q", k, last)
		}
		last = k
		n++
	}
	if want := countEntries(c.Root()); n != want {
		t.Errorf("the stream yields %d entries, the tree has %d", n, want)
	}
	// A stop midway stops it.
	n = 0
	for range streamOrder(c.Root()) {
		if n++; n == 3 {
			break
		}
	}
	if n != 3 {
		t.Errorf("the stream went on after a break: %d", n)
	}
}

// A first walk is stored as one stream (no "in batches" warning), into
// the bottom level (nothing in level 0: no memtable, no compaction to
// come), complete, and a remount loads the same tree from it.
func TestAWalkIsStoredAsOneStream(t *testing.T) {
	for _, background := range []bool{false, true} {
		src, state := streamSource(t), t.TempDir()
		log, logs := observed()
		o := Options{StateDir: state, Source: src, Logger: log, Tiers: []string{"mem", "nvme"}}
		if background {
			o.Background, o.Walker = true, openSource(t, source.Options{Root: src})
		}
		c := openWalked(t, o)
		if w := warnings(logs, "one stream failed"); len(w) != 0 {
			t.Fatalf("background %v: the store fell back to batches: %v", background, w[0].ContextMap())
		}
		if !storedComplete(t, c) {
			t.Fatalf("background %v: the streamed catalog is not marked complete", background)
		}
		for _, l := range c.db.Levels() {
			if l.Level == 0 && l.NumTables != 0 {
				t.Errorf("background %v: %d tables in level 0 after the store", background, l.NumTables)
			}
		}
		want := fullListing(c.Root())
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		o = Options{StateDir: state, Source: src, Tiers: []string{"mem", "nvme"}}
		c = openWalked(t, o)
		if c.Walked() {
			t.Errorf("background %v: the remount walked again", background)
		}
		if got := fullListing(c.Root()); !slices.Equal(got, want) {
			t.Errorf("background %v: the remount loaded\n%v\nwant\n%v", background, got, want)
		}
		// A record written after the stream (the writer's transactions
		// run past the stream's versions) is read back.
		e := c.Find("a/a.txt")
		e.SetTier(1)
		if err := c.Persist(e); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		c = openWalked(t, o)
		if got := c.Find("a/a.txt"); got == nil || got.Tier() != 1 {
			t.Errorf("background %v: an update after the stream was lost: %v", background, got)
		}
		c.Close()
	}
}
