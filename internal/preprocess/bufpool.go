package preprocess

import (
	"math/bits"
	"sync"
	"unsafe"
)

// bufPool recycles the byte buffers of a sample's life: decode outputs,
// resize intermediates and outputs, the .npy files of output tensors and
// the encoded input. They are large (0.1 to 0.6 MB for ImageNet-sized
// photos) and short-lived. Allocated fresh, they cost more than their
// size suggests: the runtime zeroes them, the kernel faults their pages
// in, and the garbage collector runs every few samples and hands the
// memory back, so the next sample faults it in again. Before this pool
// took every buffer, `epochfs preprocess --workers 1` ran 215-233
// collections and 139 page faults per image for 400 images.
//
// Buffers of many sizes share the pool (a 1.5 KB row buffer, a 560 KB
// decode, a 600 KB tensor), so it keeps one sync.Pool per size class:
// 16 classes per power of two from 512 B to 64 MiB, each buffer at most
// 1/16 (6.25 %) larger than asked. A single sync.Pool handed a request
// whatever buffer came first and dropped it when it was too small. Outside
// the classes, buffers are allocated and left to the garbage collector.
// sync.Pool empties itself over two collections, so an idle daemon gives
// the memory back; while samples flow, collections are rare because the
// samples no longer allocate.
//
// A nil *bufPool allocates.
type bufPool struct {
	classes [numClasses]sync.Pool // of unsafe.Pointer to the first byte
	coeffs  sync.Pool             // of *coeffs, the resize filters' taps
}

const (
	minClassShift = 9  // 512 B
	maxClassShift = 26 // 64 MiB: the largest class
	classSteps    = 4  // log2 of the classes per power of two
	numClasses    = (maxClassShift-minClassShift)<<classSteps + 1
)

// classOf returns the smallest class holding n bytes (ok = false outside
// the classes).
func classOf(n int) (c int, ok bool) {
	if n <= 1<<minClassShift {
		return 0, n > 0
	}
	if n > 1<<maxClassShift {
		return 0, false
	}
	// n-1 = 1.mmmm… × 2^e; the class is the next 1/16 step above n-1.
	e := bits.Len(uint(n-1)) - 1
	m := (n - 1) >> (e - classSteps) & (1<<classSteps - 1)
	return (e-minClassShift)<<classSteps + m + 1, true
}

// floorClass returns the largest class no larger than n (ok = false when
// n is below the first class or above the last).
func floorClass(n int) (c int, ok bool) {
	if n < 1<<minClassShift || n > 1<<maxClassShift {
		return 0, false
	}
	e := bits.Len(uint(n)) - 1
	m := n >> (e - classSteps) & (1<<classSteps - 1)
	return (e-minClassShift)<<classSteps + m, true
}

// classSize is the capacity of buffers in class c.
func classSize(c int) int {
	e, m := c>>classSteps+minClassShift, c&(1<<classSteps-1)
	return (1<<classSteps + m) << (e - classSteps)
}

// get returns a buffer of length n. Its contents are arbitrary.
func (b *bufPool) get(n int) []byte {
	c, ok := classOf(n)
	if b == nil || !ok {
		return make([]byte, n)
	}
	if p, _ := b.classes[c].Get().(unsafe.Pointer); p != nil {
		return unsafe.Slice((*byte)(p), classSize(c))[:n]
	}
	return make([]byte, n, classSize(c))
}

// put recycles s (which nothing may use afterwards) into the class its
// capacity fills. The pool holds a pointer, not a slice header, so put
// does not allocate.
func (b *bufPool) put(s []byte) {
	if b == nil || cap(s) == 0 {
		return
	}
	c, ok := floorClass(cap(s))
	if !ok {
		return
	}
	b.classes[c].Put(unsafe.Pointer(unsafe.SliceData(s[:1])))
}

// getCoeffs returns filter taps to compute into.
func (b *bufPool) getCoeffs() *coeffs {
	if b != nil {
		if c, ok := b.coeffs.Get().(*coeffs); ok {
			return c
		}
	}
	return &coeffs{}
}

func (b *bufPool) putCoeffs(c *coeffs) {
	if b != nil {
		b.coeffs.Put(c)
	}
}
