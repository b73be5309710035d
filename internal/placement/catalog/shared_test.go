package catalog

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestSharedCatalogDocumentGivesTheWalkedTreeWithoutAWalk(t *testing.T) {
	src := t.TempDir()
	for p, n := range map[string]int{"a/b/c.bin": 10, "a/d.txt": 3, "z": 0, "m/n/o/p": 100} {
		os.MkdirAll(filepath.Join(src, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(src, p), make([]byte, n), 0o644)
	}
	os.Symlink("a/d.txt", filepath.Join(src, "link"))
	var doc []byte
	first, err := Open(context.Background(), Options{StateDir: t.TempDir(), Source: src, Tiers: []string{"t"},
		Shared: func(ctx context.Context, walk func(context.Context) ([]byte, error)) ([]byte, bool, error) {
			d, err := walk(ctx)
			doc = d
			return d, true, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if !first.Walked() || len(doc) == 0 {
		t.Fatalf("first node: walked=%v, document %d bytes", first.Walked(), len(doc))
	}
	// The second node gets the document and never walks: its source is
	// empty, so a walk would find nothing.
	empty := t.TempDir()
	second, err := Open(context.Background(), Options{StateDir: t.TempDir(), Source: empty, Tiers: []string{"t"},
		Shared: func(ctx context.Context, walk func(context.Context) ([]byte, error)) ([]byte, bool, error) {
			return doc, false, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if second.Walked() || second.Files() != first.Files() || second.Bytes() != first.Bytes() {
		t.Fatalf("second node: walked=%v, %d files %d bytes; want %d %d", second.Walked(), second.Files(), second.Bytes(), first.Files(), first.Bytes())
	}
	first.Root().Walk(func(e *Entry) bool {
		o := second.Find(e.Path())
		if o == nil || o.Kind() != e.Kind() || o.Attr() != e.Attr() || o.Target() != e.Target() {
			t.Errorf("%q: not the same entry in the loaded catalog", e.Path())
		}
		return true
	})
	// Malformed documents are refused, never half-loaded.
	for _, bad := range [][]byte{nil, []byte("EPT1"), doc[:len(doc)-3], append([]byte("XXXX"), doc[4:]...)} {
		if _, err := second.decodeTree(bad); err == nil {
			t.Errorf("document of %d bytes accepted", len(bad))
		}
	}
}
