package placement

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/source"
	"github.com/epochfs/epochfs/internal/tier"
	"go.uber.org/zap"
)

const (
	copyChunk = 1 << 20
	// A reader asking for data this far past what a copy has written reads
	// the source directly instead of waiting (random access to a large file).
	farAhead = 64 << 20
)

// errNoTier means no tier had room (or none was healthy) for a copy.
var errNoTier = errors.New("placement: no tier has room")

// errResident means the file became resident between the caller's check
// and the start of its copy (another copy installed it and left the
// flight map): it is not copied again.
var errResident = errors.New("placement: already resident")

// errShareFirst: a copy of a file beyond this node's share found no room
// beyond the share (share.go).
var errShareFirst = errors.New("placement: no room beyond this node's share")

// flight is one whole-file copy in progress, shared by every reader of the
// file. Its temp file stays open until the last reader lets go; after the
// install it is the tier file itself.
type flight struct {
	e    *catalog.Entry
	attr catalog.Attr // the version being copied: the entry's when the copy started
	size int64
	// src is the source file the open that started the copy opened (of
	// version attr, checked to be), or nil: the copy opens its own.
	src *source.File
	// checked is closed once the copy's source open has checked the
	// version (checkOK) or failed, or the copy ended without one: opens
	// of the file wait for it instead of opening the source themselves
	// (validate.go: openChecked).
	checked   chan struct{}
	checkOnce sync.Once
	checkOK   bool

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every progress step
	copied  int64
	done    bool
	err     error
	file    *os.File // temp (then installed) file; nil until created
	temp    *tier.Temp
	refs    int
	closed  bool
}

func newFlight(e *catalog.Entry) *flight {
	a := e.Attr()
	return &flight{e: e, attr: a, size: a.Size, changed: make(chan struct{}), refs: 1, checked: make(chan struct{})}
}

// setChecked ends the wait for the copy's check (the first call counts).
func (f *flight) setChecked(ok bool) {
	f.checkOnce.Do(func() {
		f.checkOK = ok
		close(f.checked)
	})
}

// acquire takes a reference; false if the flight is already closed.
func (f *flight) acquire() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.refs++
	return true
}

// release drops a reference; the last one closes the file.
func (f *flight) release() {
	f.mu.Lock()
	f.refs--
	last := f.refs == 0
	if last {
		f.closed = true
	}
	temp := f.temp
	f.mu.Unlock()
	if last && temp != nil {
		temp.Close()
	}
}

func (f *flight) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *flight) setTemp(t *tier.Temp) {
	f.mu.Lock()
	f.temp, f.file = t, t.File()
	f.notifyLocked()
	f.mu.Unlock()
}

func (f *flight) progress(n int64) {
	f.mu.Lock()
	f.copied = n
	f.notifyLocked()
	f.mu.Unlock()
}

func (f *flight) finish(err error) {
	f.mu.Lock()
	f.done, f.err = true, err
	f.notifyLocked()
	f.mu.Unlock()
}

// readAt serves a read from the copy. ok is false when the caller should
// read the source instead: the copy failed for a tier's reason, or the
// range is far ahead of it. A copy that failed because of the source fails
// the read too (the source would fail it again). A copy that makes no
// progress for stall fails the read with source.ErrTimeout.
func (f *flight) readAt(ctx context.Context, buf []byte, off int64, stall time.Duration) (n int, ok bool, err error) {
	want := off + int64(len(buf))
	if want > f.size {
		want = f.size
	}
	t := time.NewTimer(stall)
	defer t.Stop()
	for {
		f.mu.Lock()
		done, ferr, copied, file, ch := f.done, f.err, f.copied, f.file, f.changed
		f.mu.Unlock()
		if done && ferr != nil {
			if sourceSide(ferr) {
				return 0, true, ferr
			}
			return 0, false, nil
		}
		if done || copied >= want {
			if off >= f.size {
				return 0, true, nil
			}
			n, err := file.ReadAt(buf[:want-off], off)
			if errors.Is(err, io.EOF) {
				err = nil
			}
			if err != nil {
				return n, false, nil
			}
			return n, true, nil
		}
		if off > copied+farAhead {
			return 0, false, nil
		}
		select {
		case <-ch:
			t.Reset(stall)
		case <-ctx.Done():
			return 0, true, ctx.Err()
		case <-t.C:
			return 0, true, fmt.Errorf("placement: read %s: %w: %w", f.e.Path(), source.ErrSource, source.ErrTimeout)
		}
	}
}

// startFlight returns the flight of e, creating it if none is running.
// started tells the caller it must run the new flight. The caller holds one
// reference on the returned flight.
func (p *copier) startFlight(e *catalog.Entry) (f *flight, started bool) {
	for {
		nf := newFlight(e)
		f, loaded := p.flights.LoadOrStore(e, nf)
		if !loaded {
			return nf, true
		}
		if f.acquire() {
			return f, false
		}
		// Closed but not yet removed: the copy just ended. Retry, unless
		// it succeeded.
		if e.Tier() >= 0 {
			return nil, false
		}
		p.dropFlight(f)
	}
}

// dropFlight removes f from the table of copies if it is still there (a
// newer flight of its entry stays; nothing is stored when f is gone).
func (p *copier) dropFlight(f *flight) {
	p.flights.Compute(f.e, func(old *flight, ok bool) (*flight, bool) { return old, !ok || old == f })
}

// run copies the file of f whole into the fastest tier with room.
func (p *copier) run(f *flight) {
	err := p.copy(f)
	f.setChecked(false) // ended without a check (no-op after one)
	if f.src != nil {
		// The copy ended before it took the open's source file.
		f.src.Close()
		f.src = nil
	}
	f.finish(err)
	p.flights.Delete(f.e)
	if err == nil {
		return
	}
	switch {
	case errors.Is(err, errNoTier), errors.Is(err, errResident), errors.Is(err, errShareFirst), errors.Is(err, context.Canceled):
	case tier.IsFileError(err):
		// The file keeps being served from the source. A failure of its
		// own (a name the tier refuses) recurs at every open: warn once.
		p.failed.Add(1)
		if _, again := p.failedFiles.LoadOrStore(f.e, struct{}{}); !again {
			p.log.Warn("placement failed", zap.String("path", f.e.Path()), zap.Error(err))
		} else if ce := p.log.Check(zap.DebugLevel, "placement failed again"); ce != nil {
			ce.Write(zap.String("path", f.e.Path()), zap.Error(err))
		}
	default:
		p.failed.Add(1)
		p.log.Warn("placement failed", zap.String("path", f.e.Path()), zap.Error(err))
	}
}

// Long: one copy from the source open to the tier install, each failure's cleanup beside the step that can fail.
func (p *copier) copy(f *flight) error {
	e := f.e
	if err := p.ctx.Err(); err != nil {
		return err
	}
	// A flight is stored only once the previous one left the map, after it
	// recorded the residency: this check sees it.
	if e.Tier() >= 0 {
		return errResident
	}
	kept := p.o.keeps(e, f.attr)
	if !kept && p.roomBeyondShare() < f.size {
		return errShareFirst
	}
	t, idx, res, allFull := p.reserve(0, f.size)
	if t == nil && kept && allFull && p.o.sharer() != nil && p.makeRoom(f.size) {
		t, idx, res, allFull = p.reserve(0, f.size)
	}
	if t == nil {
		// No eviction: a file every tier refused for space will not fit
		// later this mount. Unhealthy tiers may take it later. A file
		// beyond this node's share may fit once the share moves.
		if kept && allFull && !e.Residency().SetNoSpace(true) {
			p.nospace.Add(1)
			p.shareCopied(f.size)
		}
		return errNoTier
	}
	if !kept && p.roomBeyondShare() < 0 {
		// Another copy took the room beyond the share meanwhile.
		res.Release()
		return errShareFirst
	}
	installed := false
	if kept {
		// The reservation holds the share's room from now on: counted
		// in both, it would keep copies beyond the share out.
		p.shareCopied(f.size)
		defer func() {
			if !installed {
				p.shareCopied(-f.size)
			}
		}()
	}
	// Without a remote the source is opened (and its version checked)
	// before the tier is asked for a temp file, so a vanished or changed
	// file costs the tier nothing; with one, only when the remote does not
	// hold the file: a file read from the remote costs the source nothing.
	sf := f.src
	f.src = nil
	if sf != nil {
		defer sf.Close()
		f.setChecked(true) // the open that started the copy checked it
	} else if p.o.Remote == nil {
		var err error
		if sf, err = p.openVersion(e, f.attr); err != nil {
			f.setChecked(false)
			res.Release()
			if errors.Is(err, ErrVanished) {
				return err
			}
			return fmt.Errorf("placement: copy %s: %w", e.Path(), err)
		}
		defer sf.Close()
		// The open found the version being copied: this mount's check
		// (the readers that join the copy need none of their own).
		e.Residency().SetValidated(true)
		f.setChecked(true)
	}
	tmp, err := t.Create(e.Path(), res)
	for err != nil {
		// The tier could not take the temp file (a disk error, a full or
		// read-only file system): try the slower tiers before giving up.
		res.Release()
		p.log.Warn("tier refused a copy; trying the next tier", zap.String("tier", t.Name()),
			zap.String("path", e.Path()), zap.Error(err))
		cerr := err
		if t, idx, res, _ = p.reserve(idx+1, f.size); t == nil {
			return fmt.Errorf("placement: copy %s: %w", e.Path(), cerr)
		}
		tmp, err = t.Create(e.Path(), res)
	}
	f.setTemp(tmp)
	fromSource := func(w io.Writer, progress func(int64)) (int64, error) {
		if sf != nil {
			return p.copyVersion(sf, f.attr, w, progress)
		}
		return p.copySource(e, f.attr, w, progress)
	}
	var n int64
	if p.o.Remote != nil {
		n, err = p.o.Remote.Copy(p.ctx, remoteKey(e, f.attr), tmp, f.progress, fromSource)
	} else {
		n, err = fromSource(tmp, f.progress)
	}
	if err == nil && n != f.size {
		err = fmt.Errorf("%w: read %d bytes, expected %d", source.ErrChanged, n, f.size)
	}
	if err == nil {
		err = tmp.Install(f.size)
	} else {
		tmp.Abort()
	}
	if err != nil {
		if errors.Is(err, ErrVanished) {
			return err
		}
		return fmt.Errorf("placement: copy %s: %w", e.Path(), err)
	}
	// The copy is of the version it started from: record it only if that
	// is still the entry's (an open may have found a newer one meanwhile).
	p.val.refreshMu.Lock()
	if cur := e.Attr(); cur.Size != f.attr.Size || cur.Mtime != f.attr.Mtime || e.Gone() {
		p.val.refreshMu.Unlock()
		if rerr := t.Remove(e.Path(), f.size); rerr != nil {
			p.log.Warn("drop outdated copy", zap.String("path", e.Path()), zap.Error(rerr))
		}
		return fmt.Errorf("placement: copy %s: %w", e.Path(), source.ErrChanged)
	}
	e.SetTier(idx)
	p.val.refreshMu.Unlock()
	p.o.holds(e, f.attr)
	installed = true
	// The copy read the version it checked at its open: a check of this
	// mount (its record is written next).
	e.Residency().SetValidated(true)
	e.SetChecked(time.Now().Unix())
	if err := p.cat.Persist(e); err != nil {
		// Served from the tier this mount; copied again after a remount.
		p.log.Warn("catalog update failed", zap.String("path", e.Path()), zap.Error(err))
	}
	p.done.Add(1)
	p.placedBytes.Add(f.size)
	return nil
}

// copySource copies version a of e from the source to w: the file is
// checked to be that version before and after the copy.
func (p *copier) copySource(e *catalog.Entry, a catalog.Attr, w io.Writer, progress func(int64)) (int64, error) {
	sf, err := p.openVersion(e, a)
	if err != nil {
		return 0, err
	}
	defer sf.Close()
	return p.copyVersion(sf, a, w, progress)
}

// openVersion opens e on the source and checks that it is version a.
func (p *copier) openVersion(e *catalog.Entry, a catalog.Attr) (*source.File, error) {
	sf, err := p.src.Open(p.ctx, e.Path())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if derr := p.val.dropEntry(e, p.val.openGuard(), err); derr != nil {
				return nil, derr
			}
			return nil, fmt.Errorf("%w: %s", ErrVanished, e.Path())
		}
		return nil, err
	}
	if err := p.opened(e, sf, a); err != nil {
		sf.Close()
		return nil, err
	}
	return sf, nil
}

// opened checks that sf, a source file just opened for e, is e's version a
// and grants the access a does: its size and mtime, and its owner, group
// and mode, from the open descriptor. Every path that takes bytes from
// the source for users (a copy, the shared buffer, a reader) checks this
// one way. Another version (source.ErrChanged) or other access
// (ErrAccessChanged) is recorded in the catalog (the kernel is told) and
// refused: no byte of it is served under a's permissions. On success sf
// expects version a at every read after.
func (p *copier) opened(e *catalog.Entry, sf *source.File, a catalog.Attr) error {
	b := catalog.AttrFromInfo(sf.Info())
	if b.Size != a.Size || b.Mtime != a.Mtime {
		p.val.setAttr(e, b, false)
		return fmt.Errorf("placement: %s: %w", e.Path(), source.ErrChanged)
	}
	if !catalog.SameAccess(a, b) {
		p.val.setAttr(e, b, false)
		return fmt.Errorf("placement: %s: %w", e.Path(), ErrAccessChanged)
	}
	// Readers follow the copy as it goes: no chunk of another version may
	// reach them.
	sf.Expect(a.Size, a.Mtime)
	return nil
}

// copyVersion copies sf, opened as version a of e with Expect set
// (openVersion, or the open that started the copy), to w. Every read
// checked the version after it read, the last one included: a file that
// changed fails the copy with source.ErrChanged, and the next open
// finds the new version.
func (p *copier) copyVersion(sf *source.File, a catalog.Attr, w io.Writer, progress func(int64)) (int64, error) {
	bp := p.bufs.Get().(*[]byte)
	n, err := sf.CopyTo(p.ctx, w, *bp, progress)
	p.bufs.Put(bp)
	if err == nil && n != a.Size {
		err = fmt.Errorf("%w: read %d bytes, expected %d", source.ErrChanged, n, a.Size)
	}
	return n, err
}

// reserve reserves size bytes in the fastest tier from index start on with
// room; allFull reports whether every tier tried refused for space.
func (p *copier) reserve(start int, size int64) (t *tier.Tier, idx int, res *tier.Reservation, allFull bool) {
	allFull = true
	for i := start; i < len(p.o.Tiers); i++ {
		r, err := p.o.Tiers[i].Reserve(size)
		if err == nil {
			return p.o.Tiers[i], i, r, false
		}
		if !errors.Is(err, tier.ErrNoSpace) {
			allFull = false
		}
	}
	return nil, -1, nil, allFull
}
