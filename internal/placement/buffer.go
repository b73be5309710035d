package placement

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/sharedbuf"
	"github.com/epochfs/epochfs/internal/source"
	"go.uber.org/zap"
)

// The shared buffer holds whole files of non-resident samples in RAM,
// within a byte budget: the samples the jobs layer prefetches for the
// sampler's lookahead, and demand reads of files that fit no tier. Its
// bytes and their lifetime are the sharedbuf package's; this file decides
// what goes in (Fetch, demandBuffer) and reads it whole, each file once,
// through source.Source, so every byte is counted and within the source
// bandwidth cap.

// ErrBufferFull means the buffer has no room for a file.
var ErrBufferFull = sharedbuf.ErrFull

// DefaultBufferGrace is how long a released entry is kept at most.
const DefaultBufferGrace = sharedbuf.DefaultGrace

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
	return int(min((p.buf.Budget()-p.buf.Budget()/bufferHeadroom)/mean, files))
}

// BufferStats are the shared buffer's counters.
type BufferStats = sharedbuf.Stats

// bufEntry is one file in the shared buffer.
type bufEntry = sharedbuf.Entry[*catalog.Entry]

// fetchInto reads e whole from the source into be. It waits for a demand
// slot only through ctx.
func (p *Placer) fetchInto(ctx context.Context, be *bufEntry) {
	data, err := p.readWhole(ctx, be.Key, be.Size)
	p.buf.Finish(be, data, err)
	if err != nil && !errors.Is(err, context.Canceled) {
		p.log.Warn("buffer fetch failed", zap.String("path", be.Key.Path), zap.Error(err))
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
		return nil, fmt.Errorf("placement: fetch %s: read %d bytes, expected %d", e.Path, n, size)
	}
	return data, nil
}

// readWholeSource reads e whole from the source.
func (p *Placer) readWholeSource(ctx context.Context, e *catalog.Entry, size int64) ([]byte, error) {
	sf, err := p.src.Open(ctx, e.Path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrVanished, e.Path)
		}
		return nil, fmt.Errorf("placement: fetch %s: %w", e.Path, err)
	}
	defer sf.Close()
	a := e.Attr()
	if a.Size != size {
		return nil, fmt.Errorf("placement: fetch %s: %w", e.Path, source.ErrChanged)
	}
	if err := p.opened(e, sf, a); err != nil {
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
func (p *Placer) Fetch(e *catalog.Entry, done func(error)) {
	if p.buf == nil {
		go done(fmt.Errorf("%w: no buffer", ErrBufferFull))
		return
	}
	if e.Kind != catalog.KindFile {
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
	if !e.NoSpace() && !p.buffered(e) {
		go func() {
			defer p.fetchWG.Done()
			p.place(e)
			switch {
			case e.Tier() >= 0:
				done(ErrPlaced)
			case !e.NoSpace():
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
func (p *Placer) place(e *catalog.Entry) {
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
func (p *Placer) fetchBuffered(e *catalog.Entry, done func(error)) {
	be, created, err := p.buf.Reserve(e, e.Attr().Size, e.Path)
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
		ok, _ := be.Wait(p.ctx)
		p.buf.Unref(be)
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
func (p *Placer) Drop(e *catalog.Entry) {
	if p.buf == nil {
		return
	}
	p.buf.Drop(e)
}

// Release marks e's entry as released: it keeps serving readers until its
// room is needed or the grace period ends.
func (p *Placer) Release(e *catalog.Entry) {
	if p.buf == nil {
		return
	}
	p.buf.Release(e)
}

// Sweep drops released entries whose grace period has ended.
func (p *Placer) Sweep() {
	if p.buf == nil {
		return
	}
	p.buf.Sweep()
}

// buffered reports whether e is in the buffer (fetched or being fetched).
func (p *Placer) buffered(e *catalog.Entry) bool {
	if p.buf == nil {
		return false
	}
	return p.buf.Has(e)
}

// BufferStats returns the buffer's counters (zero without a buffer).
func (p *Placer) BufferStats() BufferStats {
	if p.buf == nil {
		return BufferStats{}
	}
	return p.buf.Stats()
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
	if be := p.buf.Acquire(e); be != nil {
		if be.Size == r.attr.Size {
			r.bent = be
			return true
		}
		p.buf.Unref(be) // bytes of another version
		return false
	}
	hook := p.demandHook.Load()
	if hook == nil || !e.NoSpace() || e.Attr().Size > p.buf.Budget()/bufferHeadroom || !hook.Wanted(e) {
		return false
	}
	select {
	case p.demand <- struct{}{}:
	default:
		return false
	}
	be, created, err := p.buf.Reserve(e, e.Attr().Size, e.Path)
	if err != nil {
		<-p.demand
		return false
	}
	r.bent = be // the reservation's reference becomes the reader's
	if !created {
		<-p.demand
		return true
	}
	p.buf.Ref(be) // the fetch's own
	go func() {
		defer func() { <-p.demand }()
		p.fetchInto(p.ctx, be)
		if be.Err() == nil && !hook.Keep(e) {
			// Not kept: every job was handed it already, but their
			// readers may be on their way; it goes first when room is
			// needed.
			p.Release(e)
		}
		p.buf.Unref(be)
	}()
	return true
}
