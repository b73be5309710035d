package placement

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"sync"
	"sync/atomic"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/sharedbuf"
	"github.com/epochfs/epochfs/internal/source"
	"github.com/epochfs/epochfs/internal/tier"
	"go.uber.org/zap"
)

// The shared buffer holds whole files of non-resident samples in RAM,
// within a byte budget: the samples the jobs layer prefetches for the
// sampler's lookahead, and demand reads of files that fit no tier. Its
// bytes and their lifetime are the sharedbuf package's; its policy, what
// goes in (Fetch, attach) and the budget's split (Slots), is Buffer's, a
// component of the placer (Placer.Buffer). The placer's copier reads each
// file whole, once, through source.Source (readWhole), so every byte is
// counted and within the source bandwidth cap.

// Buffer is the shared buffer's policy, and the page cache's read ahead of
// resident samples (readahead.go): what the jobs make cheap to read soon.
// Its zero budget (no buffer) makes
// every call a no-op: Fetch answers ErrBufferFull, Slots 0.
type Buffer struct {
	buf    *sharedbuf.Buffer[*catalog.Entry] // nil without a buffer
	cat    *catalog.Catalog
	tiers  []*tier.Tier // for Readahead
	log    *zap.Logger
	ctx    context.Context // the placer's: ends at Close
	demand chan struct{}   // the placer's semaphore of demand work
	// place copies a file into a tier now, or waits for the copy in
	// flight (the copier's); read reads a file whole, from the cluster or
	// the source.
	place     func(e *catalog.Entry)
	placeable func(e *catalog.Entry) bool
	read      func(ctx context.Context, e *catalog.Entry, size int64) ([]byte, error)

	hook      atomic.Pointer[DemandHook]
	fetchMu   sync.Mutex // guards fetchDone and fetchWG.Add
	fetchDone bool
	fetchWG   sync.WaitGroup // background fetches
}

// Buffer is the placer's shared buffer.
func (p *Placer) Buffer() *Buffer { return p.buffer }

// newBuffer is the buffer of p's options (BufferBytes 0: none).
func (p *Placer) newBuffer() *Buffer {
	b := &Buffer{cat: p.cat, tiers: p.o.Tiers, log: p.log, ctx: p.ctx, demand: p.cp.demand, place: p.place, placeable: p.cp.placeable, read: p.readWhole}
	if p.o.BufferBytes > 0 {
		b.buf = sharedbuf.New[*catalog.Entry](p.o.BufferBytes, p.o.BufferGrace, nil)
	}
	return b
}

// close waits for the fetches in flight (the placer's context ended) and
// refuses new ones.
func (b *Buffer) close() {
	b.fetchMu.Lock()
	b.fetchDone = true
	b.fetchMu.Unlock()
	b.fetchWG.Wait()
}

// ErrBufferFull means the buffer has no room for a file.
var ErrBufferFull = sharedbuf.ErrFull

// DefaultBufferGrace is how long a released entry is kept at most.
const DefaultBufferGrace = sharedbuf.DefaultGrace

// The budget's split, decided here and nowhere else. The sampler counts
// (bufferHeadroom-1)/bufferHeadroom of the budget as its slots
// (Slots); the rest is headroom for what it does not count: demand
// fetches before it is asked, released entries in their grace period,
// dropped entries still being read. A demand fetch takes a file of at most
// the headroom.
const bufferHeadroom = 4

// Slots is the number of samples the sampler may count in the shared
// buffer: three quarters of the budget divided by the catalog's mean file
// size, at most the number of files; 0 without a buffer or files.
func (b *Buffer) Slots() int {
	files, bytes := b.cat.Files(), b.cat.Bytes()
	if b.buf == nil || files == 0 {
		return 0
	}
	mean := max(bytes/files, 1)
	return int(min((b.buf.Budget()-b.buf.Budget()/bufferHeadroom)/mean, files))
}

// BufferStats are the shared buffer's counters.
type BufferStats = sharedbuf.Stats

// bufEntry is one file in the shared buffer.
type bufEntry = sharedbuf.Entry[*catalog.Entry]

// fetchInto reads e whole from the source into be. It waits for a demand
// slot only through ctx.
func (b *Buffer) fetchInto(ctx context.Context, be *bufEntry) {
	data, err := b.read(ctx, be.Key, be.Size)
	b.buf.Finish(be, data, err)
	if err != nil && !errors.Is(err, context.Canceled) {
		b.log.Warn("buffer fetch failed", zap.String("path", be.Key.Path()), zap.Error(err))
	}
}

func (p *Placer) readWhole(ctx context.Context, e *catalog.Entry, size int64) ([]byte, error) {
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
		return nil, fmt.Errorf("placement: fetch %s: read %d bytes, expected %d", e.Path(), n, size)
	}
	return data, nil
}

// readWholeSource reads e whole from the source.
func (p *Placer) readWholeSource(ctx context.Context, e *catalog.Entry, size int64) ([]byte, error) {
	sf, err := p.src.Open(ctx, e.Path())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrVanished, e.Path())
		}
		return nil, fmt.Errorf("placement: fetch %s: %w", e.Path(), err)
	}
	defer sf.Close()
	a := e.Attr()
	if a.Size != size {
		return nil, fmt.Errorf("placement: fetch %s: %w", e.Path(), source.ErrChanged)
	}
	if err := p.cp.opened(e, sf, a); err != nil {
		return nil, err
	}
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
			return nil, fmt.Errorf("placement: fetch %s: %w", e.Path(), err)
		}
	}
	if off != size {
		return nil, fmt.Errorf("placement: fetch %s: read %d bytes, expected %d", e.Path(), off, size)
	}
	// One more byte would mean the file grew.
	var one [1]byte
	if n, _ := sf.ReadAt(ctx, one[:], size); n != 0 {
		return nil, fmt.Errorf("placement: fetch %s: file grew past %d bytes", e.Path(), size)
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
func (b *Buffer) Fetch(e *catalog.Entry, done func(error)) {
	if b.buf == nil {
		go done(fmt.Errorf("%w: no buffer", ErrBufferFull))
		return
	}
	if e.Kind() != catalog.KindFile {
		go done(ErrNotFile)
		return
	}
	if e.Tier() >= 0 {
		go done(ErrPlaced)
		return
	}
	b.fetchMu.Lock()
	if b.fetchDone {
		b.fetchMu.Unlock()
		go done(ErrClosed)
		return
	}
	b.fetchWG.Add(1)
	b.fetchMu.Unlock()
	if !e.Residency().NoSpace() && !b.has(e) && b.placeable(e) {
		go func() {
			defer b.fetchWG.Done()
			b.place(e)
			switch {
			case e.Tier() >= 0:
				done(ErrPlaced)
			case !e.Residency().NoSpace() && b.placeable(e):
				done(fmt.Errorf("placement: fetch %s: the copy failed", e.Path()))
			default:
				b.fetchWG.Add(1) // balanced by fetchBuffered
				b.fetchBuffered(e, done)
			}
		}()
		return
	}
	b.fetchBuffered(e, done)
}

// ErrPlaced is Fetch's answer for a file that is (now) resident in a tier.
var ErrPlaced = errors.New("placement: resident in a tier")

// place copies e into a tier now, or waits for the copy in flight.
func (p *Placer) place(e *catalog.Entry) {
	f, started := p.cp.startFlight(e)
	if f == nil {
		return
	}
	defer f.release()
	if started {
		p.cp.queued.Add(1)
		p.cp.run(f)
		p.cp.queued.Add(-1)
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
func (b *Buffer) fetchBuffered(e *catalog.Entry, done func(error)) {
	be, created, err := b.buf.Reserve(e, e.Attr().Size, e.Path())
	if err != nil {
		b.fetchWG.Done()
		go done(err)
		return
	}
	go func() {
		defer b.fetchWG.Done()
		if created {
			b.fetchInto(b.ctx, be)
		}
		ok, _ := be.Wait(b.ctx)
		b.buf.Unref(be)
		switch {
		case ok:
			done(nil)
		case be.Err() != nil:
			done(be.Err())
		default:
			done(ErrClosed)
		}
	}()
}

// Drop removes e from the buffer; its memory is freed once no reader holds
// it.
func (b *Buffer) Drop(e *catalog.Entry) {
	if b.buf == nil {
		return
	}
	b.buf.Drop(e)
}

// Release marks e's entry as released: it keeps serving readers until its
// room is needed or the grace period ends.
func (b *Buffer) Release(e *catalog.Entry) {
	if b.buf == nil {
		return
	}
	b.buf.Release(e)
}

// Sweep drops released entries whose grace period has ended.
func (b *Buffer) Sweep() {
	if b.buf == nil {
		return
	}
	b.buf.Sweep()
}

// has reports whether e is in the buffer (fetched or being fetched).
func (b *Buffer) has(e *catalog.Entry) bool {
	if b.buf == nil {
		return false
	}
	return b.buf.Has(e)
}

// Stats returns the buffer's counters (zero without a buffer).
func (b *Buffer) Stats() BufferStats {
	if b.buf == nil {
		return BufferStats{}
	}
	return b.buf.Stats()
}

// DemandHook decides about demand reads of files that fit no tier whole
// (the jobs layer asks the sampler). Wanted is asked before such a read
// fetches the file into the buffer: only when a live job still wants the
// sample does the fetch go through the buffer, so with no job the buffer
// is not a RAM cache outside the tier quotas. Keep is asked once the bytes
// are in: bytes not kept are released (see Release).
type DemandHook struct {
	Wanted func(e *catalog.Entry) bool
	Keep   func(e *catalog.Entry) bool
}

// SetDemandHook installs h; nil removes it. Without a hook, demand reads do
// not use the buffer. There is one hook: installing a second one while one
// is installed panics (a wiring mistake, not a replacement).
func (b *Buffer) SetDemandHook(h *DemandHook) {
	if h == nil {
		b.hook.Store(nil)
		return
	}
	if !b.hook.CompareAndSwap(nil, h) {
		panic("placement: SetDemandHook: a hook is installed already")
	}
}

// attach attaches r to a buffered copy of its file: one already buffered
// or being fetched, or, for a file that fits no tier, a new whole file
// fetch when the hook is set and the budget has room. It reports whether r
// is attached.
func (b *Buffer) attach(r *Reader) bool {
	if b.buf == nil {
		return false
	}
	e := r.e
	if be := b.buf.Acquire(e); be != nil {
		if be.Size == r.attr.Size {
			r.bent = be
			return true
		}
		b.buf.Unref(be) // bytes of another version
		return false
	}
	hook := b.hook.Load()
	if hook == nil || !e.Residency().NoSpace() || e.Attr().Size > b.buf.Budget()/bufferHeadroom || !hook.Wanted(e) {
		return false
	}
	select {
	case b.demand <- struct{}{}:
	default:
		return false
	}
	be, created, err := b.buf.Reserve(e, e.Attr().Size, e.Path())
	if err != nil {
		<-b.demand
		return false
	}
	r.bent = be // the reservation's reference becomes the reader's
	if !created {
		<-b.demand
		return true
	}
	b.buf.Ref(be) // the fetch's own
	go func() {
		defer func() { <-b.demand }()
		b.fetchInto(b.ctx, be)
		if be.Err() == nil && !hook.Keep(e) {
			// Not kept: every job was handed it already, but their
			// readers may be on their way; it goes first when room is
			// needed.
			b.Release(e)
		}
		b.buf.Unref(be)
	}()
	return true
}
