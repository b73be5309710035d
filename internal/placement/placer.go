// Package placement is the placer of epochfs: it copies whole files of the
// catalog (internal/placement/catalog: the source tree and where each file lives)
// into the local tiers in the background, and serves reads from the best
// place that holds a file (the read chain: readchain.go).
//
// A file read from the source starts a "flight": one whole-file copy into
// the fastest tier with room, shared by every reader of that file. Readers
// of a file in flight read what has been copied so far from the temp file
// (so a file crosses the source once, not once for the reader and once for
// the copy), and keep that descriptor once the copy is installed: the fd
// switch of Monarch without reopening. Nothing is evicted: a file that does
// not fit any tier is skipped and counted while smaller files keep being
// placed. Reads never fail because a tier is full, slow or broken: they fall
// back to the source.
//
// Lock order: validator.refreshMu, then Catalog.mu (refresh persists the new
// attributes). flight.mu is never held while another lock is taken. Placer
// holds no lock of its own on the read path: refreshMu is taken only when
// a source file changed.
package placement

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/source"
	"github.com/epochfs/epochfs/internal/tier"
	"github.com/puzpuzpuz/xsync/v3"
	"go.uber.org/zap"
)

// Errors the fs layer maps to errnos.
var (
	// ErrVanished means the source file is gone.
	ErrVanished = errors.New("placement: source file vanished")
	// ErrAccessChanged means the file's owner, group or mode on the source
	// differ from what the kernel checked the open against: the new ones
	// are recorded and the kernel was told; the open or read is refused
	// unless the caller may read the file under them.
	ErrAccessChanged = errors.New("placement: the file's owner or mode changed on the source")
	// ErrNotFile means the entry is not a regular file.
	ErrNotFile = errors.New("placement: not a regular file")
	// ErrClosed means the placer is shutting down.
	ErrClosed = errors.New("placement: closed")
)

// Options configure a Placer.
type Options struct {
	Catalog *catalog.Catalog
	Source  *source.Source
	Tiers   []*tier.Tier // fastest first; same order as the catalog's names
	Workers int          // background copy workers
	// Validate is when an open checks the file's source attributes
	// (validate.go); the zero value is ValidateOnce.
	Validate Validate
	// ValidateWait bounds how long the open of a resident file waits for
	// its validation stat (default 1 s, at most the source's timeout).
	// Past it the copy is served and the stat's answer, when it comes, is
	// applied for the next open.
	ValidateWait time.Duration
	// ValidateTTL is how long a check of a file against the source is
	// trusted across remounts under ValidateOnce (validate.go: trustChecks);
	// 0 trusts no earlier mount's checks.
	ValidateTTL time.Duration
	// RefreshRate bounds the source metadata operations per second of a
	// refresh, a verify or a revalidation (default 1000).
	RefreshRate float64
	// MaxWarmupPerUser bounds the bytes of one user's (not root's) warmup
	// requests not yet resident (warmup_quota.go; 0: no bound).
	MaxWarmupPerUser int64
	// MaxDrop is the share of the catalog's files one pass may remove
	// (dropguard.go; default DefaultMaxDrop, 1: no limit).
	MaxDrop float64
	// FillAfter is how many files of a tree one user opens, with no copy
	// and in no order, before the rest of it is queued (fill.go); 0: never.
	FillAfter int
	// MaxDemandCopies bounds copies started by reads (default 64); beyond
	// it readers read the source directly and the file is queued.
	MaxDemandCopies int
	// QueueSize bounds the background queue (default 4096).
	QueueSize int
	// BufferBytes is the shared RAM buffer's budget (buffer.go); 0 means
	// no buffer.
	BufferBytes int64
	// BufferGrace is how long a released buffer entry is kept at most
	// (default DefaultBufferGrace).
	BufferGrace time.Duration
	// OpenFiles bounds the tier descriptors of resident copies open at
	// once, kept ready for the next open or used by readers (resident.go);
	// 0 means DefaultOpenFiles (after raising the process's descriptor
	// limit where permitted), below 0 none is kept.
	OpenFiles int
	// KeptCopies bounds the resident copies kept ready for the next open,
	// with their descriptor or their kernel registration (resident.go); 0
	// means MaxDefaultKeptCopies, below 0 none is kept.
	KeptCopies int
	Logger     *zap.Logger
	// Remote, if set, is the store shared with other nodes that whole-file
	// copies ask before the source (remote.go).
	Remote Remote
	// ObserveOpen, if set, is called after each successful Open with
	// whether it was opened on a tier copy and how long the open took
	// (validation included): the metrics' resident open latency.
	ObserveOpen func(resident bool, took time.Duration)
}

// Stats are the placer's counters.
type Stats struct {
	Queued          int64 // copies waiting or running now
	Done            int64 // copies installed
	Failed          int64 // copies that failed (source error, tier error)
	SkippedNoSpace  int64 // files that fit no tier
	BytesPlaced     int64
	DemandFallbacks int64 // reads served from the source because no copy could start
	ReadAhead       int64 // copies started ahead of a reader going in path order (sequential.go)
	Fills           int64 // directories filled for a reader in no order (fill.go)
	FillQueued      int64 // files those fills queued
	// RemoteReads counts reads with no local copy to follow served by the
	// remote's stored copy (RangeRemote) instead of the source.
	RemoteReads int64
	// StaleOnError counts opens of resident files served without their
	// validation because the source failed or did not answer.
	StaleOnError int64
	Removed      int64 // files dropped because the source no longer has them

	// The check of recorded copies at mount (verify.go): copies the
	// catalog recorded, and of them those missing from their tier or not a
	// regular file of the recorded size. Lost copies are placed again.
	CopiesCheckedAtMount   int64
	CopiesMissingAtMount   int64
	CopiesWrongSizeAtMount int64
}

// Placer copies files into tiers and opens readers on them.
type Placer struct {
	o    Options
	cat  *catalog.Catalog
	src  *source.Source
	log  *zap.Logger
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
	// roomMu makes room for the share one pass at a time (share.go).
	roomMu sync.Mutex

	closeOnce sync.Once

	scrub    *Scrubber                   // refresh and verify (scrub.go)
	notifyFn atomic.Pointer[func(Event)] // SetNotify

	warmups *Warmups // the users' warmup (warmup.go)
	cp      *copier  // copies into the tiers (flight.go, fill.go, sequential.go)

	val    *validator // checks against the source, changes and removals (validate.go)
	op     *opener    // readers and kept copies (reader.go, readchain.go, resident.go, prewarm.go)
	buffer *Buffer    // the shared buffer's policy (buffer.go)
}

// copier copies files whole into the tiers: the queue and its workers,
// one flight per file however many ask (flight.go), the copies a reader
// starts, the read-ahead of a reader in path order (sequential.go), the
// fill of a tree read in no order (fill.go), and the cluster's copies
// (remote.go).
type copier struct {
	o   *Options
	cat *catalog.Catalog
	src *source.Source
	log *zap.Logger
	ctx context.Context // the placer's: ends at Close
	wg  *sync.WaitGroup // the placer's background work

	flights *xsync.MapOf[*catalog.Entry, *flight]
	// seq reads ahead of a reader going in path order (sequential.go);
	// seqCopies counts the copies it started.
	seq       seqDetector
	seqCopies atomic.Int64
	// fill queues the rest of a tree read in no order (fill.go); fills
	// counts the trees, fillQueued the files it queued.
	fill       filler
	fills      atomic.Int64
	fillQueued atomic.Int64
	// readDuringWalk holds the files read while the catalog's walk ran
	// (nothing is copied then): they are queued once it ends. nil once
	// they were.
	walkMu         sync.Mutex
	readDuringWalk map[*catalog.Entry]struct{}
	queue          chan *catalog.Entry
	demand         chan struct{} // semaphore of demand copies
	bufs           sync.Pool

	// queued counts copies waiting, running, or held and fed by warmup
	// but not yet in the queue: a file moves between those states without
	// the count changing, so Stats never sees it twice or not at all.
	queued, done, failed, nospace, placedBytes, fallbacks atomic.Int64
	remoteReads                                           atomic.Int64
	// shareDue is the bytes of this node's share with no copy yet, with
	// a Sharer (share.go): copies beyond the share take room beyond it.
	// extraDrops counts the copies beyond the share dropped for it.
	shareDue, extraDrops atomic.Int64

	check atomic.Pointer[copyCheck] // set once the copies are checked (checkCopies)
	// ready is closed once the tree is whole and the recorded copies are
	// checked (afterWalk): nothing is copied before, and a bad copy is
	// not dropped (the check accounts and drops them).
	ready chan struct{}
	// failedFiles holds the files whose copy failed for a reason of their
	// own (tier.IsFileError): the next failure of one is logged at debug
	// level, since every open of the file tries again.
	failedFiles *xsync.MapOf[*catalog.Entry, struct{}]

	// What it needs of the placer's other parts, set by New.
	val      *validator
	buffer   *Buffer
	makeRoom func(size int64) bool // share.go
	notify   func(k EventKind, e *catalog.Entry, sync bool)
}

// opener opens readers on files: the read chain (a kept copy, a tier,
// the cluster, the source: readchain.go), the copies a reader waits for
// or starts (through the copier), the kept tier descriptors of resident
// files (resident.go) and their prewarm at mount (prewarm.go).
type opener struct {
	o   *Options
	cat *catalog.Catalog
	src *source.Source
	log *zap.Logger
	ctx context.Context // the placer's: ends at Close

	res     *residentCache                  // kept tier descriptors
	readers *xsync.MapOf[*Reader, struct{}] // open readers, closed at shutdown

	// What it needs of the placer's other parts, set by New.
	cp     *copier
	val    *validator
	buffer *Buffer
}

// New starts a placer: it removes stale copies a rescan found, checks the
// copies the catalog records and accounts those still in their tiers
// (verify.go), starts the workers, and queues the lost copies' files for
// placing again.
func New(o Options) (*Placer, error) {
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.MaxDemandCopies <= 0 {
		o.MaxDemandCopies = 64
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 4096
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.ValidateWait <= 0 {
		o.ValidateWait = time.Second
	}
	if t := o.Source.Timeout(); o.ValidateWait > t {
		o.ValidateWait = t
	}
	if o.RefreshRate <= 0 {
		o.RefreshRate = 1000
	}
	if o.MaxDrop <= 0 {
		o.MaxDrop = DefaultMaxDrop
	}
	o.MaxDrop = min(o.MaxDrop, 1)
	if len(o.Tiers) != len(o.Catalog.TierNames()) {
		return nil, fmt.Errorf("placement: %d tiers but the catalog knows %d", len(o.Tiers), len(o.Catalog.TierNames()))
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Placer{
		o: o, cat: o.Catalog, src: o.Source, log: o.Logger, ctx: ctx, stop: cancel,
	}
	p.op = &opener{o: &p.o, cat: p.cat, src: p.src, log: p.log, ctx: ctx,
		res:     newResidentCache(o.OpenFiles, o.KeptCopies),
		readers: xsync.NewMapOf[*Reader, struct{}](),
	}
	p.cp = &copier{o: &p.o, cat: p.cat, src: p.src, log: p.log, ctx: ctx, wg: &p.wg,
		flights:     xsync.NewMapOf[*catalog.Entry, *flight](),
		failedFiles: xsync.NewMapOf[*catalog.Entry, struct{}](),
		queue:       make(chan *catalog.Entry, o.QueueSize),
		demand:      make(chan struct{}, o.MaxDemandCopies),
		notify:      p.notify,
		ready:       make(chan struct{}),
	}
	p.cp.seq.last.Store(-2)
	p.cp.seq.ahead.Store(-1)
	p.cp.bufs.New = func() any { b := make([]byte, copyChunk); return &b }
	p.buffer = p.newBuffer()
	p.warmups = p.newWarmups()
	p.scrub = &Scrubber{o: &p.o, cat: p.cat, src: p.src, log: p.log, ctx: ctx, wg: &p.wg, notify: p.notify}
	p.val = &validator{o: &p.o, cat: p.cat, src: p.src, log: p.log, ctx: ctx, wg: &p.wg,
		checks: xsync.NewMapOf[*catalog.Entry, *check](), ready: p.cp.ready,
		flights: p.cp.flights, buffer: p.buffer, scrub: p.scrub, notify: p.notify, forgetResident: p.op.forgetResident}
	p.cp.val, p.cp.buffer, p.cp.makeRoom = p.val, p.buffer, p.makeRoomNow
	p.op.cp, p.op.val, p.op.buffer = p.cp, p.val, p.buffer
	p.scrub.cp, p.scrub.val, p.scrub.op, p.scrub.warmups = p.cp, p.val, p.op, p.warmups
	p.cat.SetSync(p.cp.syncTiers)
	select {
	case <-p.cat.WalkDone():
		if p.loadFailed() {
			break
		}
		p.checkRecorded()
	default:
		// A first mount's walk or a remount's load in the background:
		// the files read meanwhile are copied after it, and the copies
		// the records name are checked once they are all known.
		p.cp.readDuringWalk = map[*catalog.Entry]struct{}{}
		p.wg.Add(1)
		go p.afterWalk()
	}
	for i := 0; i < o.Workers; i++ {
		p.wg.Add(1)
		go p.cp.worker()
	}
	return p, nil
}

// checkRecorded removes the copies the catalog found stale, checks the
// copies its records name, queues the lost ones again and opens the
// placer's gate (ready).
func (p *Placer) checkRecorded() {
	for _, s := range p.cat.Stale() {
		for _, t := range p.o.Tiers {
			if t.Name() == s.Tier {
				os.Remove(t.Path(s.Path))
			}
		}
	}
	lost := p.checkCopies()
	p.val.trustChecks()
	p.warmups.queue(lost)
}

// Ready is closed once the tree is whole and the copies the catalog
// records are checked and accounted (the gate WaitReady waits for); it
// stays open after a background load that failed.
func (p *Placer) Ready() <-chan struct{} { return p.cp.ready }

// WaitReady waits until the tree is whole and the copies the catalog
// records are checked and accounted: what a warmup, a refresh or a verify
// works on. It fails with ctx's error, the walk's (ErrWalkStopped), a
// failed load's, or ErrClosed.
func (p *Placer) WaitReady(ctx context.Context) error {
	if err := p.cat.WaitWalk(ctx); err != nil {
		return err
	}
	select {
	case <-p.cp.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-p.ctx.Done():
		return ErrClosed
	}
}

// loadFailed reports (and logs) a background load that failed: the gate
// then stays closed (afterWalk).
func (p *Placer) loadFailed() bool {
	err := p.cat.LoadFailed()
	if err != nil {
		p.log.Error("nothing is copied this mount: the stored catalog could not be loaded", zap.Error(err))
	}
	return err != nil
}

// afterWalk waits for the tree to be whole, checks the recorded copies
// and copies the files read meanwhile. After a load that failed (a
// damaged record) the gate stays closed: the tree is partial and the
// catalog is not written, so a copy could never be recorded; readers
// read the copies already there, or the source.
func (p *Placer) afterWalk() {
	defer p.wg.Done()
	select {
	case <-p.cat.WalkDone():
	case <-p.ctx.Done():
		return
	}
	if p.loadFailed() {
		p.cp.walkMu.Lock()
		p.cp.readDuringWalk = nil // nothing will be copied: note nothing more
		p.cp.walkMu.Unlock()
		return
	}
	p.checkRecorded()
	p.cp.copyAfterWalk()
}

// Close stops the workers, cancels copies in progress (their temp files
// are removed) and waits for them.
func (p *Placer) Close() {
	p.closeOnce.Do(func() {
		p.stop()
		p.wg.Wait()
		p.buffer.close()
		// Copies started by reads are not in wg: taking every demand slot
		// waits for them, and keeps new ones from starting.
		for i := 0; i < cap(p.cp.demand); i++ {
			p.cp.demand <- struct{}{}
		}
		// Handles the kernel never released (an unmount with files open)
		// would keep their descriptors to the end of the process.
		p.op.readers.Range(func(r *Reader, _ struct{}) bool {
			r.Close()
			return true
		})
		p.op.res.close()
	})
}

// SetNotify installs fn to be told of every entry whose attributes change
// (a file's content: its copy is dropped), that is removed from or added to
// the dataset; the fs layer invalidates the kernel's caches with it. fn is
// called with no lock held, from the goroutine that made the change (for
// a change an Open finds, before that Open returns). nil removes it. There
// is one subscriber: installing a second one while one is installed
// panics, so that a wiring mistake is not a silent replacement.
func (p *Placer) SetNotify(fn func(Event)) {
	if fn == nil {
		p.notifyFn.Store(nil)
		return
	}
	if !p.notifyFn.CompareAndSwap(nil, &fn) {
		panic("placement: SetNotify: a subscriber is installed already")
	}
}

// validateMode is the placer's validation mode.
func (p *Placer) validateMode() Validate { return p.o.Validate }

// Open opens a reader on e (reader.go): the opener's.
func (p *Placer) Open(ctx context.Context, e *catalog.Entry) (*Reader, error) {
	return p.op.Open(ctx, e)
}

// ReadSample reads sample s whole (reader.go): the opener's.
func (p *Placer) ReadSample(ctx context.Context, s int) ([]byte, error) {
	return p.op.ReadSample(ctx, s)
}

// ReadFile reads e whole (reader.go): the opener's.
func (p *Placer) ReadFile(ctx context.Context, e *catalog.Entry) ([]byte, error) {
	return p.op.ReadFile(ctx, e)
}

// ResidentStats are the kept copies' counters (resident.go): the opener's.
func (p *Placer) ResidentStats() ResidentStats { return p.op.ResidentStats() }

// Prewarm opens the resident files' kept copies at mount (prewarm.go):
// the opener's.
func (p *Placer) Prewarm(ctx context.Context, want func(tier int) bool, attach func(e *catalog.Entry, c *Resident) error) PrewarmStats {
	return p.op.Prewarm(ctx, want, attach)
}

// Catalog returns the placer's catalog.
func (p *Placer) Catalog() *catalog.Catalog { return p.cat }

// Tiers returns the tiers, fastest first.
func (p *Placer) Tiers() []*tier.Tier { return p.o.Tiers }

// Source returns the source.
func (p *Placer) Source() *source.Source { return p.src }

// Stats returns the counters.
func (p *Placer) Stats() Stats {
	var chk copyCheck
	if c := p.cp.check.Load(); c != nil {
		chk = *c
	}
	return Stats{
		Queued: p.cp.queued.Load(), Done: p.cp.done.Load(), Failed: p.cp.failed.Load(), ReadAhead: p.cp.seqCopies.Load(),
		Fills: p.cp.fills.Load(), FillQueued: p.cp.fillQueued.Load(),
		SkippedNoSpace: p.cp.nospace.Load(), BytesPlaced: p.cp.placedBytes.Load(),
		DemandFallbacks: p.cp.fallbacks.Load(), RemoteReads: p.cp.remoteReads.Load(), StaleOnError: p.val.staleServed.Load(), Removed: p.val.removed.Load(),
		CopiesCheckedAtMount:   chk.checked,
		CopiesMissingAtMount:   chk.missing,
		CopiesWrongSizeAtMount: chk.wrongSize,
	}
}

// enqueue asks for a background copy of e; it never blocks. It reports
// whether e was queued.
func (p *copier) enqueue(e *catalog.Entry) bool {
	if !p.wants(e) {
		return false
	}
	p.queued.Add(1) // before the send: the worker that takes it uncounts it
	select {
	case p.queue <- e:
		return true
	default:
		p.queued.Add(-1)
		return false
	}
}

// enqueueCounted queues e, waiting for room; warmup uses it. e is already
// counted in queued: what is not queued is uncounted here.
func (p *copier) enqueueCounted(ctx context.Context, e *catalog.Entry) error {
	if !p.wants(e) {
		p.queued.Add(-1)
		return nil
	}
	select {
	case p.queue <- e:
		return nil
	case <-ctx.Done():
		p.queued.Add(-1)
		return ctx.Err()
	case <-p.ctx.Done():
		p.queued.Add(-1)
		return ErrClosed
	}
}

// wants reports whether e still needs a copy: a file of this node's
// share, or one beyond it that the room beyond the share takes (share.go).
func (p *copier) wants(e *catalog.Entry) bool {
	if e.Kind() != catalog.KindFile || e.Tier() >= 0 || e.Residency().NoSpace() || !p.placeable(e) {
		return false
	}
	_, busy := p.flights.Load(e)
	return !busy
}

func (p *copier) worker() {
	defer p.wg.Done()
	select {
	case <-p.ready:
	case <-p.ctx.Done():
		return
	}
	for {
		select {
		case <-p.ctx.Done():
			return
		case e := <-p.queue:
			// e stays counted until its copy is over or skipped.
			if !p.wants(e) {
				p.queued.Add(-1)
				continue
			}
			f, started := p.startFlight(e)
			if f != nil && started && !p.yieldToCheck(f) {
				p.run(f)
			}
			p.queued.Add(-1)
			if f != nil {
				f.release()
			}
		}
	}
}

// syncTiers makes every copy installed so far durable (one syncfs per tier
// with new copies); the catalog runs it before each batch it writes.
func (p *copier) syncTiers() error {
	for _, t := range p.o.Tiers {
		if err := t.Sync(); err != nil {
			return fmt.Errorf("placement: %w", err)
		}
	}
	return nil
}
