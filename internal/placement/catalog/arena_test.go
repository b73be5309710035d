package catalog

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"
)

// Paths stored in an arena (storedpath.go: whole, or as a name after its
// directory's path) read back as given, however long and however many,
// whatever the directories they are joined to, one after the other:
// later ones never write over earlier ones.
func TestPathArenaKeepsEveryString(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var a pathArena
	var want, got []string
	for i := range 20000 {
		n := r.IntN(64)
		if i%997 == 0 {
			n = arenaMax/4 + r.IntN(arenaMax) // longer than a block takes
		}
		b := make([]byte, n)
		for j := range b {
			b[j] = byte('a' + r.IntN(26))
		}
		if ext := []string{".jpg", ".png", ""}[r.IntN(3)]; n > len(ext) {
			copy(b[n-len(ext):], ext) // blocks share a suffix, or their names are suffixed otherwise
		}
		switch i % 3 {
		case 0:
			got = append(got, storedString(a.bytes(b)))
			want = append(want, string(b))
		case 1:
			got = append(got, storedString(a.str(string(b))))
			want = append(want, string(b))
		default:
			dir := strings.Repeat("d", r.IntN(3)*5)
			rec := a.join(dir, string(b))
			if storedName(rec) != string(b) {
				t.Fatalf("string %d: name %q, want %q", i, storedName(rec), b)
			}
			got = append(got, storedString(rec))
			if dir == "" {
				want = append(want, string(b))
			} else {
				want = append(want, dir+"/"+string(b))
			}
		}
		for j := range b {
			b[j] = '!' // the caller's bytes are its own
		}
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("string %d: %q, want %q", i, got[i], want[i])
		}
	}
	if a.next != arenaMax {
		t.Errorf("blocks grew to %d bytes, want %d", a.next, arenaMax)
	}
}

// A sized arena takes one block of what dirPaths counts: a directory's
// path once, then its entries' names, each a name after it; paths at the
// root and names too long to share a block are stored whole. compactPaths
// moves paths into one block of their size and keeps them equal.
func TestSizedArenaAndCompactPaths(t *testing.T) {
	long := strings.Repeat("n", arenaMax/8)
	for _, tc := range []struct {
		dir   string
		names []string
	}{
		{"", []string{"abc", "d", "efgh"}},
		{"d", []string{"efg"}},
		{"d/e", []string{"a", "bb", long, "ccc"}},
		{"dir", []string{long, "x"}},
		{"dd", manyNames(300)}, // the back reference grows to two bytes
		{"img", []string{"a.jpg", "b.png", ".jpg", "c.jpg", "noext", "x.jpgx", "y.JPG", "z.jpg"}},
		{"e", []string{"first", "a.jpg", "b.jpg"}},           // no suffix: the first name has none
		{"f", []string{"a." + strings.Repeat("x", 16), "b"}}, // an extension too long to share
	} {
		size := newDirPaths(tc.dir)
		for _, n := range tc.names {
			size.add(n)
		}
		a := sizedArena(size.n)
		var recs []*byte
		for _, n := range tc.names {
			recs = append(recs, a.join(tc.dir, n))
		}
		if len(a.buf) != cap(a.buf) {
			t.Errorf("dir %q: the block holds %d bytes of %d", tc.dir, len(a.buf), cap(a.buf))
		}
		for i, n := range tc.names {
			if got, want := storedString(recs[i]), ChildPath(tc.dir, n); got != want {
				t.Fatalf("dir %q: path %d %q, want %q", tc.dir, i, got, want)
			}
			if got := storedName(recs[i]); got != n {
				t.Fatalf("dir %q: name %d %q, want %q", tc.dir, i, got, n)
			}
			h, _ := uvarintAt(recs[i])
			if child := h&1 == 1; child != asChild(tc.dir, n) {
				t.Errorf("dir %q, name %d: stored as a child %v", tc.dir, i, child)
			}
			sfx := suffixOf(tc.names[0])
			if suffixed := h&3 == 3; suffixed != (h&1 == 1 && sfx != "" && strings.HasSuffix(n, sfx)) {
				t.Errorf("dir %q, name %q: stored with the block's suffix %q: %v", tc.dir, n, sfx, suffixed)
			}
			for _, o := range []string{"", n, n + "a", n[:len(n)/2], "~", "\x00"} {
				a, b := storedNameParts(recs[i])
				if got, want := compareName(a, b, o), strings.Compare(n, o); got != want {
					t.Errorf("dir %q: name %q against %q: %d, want %d", tc.dir, n, o, got, want)
				}
			}
		}
	}
	var b pathArena
	kids := []*Entry{NewFile(storedString(b.str("d/one")), Attr{}), NewFile(storedString(b.str("d/three")), Attr{})}
	compactPaths(ptrKids(kids))
	if kids[0].Path() != "d/one" || kids[1].Path() != "d/three" || kids[1].Name() != "three" {
		t.Fatalf("paths after compaction: %q %q", kids[0].Path(), kids[1].Path())
	}
	if unsafe.Pointer(storedOf(kids[1])) != unsafe.Add(unsafe.Pointer(storedOf(kids[0])), childLen(3, storedLen("d")+suffixLen(""))) {
		t.Fatal("compacted paths are not in one block")
	}
}

func manyNames(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("f%04d", i))
	}
	return out
}

// A full record takes what storedLen says: a byte of length up to 63
// bytes, two from 64, three from 8 Ki; a child's what childLen says.
func TestStoredLengths(t *testing.T) {
	for _, n := range []int{1, 63, 64, 8191, 8192, 1 << 20} {
		p := strings.Repeat("x", n)
		var a pathArena
		if got, want := storedLen(p), n+1+btoi(n >= 64)+btoi(n >= 8192)+btoi(n >= 1<<20); got != want {
			t.Errorf("storedLen of %d bytes: %d, want %d", n, got, want)
		}
		if storedString(a.str(p)) != p {
			t.Errorf("a full record of %d bytes reads back otherwise", n)
		}
		s := sizedArena(joinedLen("dir", p))
		if n > arenaMax/8 && (storedString(s.join("dir", p)) != "dir/"+p || len(s.buf) != cap(s.buf)) {
			t.Errorf("joinedLen(dir, %d bytes) %d: the block holds %d bytes of %d", n, joinedLen("dir", p), len(s.buf), cap(s.buf))
		}
	}
	for _, tc := range []struct{ n, back, want int }{{1, 1, 3}, {31, 127, 33}, {32, 128, 36}, {8191, 16383, 8196}} {
		if got := childLen(tc.n, tc.back); got != tc.want {
			t.Errorf("childLen(%d, %d) = %d, want %d", tc.n, tc.back, got, tc.want)
		}
	}
	if storedLen("") != 0 || joinedLen("", "ab") != 3 {
		t.Errorf("the root's path takes %d bytes, a name at the root %d", storedLen(""), joinedLen("", "ab"))
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Names in two parts compare as the names whole, however they are split.
func TestCompareParts(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	word := func() string {
		b := make([]byte, r.IntN(6))
		for i := range b {
			b[i] = "ab./"[r.IntN(4)]
		}
		return string(b)
	}
	for range 20000 {
		a, b := word(), word()
		i, j := r.IntN(len(a)+1), r.IntN(len(b)+1)
		if got, want := compareParts(a[:i], a[i:], b[:j], b[j:]), strings.Compare(a, b); got != want {
			t.Fatalf("compareParts(%q, %q, %q, %q) = %d, want %d", a[:i], a[i:], b[:j], b[j:], got, want)
		}
		if got, want := compareName(a[:i], a[i:], b), strings.Compare(a, b); got != want {
			t.Fatalf("compareName(%q, %q, %q) = %d, want %d", a[:i], a[i:], b, got, want)
		}
	}
}
