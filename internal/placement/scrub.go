package placement

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/source"
)

// Scrubs: work on demand that compares the catalog and the tier copies with
// the source, in the background, a few files in parallel and within
// Options.RefreshRate source metadata operations per second (the PFS's
// metadata server is shared).
//
//   - Refresh revalidates paths (or the whole tree): a changed file's copy
//     is dropped, files and directories added to the source appear in the
//     mount and removed ones disappear, without a remount. Every file it
//     checks counts as validated for ValidateOnce.
//   - Verify checks every tier copy under the paths: the copy exists with
//     the recorded size, and the source still has the recorded size and
//     mtime; with Content, the copy's bytes equal the source's (read within
//     the source bandwidth cap). A bad copy is dropped and queued to be
//     copied again: the answer to a copy corrupted in place, which opens do
//     not notice.
//
// Requests run one at a time, in the order they came.

// ScrubKind is what a scrub does.
type ScrubKind int

// Scrub kinds.
const (
	ScrubRefresh ScrubKind = iota + 1
	ScrubVerify
	ScrubVerifyContent
	// ScrubRevalidate checks the resident files a remount found checked
	// longer ago than the TTL (validate.go: trustChecks).
	ScrubRevalidate
)

func (k ScrubKind) String() string {
	switch k {
	case ScrubRefresh:
		return "refresh"
	case ScrubVerify:
		return "verify"
	case ScrubVerifyContent:
		return "verify-content"
	case ScrubRevalidate:
		return "revalidate"
	}
	return "none"
}

// ScrubRequest asks for one scrub.
type ScrubRequest struct {
	Kind  ScrubKind
	Paths []string // dataset-relative; none = the whole dataset
	// AllowDrop removes whatever the source no longer has, past
	// Options.MaxDrop (dropguard.go).
	AllowDrop bool
}

// ScrubProgress reports the running (or last) scrub of a kind family.
type ScrubProgress struct {
	Running  bool
	Pending  int   // requests waiting behind the running one
	Finished int64 // requests finished since the mount
	Kind     ScrubKind
	Checked  int64 // files compared with the source
	Changed  int64 // files whose source changed (copy dropped)
	Added    int64 // files added to the dataset
	Removed  int64 // files removed from the dataset
	Dropped  int64 // tier copies dropped: bad ones (verify) and stale ones of changed files
	Held     int64 // files gone from the source but kept (MaxDrop)
	Errors   int64 // paths that could not be checked
	LastErr  string
	Started  time.Time
	Took     time.Duration // of the last finished request
}

// Scrubber is the placer's refresh and verify, a component of its own
// (Placer.Scrubber): requests queued and run one at a time in the
// background, within placement.refresh_rate, their progress, the checks of
// the paths a request names, and the copies dropped on purpose (drop.go).
// Its runs work on the placer's catalog, tiers and source (p).
type Scrubber struct {
	o   *Options
	cat *catalog.Catalog
	src *source.Source
	log *zap.Logger
	ctx context.Context // the placer's: ends at Close
	wg  *sync.WaitGroup // the placer's background work
	// What it needs of the placer's other parts, set by New: the copier
	// (a changed file of a warm dataset is copied again), the validator
	// (the changes and removals a refresh finds), the opener (the copies
	// it drops), warmup (whether the dataset is warm) and the kernel's
	// notification.
	cp      *copier
	val     *validator
	op      *opener
	warmups *Warmups
	notify  func(k EventKind, e *catalog.Entry, sync bool)

	drops    dropStats // what Drop removed since the mount (drop.go)
	mu       sync.Mutex
	queue    []ScrubRequest
	running  bool
	finished int64
	cur      *scrubRun
	last     *scrubRun
	lim      *rate.Limiter
}

type scrubRun struct {
	kind                                            ScrubKind
	started                                         time.Time
	took                                            time.Duration
	checked, changed, added, removed, dropped, errs atomic.Int64
	errMu                                           sync.Mutex
	lastErr                                         string
	guard                                           *dropGuard
	heldOnce                                        sync.Once
	// missing: entries a listing of their directory no longer had. A
	// refresh removes them once it has added what is new (removeMissing),
	// so that a directory renamed on the source is never, for the
	// length of the run, a dataset with none of its files.
	missingMu sync.Mutex
	missing   []*catalog.Entry
}

// removeLater records e for removal at the end of the run.
func (r *scrubRun) removeLater(e *catalog.Entry) {
	r.missingMu.Lock()
	r.missing = append(r.missing, e)
	r.missingMu.Unlock()
}

// removeMissing removes the entries the run found missing (removeLater),
// after its additions.
func (p *Scrubber) removeMissing(run *scrubRun) {
	run.missingMu.Lock()
	missing := run.missing
	run.missing = nil
	run.missingMu.Unlock()
	// A directory's missing entries are removed together
	// (catalog.RemoveAll: one copy of its children).
	byDir := map[string][]*catalog.Entry{}
	var dirs []string
	for _, e := range missing {
		d := path.Dir(e.Path())
		if byDir[d] == nil {
			dirs = append(dirs, d)
		}
		byDir[d] = append(byDir[d], e)
	}
	for _, d := range dirs {
		if p.ctx.Err() != nil {
			return // unmounting: the next mount's refresh removes them
		}
		es := byDir[d]
		dir := p.cat.ParentOf(es[0].Path())
		if dir == nil {
			continue // (under a directory removed before them)
		}
		files, err := p.val.dropEntries(dir, es, run.guard)
		run.removed.Add(files)
		if err != nil {
			run.heldOnce.Do(func() { run.fail(err) })
		}
	}
}

// remove drops e (a file or a directory with all under it) within the
// run's budget, counting what it removed or held.
func (p *Scrubber) remove(e *catalog.Entry, run *scrubRun, cause error) bool {
	files := countFiles(e)
	if err := p.val.dropEntry(e, run.guard, cause); err != nil {
		run.heldOnce.Do(func() { run.fail(err) })
		return false
	}
	run.removed.Add(files)
	return true
}

func (r *scrubRun) fail(err error) {
	r.errs.Add(1)
	r.errMu.Lock()
	r.lastErr = strings.ReplaceAll(err.Error(), "\n", " ")
	r.errMu.Unlock()
}

// Request queues a scrub; it runs in the background (Status follows it). Paths are cleaned; for a verify each must name a dataset entry.
// NewSourceMount is told that the source is another mount than the one
// the catalog was checked against (source.Options.OnNewMount): its
// files may differ. Every file is checked again at its next open (with
// validate = "once" or "open"), and a refresh of the whole dataset learns what
// the new mount holds (dropping copies of changed files, within MaxDrop).
func (s *Scrubber) NewSourceMount() {
	p := s
	p.cat.Root().Files(func(e *catalog.Entry) bool {
		e.Residency().SetValidated(false)
		e.SetChecked(0)
		return true
	})
	if err := s.Request(ScrubRequest{Kind: ScrubRefresh}); err != nil {
		p.log.Warn("cannot queue the refresh of the source mounted again", zap.Error(err))
	}
}

// Scrubber is the placer's refresh and verify.
func (p *Placer) Scrubber() *Scrubber { return p.scrub }

func (s *Scrubber) Request(req ScrubRequest) error {
	p := s
	for i, raw := range req.Paths {
		rel := strings.Trim(path.Clean("/"+raw), "/")
		if req.Kind != ScrubRefresh && p.cat.Find(rel) == nil {
			return fmt.Errorf("%w: %q", ErrNoEntry, raw)
		}
		req.Paths[i] = rel
	}
	if p.ctx.Err() != nil {
		return ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, req)
	if !s.running {
		s.running = true
		p.wg.Add(1)
		go p.runScrubs()
	}
	return nil
}

// Status reports the scrub running now, or the last one.
func (s *Scrubber) Status() ScrubProgress {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := ScrubProgress{Running: s.cur != nil, Pending: len(s.queue), Finished: s.finished}
	r := s.cur
	if r == nil {
		r = s.last
	}
	if r == nil {
		return pr
	}
	pr.Kind, pr.Started, pr.Took = r.kind, r.started, r.took
	pr.Checked, pr.Changed, pr.Added = r.checked.Load(), r.changed.Load(), r.added.Load()
	pr.Removed, pr.Dropped, pr.Errors = r.removed.Load(), r.dropped.Load(), r.errs.Load()
	if r.guard != nil {
		pr.Held = r.guard.held.Load()
	}
	r.errMu.Lock()
	pr.LastErr = r.lastErr
	r.errMu.Unlock()
	return pr
}

func (p *Scrubber) runScrubs() {
	defer p.wg.Done()
	// A scrub works on the whole tree (and a refresh numbers what it
	// adds after it): none runs before the walk has ended.
	select {
	case <-p.cp.ready:
	case <-p.ctx.Done():
	}
	s := p
	for {
		s.mu.Lock()
		if len(s.queue) == 0 || p.ctx.Err() != nil {
			s.running = false
			s.queue = nil
			s.mu.Unlock()
			return
		}
		req := s.queue[0]
		s.queue = s.queue[1:]
		if s.lim == nil {
			burst := max(int(p.o.RefreshRate/10), 1)
			s.lim = rate.NewLimiter(rate.Limit(p.o.RefreshRate), burst)
		}
		run := &scrubRun{kind: req.Kind, started: time.Now(), guard: p.val.newDropGuard(req.AllowDrop)}
		s.cur = run
		s.mu.Unlock()

		p.scrubOne(req, run)
		// What the pass changed is reported only once the catalog has
		// it: a crash of the daemon after "removed 1" must not list the
		// file again, nor lose the files it added.
		if err := p.cat.Sync(p.ctx); err != nil && p.ctx.Err() == nil {
			run.errs.Add(1)
			p.log.Error(req.Kind.String()+": its changes are not all in the catalog on disk yet", zap.Error(err))
		}
		took := time.Since(run.started)
		p.log.Info(req.Kind.String()+" finished", zap.Int("paths", len(req.Paths)), zap.Duration("took", took),
			zap.Int64("checked", run.checked.Load()), zap.Int64("changed", run.changed.Load()),
			zap.Int64("added", run.added.Load()), zap.Int64("removed", run.removed.Load()),
			zap.Int64("dropped", run.dropped.Load()), zap.Int64("held", run.guard.held.Load()), zap.Int64("errors", run.errs.Load()))
		switch {
		case run.guard.held.Load() > 0:
			// The source lacks too much: the opens remove nothing
			// either until a refresh that may.
			p.val.opensGuard.Store(&dropGuard{})
		case req.Kind == ScrubRefresh:
			p.val.opensGuard.Store(nil) // the opens' budget starts again
		}

		s.mu.Lock()
		run.took = took
		s.cur, s.last = nil, run
		s.finished++
		s.mu.Unlock()
	}
}

// scrubWorkers is how many directories or files a scrub works on at once.
const scrubWorkers = 8

func (p *Scrubber) scrubOne(req ScrubRequest, run *scrubRun) {
	paths := req.Paths
	if len(paths) == 0 {
		paths = []string{""}
	}
	pool := newPool(p.ctx, scrubWorkers)
	if req.Kind == ScrubRevalidate {
		p.cat.Root().Files(func(f *catalog.Entry) bool {
			if !f.Residency().Recheck() {
				return true
			}
			return pool.do(func() {
				if f.Residency().Recheck() { // an open's check may have come first
					p.refreshLeaf(f, run)
				}
			})
		})
		pool.wait()
		return
	}
	for _, rel := range paths {
		if req.Kind == ScrubRefresh {
			p.refreshPath(pool, rel, run)
			continue
		}
		e := p.cat.Find(rel)
		if e == nil {
			continue // removed meanwhile
		}
		e.Files(func(f *catalog.Entry) bool {
			if f.Tier() < 0 {
				return true
			}
			return pool.do(func() { p.verifyFile(f, req.Kind == ScrubVerifyContent, run) })
		})
	}
	pool.wait()
	p.removeMissing(run)
}

// scrubWait waits for the scrub's rate limit.
func (p *Scrubber) scrubWait() error { return p.lim.Wait(p.ctx) }

// refreshPath refreshes one dataset path: a directory with everything
// under it, a file, or a path the catalog does not know (added on the
// source: its missing parents are refreshed one level at a time).
func (p *Scrubber) refreshPath(pool *pool, rel string, run *scrubRun) {
	e := p.cat.Find(rel)
	if e == nil {
		cur := p.cat.Root()
		for _, name := range strings.Split(rel, "/") {
			next := cur.Lookup(name)
			if next == nil && cur.Kind() == catalog.KindDir {
				p.refreshDir(cur, run) // one level: adds what is new
				next = cur.Lookup(name)
			}
			if next == nil {
				run.fail(fmt.Errorf("refresh %s: %w", rel, ErrNoEntry))
				return
			}
			cur = next
		}
		e = cur
		if e.Kind() != catalog.KindDir {
			return // just added: nothing more to check
		}
	}
	if e.Kind() == catalog.KindDir {
		catalog.Descend(p.ctx, e, scrubWorkers, func(d *catalog.Entry) []*catalog.Entry { return p.refreshDir(d, run) })
		return
	}
	pool.do(func() { p.refreshLeaf(e, run) })
}

// refreshLeaf revalidates a file or a symlink on its own.
func (p *Scrubber) refreshLeaf(e *catalog.Entry, run *scrubRun) {
	if p.scrubWait() != nil {
		return
	}
	fi, err := p.src.Stat(p.ctx, e.Path())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		run.fail(err)
		return
	}
	if err == nil && kindOf(fi) == e.Kind() {
		p.refreshSame(e, fi, run)
		return
	}
	if err == nil {
		// Replaced by something else: no outage, not guarded.
		run.removed.Add(countFiles(e))
		p.val.removeEntry(e)
	} else if !p.remove(e, run, err) {
		return
	}
	if d := p.cat.ParentOf(e.Path()); err == nil && d != nil { // replaced by something else: add that
		p.refreshDir(d, run)
	}
}

// refreshSame updates an entry whose source is still of the same kind.
func (p *Scrubber) refreshSame(e *catalog.Entry, fi os.FileInfo, run *scrubRun) {
	switch e.Kind() {
	case catalog.KindFile:
		run.checked.Add(1)
		p.val.checkedNow(e)
		resident := e.Tier() >= 0
		if p.val.setAttr(e, catalog.AttrFromInfo(fi), false) {
			run.changed.Add(1)
			if resident {
				run.dropped.Add(1) // setAttr dropped the stale copy
			}
			p.enqueueIfWarm(e)
		}
	case catalog.KindDir:
		p.val.setAttr(e, catalog.AttrFromInfo(fi), false)
	case catalog.KindSymlink:
		if p.scrubWait() != nil {
			return
		}
		target, err := p.src.Readlink(p.ctx, e.Path())
		if err != nil {
			run.fail(err)
			return
		}
		if target != e.Target() {
			p.val.removeEntry(e) // replaced at once: nothing leaves the dataset
			p.addEntry(catalog.NewEntry(e.Path(), fi, target), run)
			return
		}
		p.val.setAttr(e, catalog.AttrFromInfo(fi), false)
	}
}

// refreshDir compares directory d with the source, one level: removes
// what the source no longer has, adds what is new, updates the rest. It
// returns d's subdirectories, for a refresh that goes on below d
// (catalog.Descend).
func (p *Scrubber) refreshDir(d *catalog.Entry, run *scrubRun) (subdirs []*catalog.Entry) {
	if p.scrubWait() != nil {
		return nil
	}
	des, err := p.src.ReadDir(p.ctx, d.Path())
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && d.Path() != "" {
			p.remove(d, run, err)
			return nil
		}
		run.fail(err)
		return nil
	}
	seen := make(map[string]bool, len(des))
	for _, de := range des {
		seen[de.Name()] = true
	}
	for c := range d.Children().All() {
		if !seen[c.Name()] {
			run.removeLater(c)
		}
	}
	// What is new joins the directory in batches (catalog.AddAll): one
	// copy of its children a batch, not one a file. A batch waits at most
	// addWait (and an entry that replaced one of another kind not at all).
	var batch []*catalog.Entry
	var since time.Time
	flush := func() {
		for _, n := range p.addEntries(d, batch, run) {
			if n.Kind() == catalog.KindDir {
				subdirs = append(subdirs, n)
			}
		}
		batch = batch[:0]
	}
	defer flush()
	for _, de := range des {
		if len(batch) > 0 && time.Since(since) >= addWait {
			flush()
		}
		if p.ctx.Err() != nil || p.scrubWait() != nil {
			return subdirs
		}
		rel := catalog.ChildPath(d.Path(), de.Name())
		fi, err := p.src.Stat(p.ctx, rel)
		c := d.Lookup(de.Name())
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				run.fail(err)
			} else if c != nil {
				p.remove(c, run, err)
			}
			continue
		}
		k := kindOf(fi)
		replaced := c != nil && c.Kind() != k
		if replaced {
			// Replaced by something else: no outage, not guarded.
			run.removed.Add(countFiles(c))
			p.val.removeEntry(c)
			c = nil
		}
		if c == nil {
			if k == 0 {
				continue // a special file: not part of the dataset
			}
			var target string
			if k == catalog.KindSymlink {
				if target, err = p.src.Readlink(p.ctx, rel); err != nil {
					run.fail(err)
					continue
				}
			}
			if n := catalog.NewEntry(rel, fi, target); n != nil {
				if len(batch) == 0 {
					since = time.Now()
				}
				batch = append(batch, n)
			}
			if replaced || len(batch) >= addBatch {
				flush()
			}
			continue
		}
		p.refreshSame(c, fi, run)
		if c.Kind() == catalog.KindDir {
			subdirs = append(subdirs, c)
		}
	}
	return subdirs
}

// enqueueIfWarm queues a new or changed file when the whole dataset was
// asked to be warmed up.
func (p *Scrubber) enqueueIfWarm(e *catalog.Entry) {
	all := p.warmups.wholeDataset()
	if all {
		p.cp.enqueue(e)
	}
}

func kindOf(fi os.FileInfo) catalog.Kind {
	switch m := fi.Mode(); {
	case m.IsRegular():
		return catalog.KindFile
	case m.IsDir():
		return catalog.KindDir
	case m&fs.ModeSymlink != 0:
		return catalog.KindSymlink
	}
	return 0
}

func countFiles(e *catalog.Entry) int64 {
	var n int64
	e.Files(func(*catalog.Entry) bool { n++; return true })
	return n
}
