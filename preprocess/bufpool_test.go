package preprocess

import (
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
// its class, and getting and putting allocate nothing once it is there.
func TestBufPoolRecyclesWithoutAllocating(t *testing.T) {
	var b bufPool
	first := b.get(602240)
	if len(first) != 602240 || cap(first) != classSize(mustClass(t, 602240)) {
		t.Fatalf("get: len %d cap %d", len(first), cap(first))
	}
	b.put(first)
	if raceEnabled {
		t.Skip("sync.Pool drops a random share of what it is given under the race detector")
	}
	// AllocsPerRun runs on one P, whose private slot of the class holds
	// the buffer between put and get. (A collection emptying the pool in
	// between costs one allocation in 100 runs, which rounds to 0.)
	allocs := testing.AllocsPerRun(100, func() {
		x := b.get(590000)
		b.put(x)
	})
	if allocs != 0 {
		t.Errorf("get+put of a pooled class: %.1f allocations, want 0", allocs)
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
