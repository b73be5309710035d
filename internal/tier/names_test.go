package tier

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// deepDir is a directory whose path is about n bytes long.
func deepDir(t *testing.T, n int) string {
	t.Helper()
	d := t.TempDir()
	for i := 0; len(d) < n-200; i++ {
		d = filepath.Join(d, strings.Repeat(string(rune('a'+i%26)), 199))
	}
	return d
}

func hashedName(tr *Tier, rel string) string {
	sum := sha256.Sum256([]byte(rel))
	h := hex.EncodeToString(sum[:])
	return filepath.Join(tr.Dir(), hashedDir, h[:2], h)
}

func TestOpenReadsTheFileSystemsNameLimit(t *testing.T) {
	tr := openTier(t, Options{Quota: 1})
	var st syscall.Statfs_t
	if err := syscall.Statfs(tr.Dir(), &st); err != nil {
		t.Fatal(err)
	}
	if tr.nameMax != int(st.Namelen) || tr.nameMax <= 0 {
		t.Errorf("nameMax = %d, statfs says %d", tr.nameMax, st.Namelen)
	}
}

func TestComponentLongerThanTheNameLimitGetsAHashedName(t *testing.T) {
	tr := openTier(t, Options{Quota: 1 << 20})
	long := "class/" + strings.Repeat("x", tr.nameMax+1) + "/img.jpg"
	// The plain name cannot be made on this file system: hashing is needed.
	plain := filepath.Join(tr.Dir(), dataDir, long)
	if err := os.MkdirAll(filepath.Dir(plain), 0o700); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Fatalf("mkdir of a %d-byte component: %v, want ENAMETOOLONG", tr.nameMax+1, err)
	}
	if got, want := tr.Path(long), hashedName(tr, long); got != want {
		t.Errorf("Path(long component) = %q, want %q", got, want)
	}
	// A component of exactly the limit keeps its plain name.
	fits := "class/" + strings.Repeat("y", tr.nameMax)
	if got, want := tr.Path(fits), filepath.Join(tr.Dir(), dataDir, fits); got != want {
		t.Errorf("Path(component at the limit) = %q, want %q", got, want)
	}
	install(t, tr, fits, []byte("fits"))
}

func TestPathLongerThanPathMaxGetsAHashedName(t *testing.T) {
	dir := deepDir(t, 3000)
	tr := openTier(t, Options{Dir: dir, Quota: 1 << 20})
	base := len(filepath.Join(dir, dataDir)) + 1 // "DIR/data/"
	// Plain names of exactly pathMax-1 bytes (the NUL makes pathMax) fit;
	// one byte more does not. Components stay short.
	relOf := func(n int) string {
		k := (n + 1) / 101 // "ddd…d/" components of 100 bytes
		rel := strings.Repeat(strings.Repeat("d", 100)+"/", k)
		rel = rel[:len(rel)-1]
		switch r := n - len(rel); {
		case r == 1: // no room for "/x": lengthen the first component
			rel = "d" + rel
		case r > 1:
			rel += "/" + strings.Repeat("e", r-1)
		}
		return rel
	}
	fits, over := relOf(pathMax-1-base), relOf(pathMax-base)
	if len(filepath.Join(dir, dataDir, fits)) != pathMax-1 || len(filepath.Join(dir, dataDir, over)) != pathMax {
		t.Fatalf("test setup: plain lengths %d and %d", len(filepath.Join(dir, dataDir, fits)), len(filepath.Join(dir, dataDir, over)))
	}
	if got, want := tr.Path(fits), filepath.Join(dir, dataDir, fits); got != want {
		t.Errorf("Path of a %d-byte plain name is hashed", pathMax-1)
	}
	if got, want := tr.Path(over), hashedName(tr, over); got != want {
		t.Errorf("Path of a %d-byte plain name = %q, want the hashed %q", pathMax, got, want)
	}
	install(t, tr, fits, []byte("fits"))
	install(t, tr, over, []byte("over"))
	for rel, want := range map[string]string{fits: "fits", over: "over"} {
		got, err := os.ReadFile(tr.Path(rel))
		if err != nil || string(got) != want {
			t.Errorf("copy of a %d-byte rel: %q, %v", len(rel), got, err)
		}
	}
	if tr.Errors() != 0 {
		t.Errorf("Errors() = %d, want 0", tr.Errors())
	}
}

func TestInstallOpenRemoveRoundTripThroughAHashedName(t *testing.T) {
	tr := openTier(t, Options{Quota: 1 << 20})
	rel := "n01440764/" + strings.Repeat("é", 200) + ".JPEG" // 405 bytes
	data := bytes.Repeat([]byte("jpeg"), 1000)
	install(t, tr, rel, data)
	checkAccounting(t, tr, int64(len(data)), 1, 0)
	name := hashedName(tr, rel)
	if tr.Path(rel) != name {
		t.Fatalf("Path = %q, want %q", tr.Path(rel), name)
	}
	st, err := os.Stat(filepath.Dir(name))
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("hashed subdirectory: %v, %v; want mode 700", st, err)
	}
	// Nothing went under data/.
	if names := readDirNames(t, filepath.Join(tr.Dir(), dataDir)); len(names) != 0 {
		t.Errorf("data/ holds %v", names)
	}

	fd, size, err := tr.OpenFD(rel)
	if err != nil {
		t.Fatalf("OpenFD: %v", err)
	}
	buf := make([]byte, len(data)+1)
	n, err := syscall.Pread(fd, buf, 0)
	syscall.Close(fd)
	if err != nil || size != int64(len(data)) || !bytes.Equal(buf[:n], data) {
		t.Errorf("OpenFD: size %d, read %d bytes (%v); want %d identical bytes", size, n, err, len(data))
	}
	f, err := tr.OpenFile(rel)
	if err != nil {
		t.Fatalf("OpenFile: %v", err)
	}
	f.Close()

	if err := tr.Remove(rel, int64(len(data))); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	checkAccounting(t, tr, 0, 0, 0)
	if _, err := os.Lstat(name); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("hashed copy still there after Remove: %v", err)
	}
	if _, _, err := tr.OpenFD(rel); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenFD after Remove: %v, want not exist", err)
	}
	if tr.Errors() != 0 || !tr.Healthy() {
		t.Errorf("Errors() = %d, Healthy() = %v", tr.Errors(), tr.Healthy())
	}
}

func TestHashedNamesAreStableAcrossOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tier")
	tr := openTier(t, Options{Dir: dir, Quota: 1 << 20})
	rel := strings.Repeat("z", 300)
	install(t, tr, rel, []byte("kept"))
	before := tr.Path(rel)
	tr2 := openTier(t, Options{Dir: dir, Quota: 1 << 20})
	if after := tr2.Path(rel); after != before {
		t.Fatalf("Path after reopen = %q, before %q", after, before)
	}
	fd, size, err := tr2.OpenFD(rel)
	if err != nil || size != 4 {
		t.Fatalf("reopened tier: OpenFD = size %d, %v", size, err)
	}
	syscall.Close(fd)
	// Reopening cleaned the temp directory but kept the hashed copies.
	if names := readDirNames(t, filepath.Join(dir, hashedDir)); len(names) != 1 {
		t.Errorf("hashed/ holds %v after reopen", names)
	}
}

func TestOpenRejectsADirectoryTooLongForHashedNames(t *testing.T) {
	dir := "/" + strings.Repeat("d/", (pathMax-60)/2)
	if _, err := Open(Options{Name: "deep", Dir: dir, Quota: 1}); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Fatalf("Open of a %d-byte directory: %v, want too long", len(dir), err)
	}
}

func TestHasLongName(t *testing.T) {
	for _, c := range []struct {
		rel  string
		max  int
		long bool
	}{
		{"", 3, false},
		{"abc", 3, false},
		{"abcd", 3, true},
		{"abc/abc/abc", 3, false},
		{"abc/abcd/abc", 3, true},
		{"abcd/a", 3, true},
		{"a/abcd", 3, true},
		{"a/b/c/d/e/f/g/h", 1, false},
	} {
		if got := hasLongName(c.rel, c.max); got != c.long {
			t.Errorf("hasLongName(%q, %d) = %v, want %v", c.rel, c.max, got, c.long)
		}
	}
}
