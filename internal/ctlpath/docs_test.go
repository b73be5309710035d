package ctlpath

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// -f LIST: a path per line (CRLF too) or per NUL with -z, exactly as
// written otherwise, empty entries skipped, "-" for stdin.
func TestReadListReadsAPathList(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "list")
	os.WriteFile(list, []byte("a/1.jpg\r\n\n b/with space.jpg\nc/x\n"), 0o644)
	got, err := ReadList(list, false, nil)
	if want := []string{"a/1.jpg", " b/with space.jpg", "c/x"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("lines: %q, %v; want %q", got, err, want)
	}
	got, err = ReadList("-", true, strings.NewReader("new\nline\x00b\x00\x00"))
	if want := []string{"new\nline", "b"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("NUL-separated stdin: %q, %v; want %q", got, err, want)
	}
	if _, err := ReadList(filepath.Join(dir, "missing"), false, nil); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing list: %v", err)
	}
}

// A long list is written as several warmup documents, each within the
// bound, with every path once and in order.
func TestDocsSplitAtLines(t *testing.T) {
	var rels []string
	for i := 0; i < 1000; i++ {
		rels = append(rels, strings.Repeat("x", i%50)+"/f")
	}
	docs := Docs(rels, 1000)
	var all []string
	for _, d := range docs {
		if len(d) > 1000 {
			t.Errorf("a document of %d bytes, over the bound", len(d))
		}
		all = append(all, strings.Split(strings.TrimSuffix(d, "\n"), "\n")...)
	}
	if !slices.Equal(all, rels) || len(docs) < 2 {
		t.Errorf("%d documents give %d paths; want the %d in order", len(docs), len(all), len(rels))
	}
}
