package preprocess

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// Every request in the classes gets the smallest class that holds it, at
// most 1/16 larger; floorClass is the largest class a capacity fills, so a
// recycled buffer always satisfies any request for its class.
func TestBufPoolClassesFitWithinASixteenth(t *testing.T) {
	sizes := []int{1, 2, 511, 512, 513, 544, 545, 1023, 1024, 1025, 3 * 224, 150528, 602112, 602112 + 128,
		560000, 1<<20 - 1, 1 << 20, 1<<20 + 1, 1<<26 - 1, 1 << 26}
	for n := 500; n < 70000; n += 97 {
		sizes = append(sizes, n)
	}
	for _, n := range sizes {
		c, ok := classOf(n)
		if !ok {
			t.Fatalf("classOf(%d): outside the classes", n)
		}
		sz := classSize(c)
		if sz < n || (n > 512 && 16*sz > 17*n) {
			t.Errorf("classOf(%d) = %d of size %d: want >= n and <= n·17/16", n, c, sz)
		}
		if c > 0 && classSize(c-1) >= n {
			t.Errorf("classOf(%d) = %d, but class %d (size %d) holds it", n, c, c-1, classSize(c-1))
		}
		if f, ok := floorClass(sz); !ok || f != c {
			t.Errorf("floorClass(classSize(%d) = %d) = %d, %v", c, sz, f, ok)
		}
	}
	for m := 512; m <= 1<<26; m = m*9/8 + 7 {
		f, ok := floorClass(m)
		if !ok || classSize(f) > m || (f+1 < numClasses && classSize(f+1) <= m) {
			t.Errorf("floorClass(%d) = %d (size %d, next %d): want the largest class <= %d",
				m, f, classSize(f), classSize(f+1), m)
		}
	}
	if _, ok := classOf(1<<26 + 1); ok {
		t.Error("a request above 64 MiB got a class")
	}
	if _, ok := floorClass(100); ok {
		t.Error("a 100-byte buffer got a class")
	}
}

// A buffer that goes back to the pool comes out again for a request of
// its class (that getting and putting allocate nothing once it is there:
// alloc_test.go, without the race detector).
func TestBufPoolRecyclesItsClasses(t *testing.T) {
	var b bufPool
	first := b.get(602240)
	if len(first) != 602240 || cap(first) != classSize(mustClass(t, 602240)) {
		t.Fatalf("get: len %d cap %d", len(first), cap(first))
	}
	b.put(first)
	again := b.get(590000)
	if len(again) != 590000 || cap(again) != cap(first) {
		t.Fatalf("get of the same class: len %d cap %d, want cap %d", len(again), cap(again), cap(first))
	}
}

func mustClass(t *testing.T, n int) int {
	c, ok := classOf(n)
	if !ok {
		t.Fatalf("no class for %d", n)
	}
	return c
}

// A nil pool and sizes outside the classes allocate plain buffers.
func TestBufPoolOutsideTheClassesAllocates(t *testing.T) {
	var nilPool *bufPool
	if b := nilPool.get(1000); len(b) != 1000 {
		t.Errorf("nil pool: len %d", len(b))
	}
	nilPool.put(make([]byte, 1000)) // no panic
	var b bufPool
	if x := b.get(0); len(x) != 0 {
		t.Errorf("get(0): len %d", len(x))
	}
	b.put(nil)
	big := b.get(1<<26 + 10)
	if len(big) != 1<<26+10 {
		t.Errorf("get above the classes: len %d", len(big))
	}
	b.put(big) // dropped, not pooled
	b.put(make([]byte, 100))
}

// LoadFile reads every byte of a file, whatever its size, also a file
// whose stat says 0 bytes (procfs), and fails with the file's error.
func TestLoadFileReadsWholeFiles(t *testing.T) {
	p, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 6))
	s := &State{}
	for _, n := range []int{0, 1, 511, 512, 513, 4095, 4096, 100000, 1 << 20} {
		want := make([]byte, n)
		for i := range want {
			want[i] = byte(rng.Uint32())
		}
		path := filepath.Join(dir, fmt.Sprint(n))
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := p.LoadFile(s, path); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(s.Data, want) {
			t.Errorf("%d bytes: LoadFile read %d bytes, not the file", n, len(s.Data))
		}
	}
	want, err := os.ReadFile("/proc/self/maps") // stat size 0, content larger than 512 B
	if err != nil {
		t.Fatal(err)
	}
	if err := p.LoadFile(s, "/proc/self/maps"); err != nil {
		t.Fatal(err)
	}
	if len(s.Data) < 512 || len(s.Data) < len(want)/2 {
		t.Errorf("/proc/self/maps: %d bytes, os.ReadFile read %d", len(s.Data), len(want))
	}
	if err := p.LoadFile(s, filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
	// The decode step gives the buffer back.
	data := cropJPEG(t, 0, 64, 48, 1)
	path := filepath.Join(dir, "a.jpg")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.LoadFile(s, path); err != nil {
		t.Fatal(err)
	}
	if err := p.decodeStep(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if s.Data != nil || s.dataPooled {
		t.Error("the decode step kept the loaded file")
	}
}
