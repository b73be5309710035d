package views

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestNPZIsAZipNumPyReads checks the in-place archive against Go's zip
// reader (which verifies every checksum), twice over a dirty pooled
// buffer, and that every member is a .npy with the planned header.
func TestNPZIsAZipNumPyReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var pool Pool
	for round := range 20 {
		n := rng.IntN(300)
		sizes := make([]int, n)
		total := 0
		for i := range sizes {
			sizes[i] = rng.IntN(5000)
			total += sizes[i]
		}
		paths := make([]string, n)
		for i := range paths {
			paths[i] = strings.Repeat("é", rng.IntN(4)) + "class/" + strings.Repeat("x", rng.IntN(30)) + ".jpg"
		}
		width := stringsWidth(paths)
		f, err := newNPZ([]npyMember{
			{name: "x", descr: "|u1", shape: []int{total}, size: total},
			{name: "y", descr: "<i8", shape: []int{n}, size: 8 * n},
			{name: "paths", descr: "<U" + strconv.Itoa(width), shape: []int{n}, size: 4 * width * n},
		}, pool.Alloc)
		if err != nil {
			t.Fatal(err)
		}
		x := make([]byte, total)
		for i := range x {
			x[i] = byte(rng.Uint32())
		}
		copy(f.Data(0), x)
		y := make([]int64, n)
		for i := range y {
			y[i] = rng.Int64() - 1<<62
		}
		putInt64s(f.Data(1), y)
		putStrings(f.Data(2), paths, width)
		b := f.Finish()

		zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		got := map[string][]byte{}
		for _, zf := range zr.File {
			rc, err := zf.Open()
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(rc) // checks the CRC at EOF
			rc.Close()
			if err != nil {
				t.Fatalf("round %d: %s: %v", round, zf.Name, err)
			}
			if zf.Method != zip.Store {
				t.Errorf("%s: method %d, want stored", zf.Name, zf.Method)
			}
			if !bytes.HasPrefix(data, []byte("\x93NUMPY\x01\x00")) {
				t.Fatalf("%s: not a .npy", zf.Name)
			}
			hl := int(binary.LittleEndian.Uint16(data[8:]))
			if (10+hl)%64 != 0 {
				t.Errorf("%s: header of %d bytes is not 64-aligned", zf.Name, 10+hl)
			}
			got[zf.Name] = data[10+hl:]
		}
		if !bytes.Equal(got["x.npy"], x) {
			t.Errorf("round %d: x differs", round)
		}
		for i, v := range y {
			if g := int64(binary.LittleEndian.Uint64(got["y.npy"][8*i:])); g != v {
				t.Fatalf("y[%d] = %d, want %d", i, g, v)
			}
		}
		for i, p := range paths {
			var rs []rune
			for j := range width {
				r := rune(binary.LittleEndian.Uint32(got["paths.npy"][4*(width*i+j):]))
				if r != 0 {
					rs = append(rs, r)
				}
			}
			if string(rs) != p {
				t.Fatalf("paths[%d] = %q, want %q", i, string(rs), p)
			}
		}
		// Dirty the buffer before it goes back: the next round must not
		// depend on zeroed memory.
		for i := range b {
			b[i] = 0xA5
		}
		pool.put(b)
	}
}

func TestBufferPoolClasses(t *testing.T) {
	var pool Pool
	for _, c := range []struct{ n, class int }{{0, 0}, {1, 0}, {65536, 0}, {65537, 1}, {131072, 1}, {131073, 2}, {1 << 30, 14}} {
		if got := bufferClass(c.n); got != c.class {
			t.Errorf("bufferClass(%d) = %d, want %d", c.n, got, c.class)
		}
		b := pool.get(c.n)
		if len(b) != c.n || cap(b) != 1<<(c.class+minBufferShift) {
			t.Errorf("get(%d): len %d cap %d", c.n, len(b), cap(b))
		}
		pool.put(b)
	}
	pool.put(make([]byte, 100)) // not from the pool: ignored
}
