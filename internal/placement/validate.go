package placement

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/source"
	"github.com/puzpuzpuz/xsync/v3"
	"go.uber.org/zap"
)

// Validation: when an open checks a file against the source.
//
//   - ValidateOnce (the default) stats the source at a file's first open
//     after the mount, never again while mounted: a training epoch after
//     the first sends no metadata request to the source. A check found in
//     the catalog younger than Options.ValidateTTL counts as this mount's
//     (the walk, an open, a copy, a refresh: each records when it found
//     the source agreeing, Entry.checked), so the next job's remount sends
//     the source nothing for those files. A resident file whose last check
//     is older is served as it is and revalidated in the background, within
//     RefreshRate (ScrubRevalidate); a file that is not resident is checked
//     by its first open, as always.
//   - ValidateOpen stats it at every open.
//   - ValidateNever trusts resident copies for the life of the mount.
//
// In every mode an open that will read the source (the file is not
// resident and not in the shared buffer) checks it first: it is about to
// take the bytes from the source, and they must agree with the size the
// kernel is given. That check is the open itself: the source file is
// opened and its descriptor's fstat is the validation (no lstat by path),
// and the open descriptor is handed on to the read (the copy it starts,
// or the reader itself), so a file read for the first time costs the
// source one open, one fstat and its reads. With a remote (a cluster) the
// check stays an lstat: the bytes may come from another node, and an open
// of the source would be the traffic the remote spares. A refresh
// (scrub.go) revalidates on demand.
//
// What the stat says:
//   - the same size and mtime: the copy is good (other attributes, such as
//     the mode, are updated);
//   - another size or mtime: the copy is dropped and the open reads the new
//     version (Reader.Changed; fs invalidates the kernel's attributes and
//     pages before the open returns, so the first read sees the new size);
//   - "does not exist": the file is removed from the dataset (its copy and
//     its record are dropped, logged once) and the open fails with
//     ErrVanished;
//   - any other failure (EIO, ENOTCONN, a timeout): a resident copy is
//     served as it is (stale-if-error, counted in Stats.StaleOnError) and
//     the file is checked again at its next open; a file that is not
//     resident cannot be read and the open fails.
//
// A resident file's open never waits long on the source: the stat gets
// ValidateWait, after which the copy is served and the stat's answer is
// applied when it comes; while the source fails or hangs
// (source.Source.Failing: a call stuck or slow, or one failed in the last
// 2 s with none succeeding since), resident opens do not stat at all.

// Validate is when an open checks a file's source attributes.
type Validate int

// Validation modes.
const (
	ValidateOnce Validate = iota
	ValidateOpen
	ValidateNever
)

// ParseValidate parses a placement.validate value.
func ParseValidate(s string) (Validate, error) {
	switch s {
	case "once":
		return ValidateOnce, nil
	case "open":
		return ValidateOpen, nil
	case "never":
		return ValidateNever, nil
	}
	return 0, fmt.Errorf("placement: validate %q: want once, open or never", s)
}

func (v Validate) String() string {
	switch v {
	case ValidateOpen:
		return "open"
	case ValidateNever:
		return "never"
	}
	return "once"
}

// EventKind says what happened to an entry.
type EventKind int

// Event kinds.
const (
	EntryChanged EventKind = iota + 1 // attributes changed (a file's copy was dropped if its content did)
	EntryRemoved                      // removed from the dataset
	EntryAdded                        // added to the dataset
)

// Event is a change of the tree the kernel's caches must learn about.
type Event struct {
	Kind  EventKind
	Entry *catalog.Entry
	// Sync is set when an open is waiting for the change to reach the
	// kernel (its validation found it): the kernel must drop the old
	// attributes and pages before the open returns. Every other change
	// (found by a read, a copy, a refresh) is told to the kernel from
	// outside the request that found it: a READ that notified the kernel
	// about its own inode would wait for the page lock the read holds.
	Sync bool
}

func (p *Placer) notify(k EventKind, e *catalog.Entry, sync bool) {
	if fn := p.notifyFn.Load(); fn != nil {
		(*fn)(Event{Kind: k, Entry: e, Sync: sync})
	}
}

// validator checks a file against the source for its opens and applies
// what a check finds: attributes that changed (a new content drops the
// copy), a file that left the source (under the mass-deletion guard,
// dropguard.go). It is the placer's one writer of the catalog's
// attributes, checks and removals.
type validator struct {
	o   *Options
	cat *catalog.Catalog
	src *source.Source
	log *zap.Logger
	ctx context.Context // the placer's: ends at Close
	wg  *sync.WaitGroup // the placer's background work

	refreshMu sync.Mutex      // serialises changes of an entry's attributes and removals
	ready     <-chan struct{} // the placer's gate (copier.ready)
	// checks are the source opens of concurrent first opens of one
	// file: one opens and checks, the others wait for it.
	checks *xsync.MapOf[*catalog.Entry, *check]
	// rechecks counts the resident files whose check is older than the
	// TTL and that the background revalidation has not reached yet.
	rechecks             atomic.Int64
	staleServed, removed atomic.Int64
	dropsHeld            atomic.Int64
	opensGuard           atomic.Pointer[dropGuard] // dropguard.go
	lastSrcLog           atomic.Int64              // unix nanos of the last "source fails" log

	// What it needs of the placer's other parts, set by New: the
	// copier's flights (a check joins the check of a copy under way), the
	// shared buffer (a file it holds is read from it), the scrubber (a
	// revalidation, a refresh around a replaced path), the kernel's
	// notification, and the opener's kept copy of a file whose copy went.
	flights        *xsync.MapOf[*catalog.Entry, *flight]
	buffer         *Buffer
	scrub          *Scrubber
	notify         func(k EventKind, e *catalog.Entry, sync bool)
	forgetResident func(e *catalog.Entry)
}

// needsValidation reports whether an open of e stats the source first.
func (p *validator) needsValidation(e *catalog.Entry) bool {
	if e.Tier() < 0 && !p.buffer.has(e) {
		return true // the open reads the source
	}
	switch p.o.Validate {
	case ValidateOpen:
		return true
	case ValidateOnce:
		return !e.Residency().Validated() && !p.fresh(e)
	}
	return false
}

// fresh reports that e's last recorded check is younger than the TTL. A
// check recorded in the future (a clock set back) is not trusted.
func (p *validator) fresh(e *catalog.Entry) bool {
	ttl := int64(p.o.ValidateTTL / time.Second)
	if ttl <= 0 {
		return false
	}
	c, now := e.Checked(), time.Now().Unix()
	return c > 0 && c <= now+60 && now-c < ttl
}

type statResult struct {
	fi  os.FileInfo
	err error
}

// check is one open's check of a file that is not resident, which
// concurrent opens of the file wait for instead of opening the source too
// (validate). done is closed once the checking open has attached to the
// file's copy (Open), so that the waiting ones join it.
type check struct {
	done    chan struct{}
	ok      bool
	changed bool
}

// validate checks e against the source for an open. changed reports that
// the file's content changed (its copy was dropped). sf, when not nil, is
// the source file the check opened (see the file comment): the caller
// owns it. c, when not nil, is the check this open leads: the caller ends
// it (endCheck) once it has attached to the copy.
func (p *validator) validate(ctx context.Context, e *catalog.Entry) (changed bool, sf *source.File, c *check, err error) {
	if !p.needsValidation(e) {
		return false, nil, nil, nil
	}
	if e.Tier() < 0 {
		if p.o.Remote == nil && !p.buffer.has(e) && !(p.buffer.buf != nil && e.Residency().NoSpace()) {
			return p.openChecked(ctx, e)
		}
		fi, err := p.src.Stat(ctx, e.Path())
		changed, err := p.applyStat(e, fi, err, true)
		return changed, nil, nil, err
	}
	// Resident: never wait long on the source, nor ask one that just
	// failed. (Installed since needsValidation looked: ask it again.)
	if !p.needsValidation(e) {
		return false, nil, nil, nil
	}
	if p.src.Failing() {
		p.staleServed.Add(1)
		return false, nil, nil, nil
	}
	res := make(chan statResult, 1)
	go func() {
		fi, err := p.src.Stat(p.ctx, e.Path())
		res <- statResult{fi, err}
	}()
	t := time.NewTimer(p.o.ValidateWait)
	defer t.Stop()
	select {
	case r := <-res:
		changed, err := p.applyStat(e, r.fi, r.err, true)
		if err != nil && !errors.Is(err, ErrVanished) {
			return false, nil, nil, nil // stale-if-error: applyStat counted it
		}
		return changed, nil, nil, err
	case <-t.C:
	case <-ctx.Done():
	}
	// Serve the copy now; apply the answer for later opens.
	p.staleServed.Add(1)
	end := p.src.Slow()
	go func() {
		r := <-res
		end()
		if changed, err := p.applyStat(e, r.fi, r.err, false); changed || errors.Is(err, ErrVanished) {
			p.log.Info("a file served while its validation waited has changed on the source",
				zap.String("path", e.Path()), zap.Bool("removed", errors.Is(err, ErrVanished)))
		}
	}()
	return false, nil, nil, nil
}

// openChecked opens e on the source for an open that will read it, and
// applies the open descriptor's fstat as the validation. An open that
// finds the file's copy under way, of the version a check of this mount
// found, joins it unchecked (unless validate = "open"): the copy's reads
// check the version they read. Concurrent first opens of a file share one
// check: one opens, the others wait for it and join the copy it starts.
func (p *validator) openChecked(ctx context.Context, e *catalog.Entry) (changed bool, sf *source.File, c *check, err error) {
	// joinable: a check of this mount found the version the copy under
	// way copies, or the copy is installed already.
	joinable := func() bool {
		if p.o.Validate == ValidateOpen || !e.Residency().Validated() && !p.fresh(e) {
			return false
		}
		f, ok := p.flights.Load(e)
		return e.Tier() >= 0 || ok && f.attr == e.Attr()
	}
	if joinable() {
		return false, nil, nil, nil
	}
	if ok, err := p.copyChecked(ctx, e); ok || err != nil {
		return false, nil, nil, err
	}
	c = &check{done: make(chan struct{})}
	prev, loaded := p.checks.LoadOrStore(e, c)
	if !loaded {
		// The check before ours ended between the two looks, or a copy
		// started meanwhile: a copy started ahead of a reader looks for
		// a check after it stored itself (sequential.go), so one of the
		// two sees the other.
		ok := joinable()
		if !ok {
			var err error
			if ok, err = p.copyChecked(ctx, e); err != nil {
				p.endCheck(e, c)
				return false, nil, nil, err
			}
		}
		if ok {
			c.ok = true
			p.endCheck(e, c)
			return false, nil, nil, nil
		}
	}
	if loaded {
		select {
		case <-prev.done:
		case <-ctx.Done():
			return false, nil, nil, ctx.Err()
		}
		if prev.ok && (p.o.Validate != ValidateOpen || joinable()) {
			return prev.changed, nil, nil, nil
		}
		c = nil // the check failed (or the leader gave up): check alone
	}
	sf, err = p.src.Open(ctx, e.Path())
	if err != nil {
		changed, err = p.applyStat(e, nil, err, true)
	} else if changed, err = p.applyStat(e, sf.Info(), nil, true); err != nil {
		sf.Close()
		sf = nil
	}
	if c != nil {
		c.ok, c.changed = err == nil, changed
		if err != nil {
			p.endCheck(e, c)
			c = nil
		}
	}
	return changed, sf, c, err
}

// copyChecked waits for the check of a copy of e under way that has not
// checked the file yet (a worker's, or one started ahead of a reader:
// sequential.go), rather than open the source a second time; ok reports
// that its open found the entry's version. Not with validate = "open".
func (p *validator) copyChecked(ctx context.Context, e *catalog.Entry) (ok bool, err error) {
	f, found := p.flights.Load(e)
	if !found || p.o.Validate == ValidateOpen || f.attr != e.Attr() {
		return false, nil
	}
	select {
	case <-f.checked:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	return f.checkOK && f.attr == e.Attr(), nil
}

// endCheck ends a check: the opens waiting for it go on.
func (p *validator) endCheck(e *catalog.Entry, c *check) {
	if c == nil {
		return
	}
	p.checks.Compute(e, func(old *check, loaded bool) (*check, bool) { return old, !loaded || old == c })
	close(c.done)
}

// applyStat acts on a stat of e's source file. It returns ErrVanished for a
// file the source no longer has, and a wrapped source error for a failed
// stat (counted as served stale when e is resident). sync: an open waits
// for the kernel to learn of a change (Event.Sync).
func (p *validator) applyStat(e *catalog.Entry, fi os.FileInfo, err error, sync bool) (changed bool, _ error) {
	switch {
	case err == nil && fi.Mode().IsRegular():
		p.checkedNow(e)
		return p.setAttr(e, catalog.AttrFromInfo(fi), sync), nil
	case err == nil, errors.Is(err, fs.ErrNotExist):
		// Gone, or no longer a regular file at that path: a symlink
		// swapped in for it or for a directory above it is never
		// followed (internal/source/beneath.go); a refresh of the nearest directory
		// that still resolves records what replaced it.
		if err == nil || errors.Is(err, source.ErrSymlinkInPath) || errors.Is(err, source.ErrNotRegular) {
			// Something else is there: that is no outage, the mass-
			// deletion guard has nothing to hold back.
			p.removeEntry(e)
			p.rewalkAround(e.Path())
		} else if derr := p.dropEntry(e, p.openGuard(), err); derr != nil {
			return false, derr
		}
		return false, fmt.Errorf("%w: %s", ErrVanished, e.Path())
	}
	if e.Tier() >= 0 {
		p.staleServed.Add(1)
		p.logSourceError(err)
	}
	return false, fmt.Errorf("placement: check %s: %w", e.Path(), err)
}

// checkedNow records that the source was just found to agree with e (its
// attributes follow: setAttr). The time is persisted when the recorded one
// is older than a fraction of the TTL: a check of every open (validate =
// "open") does not write the catalog at every open.
func (p *validator) checkedNow(e *catalog.Entry) {
	e.Residency().SetValidated(true)
	if e.Residency().SetRecheck(false) {
		p.rechecks.Add(-1)
	}
	now := time.Now().Unix()
	old := e.SetChecked(now)
	every := max(int64(p.o.ValidateTTL/time.Second)/8, 1)
	if p.o.ValidateTTL <= 0 {
		every = 3600
	}
	if now-old >= every {
		if err := p.cat.Persist(e); err != nil {
			p.log.Warn("catalog update failed", zap.String("path", e.Path()), zap.Error(err))
		}
	}
}

// trustChecks applies the TTL at mount (ValidateOnce): a resident file
// whose recorded check is older than the TTL (or unknown) is served as it
// is and queued for the background revalidation. (A younger check counts
// as this mount's: needsValidation.)
func (p *validator) trustChecks() {
	if p.o.Validate != ValidateOnce || p.o.ValidateTTL <= 0 {
		return
	}
	var stale int64
	p.cat.Root().Files(func(e *catalog.Entry) bool {
		if e.Tier() >= 0 && !p.fresh(e) {
			e.Residency().SetValidated(true) // served meanwhile
			e.Residency().SetRecheck(true)
			stale++
		}
		return true
	})
	if stale == 0 {
		return
	}
	p.rechecks.Store(stale)
	p.log.Info("resident files checked longer ago than validate_ttl: revalidating them in the background",
		zap.Int64("files", stale), zap.Duration("validate_ttl", p.o.ValidateTTL))
	if err := p.scrub.Request(ScrubRequest{Kind: ScrubRevalidate}); err != nil {
		p.log.Warn("cannot queue the revalidation", zap.Error(err))
	}
}

// validateTTL is Options.ValidateTTL.
func (p *validator) validateTTL() time.Duration { return p.o.ValidateTTL }

// rechecksPending is how many resident files wait for the background
// revalidation.
func (p *validator) rechecksPending() int64 { return p.rechecks.Load() }

// rewalkAround queues a refresh of the nearest directory above rel that
// still resolves on the source without a symlink, so that the catalog
// learns what replaced rel (or a directory on its path). It runs in the
// background: the stats it takes are not the caller's to wait for.
func (p *validator) rewalkAround(rel string) {
	if p.ctx.Err() != nil {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		dir := path.Dir(rel)
		for dir != "." && dir != "/" && dir != "" {
			if fi, err := p.src.Stat(p.ctx, dir); err == nil && fi.IsDir() {
				break
			} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return // the source fails: the next open finds out again
			}
			dir = path.Dir(dir)
		}
		if dir == "." || dir == "/" {
			dir = ""
		}
		if err := p.scrub.Request(ScrubRequest{Kind: ScrubRefresh, Paths: []string{dir}}); err != nil {
			p.log.Debug("cannot queue the refresh of a changed directory", zap.String("path", dir), zap.Error(err))
		}
	}()
}

// logSourceError logs a failing source at most once per 10 s.
func (p *validator) logSourceError(err error) {
	now := time.Now().UnixNano()
	last := p.lastSrcLog.Load()
	if now-last < int64(10*time.Second) || !p.lastSrcLog.CompareAndSwap(last, now) {
		return
	}
	p.log.Warn("the source fails; serving resident copies as they are", zap.Error(err))
}

// setAttr records new source attributes of e. When the size or mtime
// changed, e's copy is dropped and changed is true. Calls are serialised:
// a caller that compared stale attributes must not drop the copy another
// caller's update has since placed again (nor drop one copy twice). sync:
// see Event.Sync.
func (p *validator) setAttr(e *catalog.Entry, a catalog.Attr, sync bool) (changed bool) {
	p.refreshMu.Lock()
	old := e.Attr()
	if old.Same(a) {
		p.refreshMu.Unlock()
		return false
	}
	changed = a.Size != old.Size || a.Mtime != old.Mtime
	if i := e.Tier(); i >= 0 && changed {
		e.SetTier(-1)
		p.forgetResident(e)
		p.o.dropped(e, old)
		if err := p.removeCopy(i, e.Path(), old.Size); err != nil {
			p.log.Warn("drop stale copy", zap.String("path", e.Path()), zap.Error(err))
		}
	}
	if changed && e.Kind() == catalog.KindFile {
		e.Residency().SetNoSpace(false)
		p.cat.AddBytes(a.Size - old.Size)
	}
	if changed && e.Kind() == catalog.KindFile {
		// A new content: a new inode of the mount (internal/fs/ino.go).
		e.SetContent(a)
	} else {
		e.SetAttr(a)
	}
	if err := p.cat.Persist(e); err != nil {
		p.log.Warn("catalog update failed", zap.String("path", e.Path()), zap.Error(err))
	}
	p.refreshMu.Unlock()
	if changed && e.Kind() == catalog.KindFile {
		p.log.Info("source file changed; its copy was dropped", zap.String("path", e.Path()),
			zap.Int64("old_size", old.Size), zap.Int64("size", a.Size))
	}
	p.notify(EntryChanged, e, sync)
	return changed
}

// removeCopy removes the copy of path in tier i, of size bytes, under
// refreshMu: a copy the placer has not accounted yet (its gate is closed:
// checkCopies) is removed without unaccounting it.
func (p *validator) removeCopy(i int, path string, size int64) error {
	select {
	case <-p.ready:
		return p.o.Tiers[i].Remove(path, size)
	default:
		return p.o.Tiers[i].Discard(path)
	}
}

// sourceSide reports whether err is the source's fault (so reading the
// source again is no way out), not a tier's.
func sourceSide(err error) bool {
	return errors.Is(err, source.ErrSource) || errors.Is(err, source.ErrChanged) || errors.Is(err, ErrVanished)
}
