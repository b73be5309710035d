package placement

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
)

// The shared buffer holds whole files of non-resident samples in RAM,
// within a byte budget: the samples the jobs layer prefetches for the
// sampler's lookahead, and demand reads of files that fit no tier. Each file
// is fetched once however many callers ask (the entry is in the map from
// the moment its fetch is decided; later callers wait for it), and every
// byte comes through tier.Source, so it is counted and within the source
// bandwidth cap.
//
// An entry's bytes live until it is dropped and no reader holds it. Drop
// removes it at once (the memory follows the last reader); Release marks it
// released: it keeps serving readers (the job that was handed it last reads
// it right after) and is dropped when its room is needed for a fetch, or
// after the grace period.
//
// Lock order: Buffer.mu, then bufEntry.mu is never taken with Buffer.mu
// held; bufEntry fields other than data, err and done are guarded by
// Buffer.mu.

// ErrBufferFull means the buffer has no room for a file.
var ErrBufferFull = errors.New("placement: shared buffer full")

// DefaultBufferGrace is how long a released entry is kept at most.
const DefaultBufferGrace = 30 * time.Second

// The budget's split, decided here and nowhere else. The sampler counts
// (bufferHeadroom-1)/bufferHeadroom of the budget as its slots
// (BufferSlots); the rest is headroom for what it does not count: demand
// fetches before it is asked, released entries in their grace period,
// dropped entries still being read. A demand fetch takes a file of at most
// the headroom.
const bufferHeadroom = 4

// BufferSlots is the number of samples the sampler may count in the shared
// buffer: three quarters of the budget divided by the catalog's mean file
// size, at most the number of files; 0 without a buffer or files.
func (p *Placer) BufferSlots() int {
	files, bytes := p.cat.Files(), p.cat.Bytes()
	if p.buf == nil || files == 0 {
		return 0
	}
	mean := max(bytes/files, 1)
	return int(min((p.buf.budget-p.buf.budget/bufferHeadroom)/mean, files))
}

// BufferStats are the shared buffer's counters.
type BufferStats struct {
	Budget   int64 // bytes
	Bytes    int64 // bytes held, including fetches in progress and dropped entries still read
	Entries  int64 // entries in the map (buffered or being fetched)
	Fetches  int64 // fetches started, total
	Hits     int64 // opens served from the buffer, total
	Released int64 // entries released and waiting for their grace period
	Refused  int64 // fetches refused for want of room, total
}

type bufEntry struct {
	e    *Entry
	size int64
	done chan struct{} // closed when data or err is set
	data []byte
	err  error

	// Guarded by Buffer.mu.
	refs     int  // readers and the fetch holding the bytes
	gone     bool // removed from the map; bytes freed when refs reaches 0
	released time.Time
}

type buffer struct {
	budget int64
	grace  time.Duration
	now    func() time.Time

	mu       sync.Mutex
	entries  map[*Entry]*bufEntry
	released []*bufEntry // in release order
	used     int64
	fetches  int64
	hits     int64
	refused  int64
}

func newBuffer(budget int64, grace time.Duration, now func() time.Time) *buffer {
	if grace <= 0 {
		grace = DefaultBufferGrace
	}
	if now == nil {
		now = time.Now
	}
	return &buffer{budget: budget, grace: grace, now: now, entries: map[*Entry]*bufEntry{}}
}

// acquire returns e's entry with a reference, or nil.
func (b *buffer) acquire(e *Entry) *bufEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	be := b.entries[e]
	if be == nil {
		return nil
	}
	be.refs++
	b.hits++
	return be
}

// unref drops a reference; the last one of a removed entry frees its bytes.
func (b *buffer) unref(be *bufEntry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unrefLocked(be)
}

func (b *buffer) unrefLocked(be *bufEntry) {
	be.refs--
	if be.refs == 0 && be.gone {
		b.used -= be.size
		be.data = nil
	}
}

// removeLocked takes be out of the map.
func (b *buffer) removeLocked(be *bufEntry) {
	if be.gone {
		return
	}
	be.gone = true
	delete(b.entries, be.e)
	if be.refs == 0 {
		b.used -= be.size
		be.data = nil
	}
}

// expireLocked drops released entries older than the grace period.
func (b *buffer) expireLocked(now time.Time) {
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

// reserve creates e's entry if there is room, dropping released entries
// (oldest first) for it. The entry holds one reference: the fetch's.
func (b *buffer) reserve(e *Entry) (be *bufEntry, created bool, err error) {
	size := e.Attr().Size
	b.mu.Lock()
	defer b.mu.Unlock()
	if be := b.entries[e]; be != nil {
		be.refs++
		return be, false, nil
	}
	if size > b.budget {
		return nil, false, fmt.Errorf("%w: %s is %d bytes, the budget %d", ErrBufferFull, e.Path, size, b.budget)
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
		return nil, false, fmt.Errorf("%w: %s needs %d bytes, %d of %d in use", ErrBufferFull, e.Path, size, b.used, b.budget)
	}
	be = &bufEntry{e: e, size: size, done: make(chan struct{}), refs: 1}
	b.entries[e] = be
	b.used += size
	b.fetches++
	return be, true, nil
}

// finish records the fetch's result; a failed entry leaves the map.
func (b *buffer) finish(be *bufEntry, data []byte, err error) {
	b.mu.Lock()
	be.data, be.err = data, err
	if err != nil {
		b.removeLocked(be)
	}
	b.mu.Unlock()
	close(be.done)
}

// wait waits for be's fetch; ok is false if it failed.
func (be *bufEntry) wait(ctx context.Context) (ok bool, err error) {
	select {
	case <-be.done:
		return be.err == nil, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// readAt copies from a fetched entry.
func (be *bufEntry) readAt(buf []byte, off int64) int {
	if off >= int64(len(be.data)) {
		return 0
	}
	return copy(buf, be.data[off:])
}

// fetchInto reads e whole from the source into be. It waits for a demand
// slot only through ctx.
func (p *Placer) fetchInto(ctx context.Context, be *bufEntry) {
	data, err := p.readWhole(ctx, be.e, be.size)
	p.buf.finish(be, data, err)
	if err != nil && !errors.Is(err, context.Canceled) {
		p.log.Warn("buffer fetch failed", zap.String("path", be.e.Path), zap.Error(err))
	}
}

func (p *Placer) readWhole(ctx context.Context, e *Entry, size int64) ([]byte, error) {
	if p.o.Remote == nil {
		return p.readWholeSource(ctx, e, size)
	}
	a := e.Attr()
	if a.Size != size {
		return p.readWholeSource(ctx, e, size)
	}
	data := make([]byte, size)
	w := &sliceWriter{b: data}
	n, err := p.o.Remote.Copy(ctx, remoteKey(e, a), w, nil, func(w io.Writer, _ func(int64)) (int64, error) {
		d, err := p.readWholeSource(ctx, e, size)
		if err != nil {
			return 0, err
		}
		m, err := w.Write(d)
		return int64(m), err
	})
	if err != nil {
		return nil, err
	}
	if n != size {
		return nil, fmt.Errorf("placement: fetch %s: read %d bytes, expected %d", e.Path, n, size)
	}
	return data, nil
}

// readWholeSource reads e whole from the source.
func (p *Placer) readWholeSource(ctx context.Context, e *Entry, size int64) ([]byte, error) {
	sf, err := p.src.Open(ctx, e.Path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrVanished, e.Path)
		}
		return nil, fmt.Errorf("placement: fetch %s: %w", e.Path, err)
	}
	defer sf.Close()
	data := make([]byte, size)
	var off int64
	for off < size {
		end := min(off+copyChunk, size)
		n, err := sf.ReadAt(ctx, data[off:end], off)
		off += int64(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("placement: fetch %s: %w", e.Path, err)
		}
	}
	if off != size {
		return nil, fmt.Errorf("placement: fetch %s: read %d bytes, expected %d", e.Path, off, size)
	}
	// One more byte would mean the file grew.
	var one [1]byte
	if n, _ := sf.ReadAt(ctx, one[:], size); n != 0 {
		return nil, fmt.Errorf("placement: fetch %s: file grew past %d bytes", e.Path, size)
	}
	return data, nil
}

// Fetch makes e cheap to read soon, in the background, and calls done
// (from another goroutine) with the outcome. A file that may still fit a
// tier is placed there (the shared flight readers follow; done gets
// ErrPlaced once it is resident): RAM is not spent on what the tiers will
// hold. Otherwise e is read whole into the shared buffer and done gets nil
// once the bytes are there, or ErrBufferFull when there is no room. A file
// already buffered or being fetched is not fetched again: done waits for
// that fetch.
func (p *Placer) Fetch(e *Entry, done func(error)) {
	if p.buf == nil {
		go done(fmt.Errorf("%w: no buffer", ErrBufferFull))
		return
	}
	if e.Kind != KindFile {
		go done(ErrNotFile)
		return
	}
	if e.Tier() >= 0 {
		go done(ErrPlaced)
		return
	}
	p.fetchMu.Lock()
	if p.fetchDone {
		p.fetchMu.Unlock()
		go done(ErrClosed)
		return
	}
	p.fetchWG.Add(1)
	p.fetchMu.Unlock()
	if !e.nospace.Load() && !p.Buffered(e) {
		go func() {
			defer p.fetchWG.Done()
			p.place(e)
			switch {
			case e.Tier() >= 0:
				done(ErrPlaced)
			case !e.nospace.Load():
				done(fmt.Errorf("placement: fetch %s: the copy failed", e.Path))
			default:
				p.fetchWG.Add(1) // balanced by fetchBuffered
				p.fetchBuffered(e, done)
			}
		}()
		return
	}
	p.fetchBuffered(e, done)
}

// ErrPlaced is Fetch's answer for a file that is (now) resident in a tier.
var ErrPlaced = errors.New("placement: resident in a tier")

// place copies e into a tier now, or waits for the copy in flight.
func (p *Placer) place(e *Entry) {
	f, started := p.startFlight(e)
	if f == nil {
		return
	}
	defer f.release()
	if started {
		p.queued.Add(1)
		p.run(f)
		p.queued.Add(-1)
		return
	}
	for {
		f.mu.Lock()
		d, ch := f.done, f.changed
		f.mu.Unlock()
		if d {
			return
		}
		select {
		case <-ch:
		case <-p.ctx.Done():
			return
		}
	}
}

// fetchBuffered reads e into the buffer; the caller did fetchWG.Add(1).
func (p *Placer) fetchBuffered(e *Entry, done func(error)) {
	be, created, err := p.buf.reserve(e)
	if err != nil {
		p.fetchWG.Done()
		go done(err)
		return
	}
	go func() {
		defer p.fetchWG.Done()
		if created {
			p.fetchInto(p.ctx, be)
		}
		ok, _ := be.wait(p.ctx)
		p.buf.unref(be)
		switch {
		case ok:
			done(nil)
		case be.err != nil:
			done(be.err)
		default:
			done(ErrClosed)
		}
	}()
}

// Drop removes e from the buffer; its memory is freed once no reader holds
// it.
func (p *Placer) Drop(e *Entry) {
	if p.buf == nil {
		return
	}
	p.buf.mu.Lock()
	if be := p.buf.entries[e]; be != nil {
		p.buf.removeLocked(be)
	}
	p.buf.mu.Unlock()
}

// Release marks e's entry as released: it keeps serving readers until its
// room is needed or the grace period ends.
func (p *Placer) Release(e *Entry) {
	if p.buf == nil {
		return
	}
	b := p.buf
	b.mu.Lock()
	defer b.mu.Unlock()
	if be := b.entries[e]; be != nil && be.released.IsZero() {
		be.released = b.now()
		b.released = append(b.released, be)
	}
}

// Sweep drops released entries whose grace period has ended.
func (p *Placer) Sweep() {
	if p.buf == nil {
		return
	}
	p.buf.mu.Lock()
	p.buf.expireLocked(p.buf.now())
	p.buf.mu.Unlock()
}

// Buffered reports whether e is in the buffer (fetched or being fetched).
func (p *Placer) Buffered(e *Entry) bool {
	if p.buf == nil {
		return false
	}
	p.buf.mu.Lock()
	defer p.buf.mu.Unlock()
	return p.buf.entries[e] != nil
}

// BufferStats returns the buffer's counters (zero without a buffer).
func (p *Placer) BufferStats() BufferStats {
	if p.buf == nil {
		return BufferStats{}
	}
	b := p.buf
	b.mu.Lock()
	defer b.mu.Unlock()
	rel := 0
	for _, be := range b.released {
		if !be.gone {
			rel++
		}
	}
	return BufferStats{Budget: b.budget, Bytes: b.used, Entries: int64(len(b.entries)), Fetches: b.fetches, Hits: b.hits, Released: int64(rel), Refused: b.refused}
}

// DemandHook decides about demand reads of files that fit no tier whole
// (the jobs layer asks the sampler). Wanted is asked before such a read
// fetches the file into the buffer: only when a live job still wants the
// sample does the fetch go through the buffer, so with no job the buffer
// is not a RAM cache outside the tier quotas. Keep is asked once the bytes
// are in: bytes not kept are released (see Release).
type DemandHook struct {
	Wanted func(e *Entry) bool
	Keep   func(e *Entry) bool
}

// SetDemandHook installs h; nil removes it. Without a hook, demand reads do
// not use the buffer. There is one hook: installing a second one while one
// is installed panics (a wiring mistake, not a replacement).
func (p *Placer) SetDemandHook(h *DemandHook) {
	if h == nil {
		p.demandHook.Store(nil)
		return
	}
	if !p.demandHook.CompareAndSwap(nil, h) {
		panic("placement: SetDemandHook: a hook is installed already")
	}
}

// demandBuffer attaches r to a buffered copy of its file: one already
// buffered or being fetched, or, for a file that fits no tier, a new whole
// file fetch when the hook is set and the budget has room. It reports
// whether r is attached.
func (p *Placer) demandBuffer(r *Reader) bool {
	if p.buf == nil {
		return false
	}
	e := r.e
	if be := p.buf.acquire(e); be != nil {
		if be.size == r.attr.Size {
			r.bent = be
			return true
		}
		p.buf.unref(be) // bytes of another version
		return false
	}
	hook := p.demandHook.Load()
	if hook == nil || !e.nospace.Load() || e.Attr().Size > p.buf.budget/bufferHeadroom || !hook.Wanted(e) {
		return false
	}
	select {
	case p.demand <- struct{}{}:
	default:
		return false
	}
	be, created, err := p.buf.reserve(e)
	if err != nil {
		<-p.demand
		return false
	}
	r.bent = be // the reservation's reference becomes the reader's
	if !created {
		<-p.demand
		return true
	}
	p.buf.mu.Lock()
	be.refs++ // the fetch's own
	p.buf.mu.Unlock()
	go func() {
		defer func() { <-p.demand }()
		p.fetchInto(p.ctx, be)
		if be.err == nil && !hook.Keep(e) {
			// Not kept: every job was handed it already, but their
			// readers may be on their way; it goes first when room is
			// needed.
			p.Release(e)
		}
		p.buf.unref(be)
	}()
	return true
}
