package preprocess

import "sync"

// bufPool recycles pixel buffers (decode outputs and resize
// intermediates), which are large (about 0.5 MB for a 500×375 photo) and
// short-lived: allocating them fresh made the garbage collector a fifth
// of the pipeline's time. A nil *bufPool allocates.
type bufPool struct{ p sync.Pool }

func (b *bufPool) get(n int) []byte {
	if b != nil {
		if v, ok := b.p.Get().(*[]byte); ok && cap(*v) >= n {
			return (*v)[:n]
		}
	}
	return make([]byte, n)
}

func (b *bufPool) put(s []byte) {
	if b != nil && cap(s) > 0 {
		b.p.Put(&s)
	}
}
