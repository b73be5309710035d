// Package sharedbuf is the bytes of the shared buffer: whole files held in
// RAM within a byte budget, each fetched once however many callers ask
// (the entry is in the map from the moment its fetch is decided; later
// callers wait for it). What is fetched, from where and when is the
// placer's (internal/placement/buffer.go); which samples it should hold is the
// sampler's index (sampler). Keys are the placer's catalog entries.
//
// An entry's bytes live until it is dropped and no reader holds it. Drop
// removes it at once (the memory follows the last reader); Release marks it
// released: it keeps serving readers (the job that was handed it last reads
// it right after) and is dropped when its room is needed for a fetch, or
// after the grace period.
//
// Lock order: Buffer.mu only. An Entry's data, err and done are set once,
// by Finish, before done is closed; its other fields are guarded by
// Buffer.mu.
package sharedbuf

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrFull means the buffer has no room for a file.
var ErrFull = errors.New("placement: shared buffer full")

// DefaultGrace is how long a released entry is kept at most.
const DefaultGrace = 30 * time.Second

// Stats are a buffer's counters.
type Stats struct {
	Budget   int64 // bytes
	Bytes    int64 // bytes held, including fetches in progress and dropped entries still read
	Entries  int64 // entries in the map (buffered or being fetched)
	Fetches  int64 // fetches started, total
	Hits     int64 // entries handed to readers (Acquire), total
	Waiting  int64 // of those, entries whose fetch had not ended: the reader waited for it
	Released int64 // entries released and waiting for their grace period
	Refused  int64 // fetches refused for want of room, total
}

// Entry is one file's bytes, fetched or being fetched.
type Entry[K comparable] struct {
	Key  K
	Size int64
	done chan struct{} // closed when data or err is set
	data []byte
	err  error

	// Guarded by Buffer.mu.
	refs     int  // readers and the fetch holding the bytes
	gone     bool // removed from the map; bytes freed when refs reaches 0
	released time.Time
}

// Buffer holds entries within a budget.
type Buffer[K comparable] struct {
	budget int64
	grace  time.Duration
	now    func() time.Time

	mu       sync.Mutex
	entries  map[K]*Entry[K]
	released []*Entry[K] // in release order
	used     int64
	fetches  int64
	hits     int64
	waiting  int64
	refused  int64
}

// New returns a buffer of budget bytes whose released entries stay grace
// at most (DefaultGrace if 0); now is the clock (time.Now if nil).
func New[K comparable](budget int64, grace time.Duration, now func() time.Time) *Buffer[K] {
	if grace <= 0 {
		grace = DefaultGrace
	}
	if now == nil {
		now = time.Now
	}
	return &Buffer[K]{budget: budget, grace: grace, now: now, entries: map[K]*Entry[K]{}}
}

// Budget is the buffer's budget in bytes.
func (b *Buffer[K]) Budget() int64 { return b.budget }

// Acquire returns k's entry with a reference (Unref gives it back), or nil.
func (b *Buffer[K]) Acquire(k K) *Entry[K] {
	b.mu.Lock()
	defer b.mu.Unlock()
	be := b.entries[k]
	if be == nil {
		return nil
	}
	be.refs++
	b.hits++
	select {
	case <-be.done:
	default:
		b.waiting++
	}
	return be
}

// Ref takes another reference on be (a fetch's own).
func (b *Buffer[K]) Ref(be *Entry[K]) {
	b.mu.Lock()
	be.refs++
	b.mu.Unlock()
}

// Unref drops a reference; the last one of a removed entry frees its bytes.
func (b *Buffer[K]) Unref(be *Entry[K]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	be.refs--
	if be.refs == 0 && be.gone {
		b.used -= be.Size
		be.data = nil
	}
}

// removeLocked takes be out of the map.
func (b *Buffer[K]) removeLocked(be *Entry[K]) {
	if be.gone {
		return
	}
	be.gone = true
	delete(b.entries, be.Key)
	if be.refs == 0 {
		b.used -= be.Size
		be.data = nil
	}
}

// expireLocked drops released entries older than the grace period.
func (b *Buffer[K]) expireLocked(now time.Time) {
	keep := b.released[:0]
	for _, be := range b.released {
		switch {
		case be.gone:
		case now.Sub(be.released) >= b.grace:
			b.removeLocked(be)
		default:
			keep = append(keep, be)
		}
	}
	clear(b.released[len(keep):])
	b.released = keep
}

// Reserve returns k's entry with a reference, creating it (created true:
// the caller fetches it and calls Finish) if there is room for size bytes,
// dropping released entries (oldest first) for it. name names the file in
// the error.
func (b *Buffer[K]) Reserve(k K, size int64, name string) (be *Entry[K], created bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if be := b.entries[k]; be != nil {
		be.refs++
		return be, false, nil
	}
	if size > b.budget {
		return nil, false, fmt.Errorf("%w: %s is %d bytes, the budget %d", ErrFull, name, size, b.budget)
	}
	b.expireLocked(b.now())
	for b.used+size > b.budget && len(b.released) > 0 {
		old := b.released[0]
		b.released[0] = nil
		b.released = b.released[1:]
		b.removeLocked(old)
	}
	if b.used+size > b.budget {
		b.refused++
		return nil, false, fmt.Errorf("%w: %s needs %d bytes, %d of %d in use", ErrFull, name, size, b.used, b.budget)
	}
	be = &Entry[K]{Key: k, Size: size, done: make(chan struct{}), refs: 1}
	b.entries[k] = be
	b.used += size
	b.fetches++
	return be, true, nil
}

// Finish records the fetch's result; a failed entry leaves the map.
func (b *Buffer[K]) Finish(be *Entry[K], data []byte, err error) {
	b.mu.Lock()
	be.data, be.err = data, err
	if err != nil {
		b.removeLocked(be)
	}
	b.mu.Unlock()
	close(be.done)
}

// Wait waits for be's fetch; ok is false if it failed (Err says why).
func (be *Entry[K]) Wait(ctx context.Context) (ok bool, err error) {
	select {
	case <-be.done:
		return be.err == nil, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Err is why be's fetch failed, once Wait returned; nil if it did not.
func (be *Entry[K]) Err() error { return be.err }

// ReadAt copies from a fetched entry.
func (be *Entry[K]) ReadAt(buf []byte, off int64) int {
	if off >= int64(len(be.data)) {
		return 0
	}
	return copy(buf, be.data[off:])
}

// Drop removes k's entry; its memory is freed once no reader holds it.
func (b *Buffer[K]) Drop(k K) {
	b.mu.Lock()
	if be := b.entries[k]; be != nil {
		b.removeLocked(be)
	}
	b.mu.Unlock()
}

// Release marks k's entry as released: it keeps serving readers until its
// room is needed or the grace period ends.
func (b *Buffer[K]) Release(k K) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if be := b.entries[k]; be != nil && be.released.IsZero() {
		be.released = b.now()
		b.released = append(b.released, be)
	}
}

// Sweep drops released entries whose grace period has ended.
func (b *Buffer[K]) Sweep() {
	b.mu.Lock()
	b.expireLocked(b.now())
	b.mu.Unlock()
}

// Has reports whether k is in the buffer (fetched or being fetched).
func (b *Buffer[K]) Has(k K) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.entries[k] != nil
}

// Stats returns the buffer's counters.
func (b *Buffer[K]) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	rel := 0
	for _, be := range b.released {
		if !be.gone {
			rel++
		}
	}
	return Stats{Budget: b.budget, Bytes: b.used, Entries: int64(len(b.entries)), Fetches: b.fetches, Hits: b.hits, Waiting: b.waiting, Released: int64(rel), Refused: b.refused}
}
