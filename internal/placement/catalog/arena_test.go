package catalog

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"
)

// Paths stored in an arena (storedpath.go: a length, then the bytes; two
// bytes of length from 128 bytes) read back as given, each its own bytes, however
// long and however many: later ones never write over earlier ones.
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
		switch i % 3 {
		case 0:
			got = append(got, storedString(a.bytes(b)))
			want = append(want, string(b))
		case 1:
			got = append(got, storedString(a.str(string(b))))
			want = append(want, string(b))
		default:
			dir := strings.Repeat("d", r.IntN(3)*5)
			got = append(got, storedString(a.join(dir, string(b))))
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

// A sized arena takes one block; compactPaths moves paths into one block
// of their size and keeps them equal.
func TestSizedArenaAndCompactPaths(t *testing.T) {
	a := sizedArena(1 + 3 + 1 + 5 + 1 + 6) // each path after its one byte of length
	x, y, z := storedString(a.str("abc")), storedString(a.join("d", "efg")), storedString(a.bytes([]byte("hijklm")))
	if x != "abc" || y != "d/efg" || z != "hijklm" || len(a.buf) != cap(a.buf) {
		t.Fatalf("%q %q %q, block %d of %d", x, y, z, len(a.buf), cap(a.buf))
	}
	if unsafe.Pointer(unsafe.StringData(y)) != unsafe.Add(unsafe.Pointer(unsafe.StringData(x)), 3+1) || unsafe.Pointer(unsafe.StringData(z)) != unsafe.Add(unsafe.Pointer(unsafe.StringData(y)), 5+1) {
		t.Fatal("a sized arena's strings are not in one block")
	}
	var b pathArena
	kids := []*Entry{NewFile(storedString(b.str("d/one")), Attr{}), NewFile("", Attr{}), NewFile(storedString(b.str("d/three")), Attr{})}
	compactPaths(ptrKids(kids))
	if kids[0].Path() != "d/one" || kids[1].Path() != "" || kids[2].Path() != "d/three" {
		t.Fatalf("paths after compaction: %q %q %q", kids[0].Path(), kids[1].Path(), kids[2].Path())
	}
	if unsafe.Pointer(unsafe.StringData(kids[2].Path())) != unsafe.Add(unsafe.Pointer(unsafe.StringData(kids[0].Path())), 5+1) {
		t.Fatal("compacted paths are not in one block")
	}
}

// A stored path takes what storedLen and joinedLen say: a byte of length
// up to 127 bytes, two from 128, three from 16 Ki.
func TestStoredLengths(t *testing.T) {
	for _, n := range []int{1, 127, 128, 16383, 16384, 1 << 21} {
		p := strings.Repeat("x", n)
		var a pathArena
		a.str(p)
		if got, want := storedLen(p), n+1+btoi(n >= 128)+btoi(n >= 16384)+btoi(n >= 1<<21); got != want {
			t.Errorf("storedLen of %d bytes: %d, want %d", n, got, want)
		}
		s := sizedArena(joinedLen("dir", p))
		if storedString(s.join("dir", p)) != "dir/"+p || len(s.buf) != cap(s.buf) {
			t.Errorf("joinedLen(dir, %d bytes) %d: the block holds %d bytes of %d", n, joinedLen("dir", p), len(s.buf), cap(s.buf))
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
