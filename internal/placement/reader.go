package placement

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/source"
	"go.uber.org/zap"
)

// Reader is one open dataset file. It reads the installed tier copy when
// the file is resident, the copy in flight while it is being placed, and
// the source otherwise or when a tier fails. Every byte it returns belongs
// to the version of the file its open saw (attr): a source that changed
// since gives an error, never a mix of versions.
type Reader struct {
	p    *opener
	e    *catalog.Entry
	attr catalog.Attr // the version the open saw (the size the kernel was given)

	res     *Resident    // installed copy the reader holds, or nil
	tierFD  atomic.Int32 // res's descriptor once the reader used it, or -1
	tierIdx int
	fl      *flight     // copy in flight, attached at Open
	bent    *bufEntry   // shared buffer entry, attached at Open
	changed bool        // Open found the source changed
	chain   [3]link     // where reads come from, in order (readchain.go)
	tierBad atomic.Bool // a read of res failed: later reads skip it

	mu     sync.Mutex // guards src, usesFD, rem and the fallback switches
	src    *source.File
	usesFD bool // tierFD is res's descriptor, used until Close
	// rem is the remote's stored copy, asked for at the first read that
	// would go to the source (remAsked), dropped after an error.
	rem      RemoteFile
	remAsked bool
	// may (SetOpener) says whether the reader's opener may read under
	// attributes the source has now.
	may func(catalog.Attr) bool
}

// SetOpener tells the reader who opened it, before its first read: may
// says whether that opener may read under given attributes. A change of
// the file's owner or mode found when the reader first opens the source
// then refuses only an opener the new attributes shut out: access is
// checked at open, as a file system checks it, and an opener they still
// let in (root, the owner) keeps reading its handle. Without it every
// such change is refused.
func (r *Reader) SetOpener(may func(catalog.Attr) bool) { r.may = may }

// Open opens e for reading. It validates e against the source when the
// mode asks for it (validate.go); a resident file is then opened on its
// tier copy; otherwise a whole-file copy starts (or is joined) and the
// reader follows it.
func (p *opener) Open(ctx context.Context, e *catalog.Entry) (r *Reader, err error) {
	defer func() {
		if err == nil {
			r.chainUp()
		}
	}()
	if obs := p.o.ObserveOpen; obs != nil {
		start := time.Now()
		defer func() {
			if err == nil {
				obs(r.res != nil, time.Since(start))
			}
		}()
	}
	if e.Kind() != catalog.KindFile {
		return nil, ErrNotFile
	}
	if p.ctx.Err() != nil {
		return nil, ErrClosed
	}
	if e.Gone() {
		return nil, fmt.Errorf("%w: %s", ErrVanished, e.Path())
	}
	p.cp.noteOpen(ctx, e)
	checked := e.Attr() // what the kernel checked the caller against
	changed, sf, c, err := p.val.validate(ctx, e)
	if err != nil {
		return nil, err
	}
	defer p.val.endCheck(e, c) // after attach: the opens waiting join its copy
	if a := e.Attr(); !catalog.SameAccess(checked, a) {
		if sf != nil {
			sf.Close()
		}
		return nil, fmt.Errorf("%w: %s", ErrAccessChanged, e.Path())
	}
	r = &Reader{p: p, e: e, tierIdx: -1, changed: changed, attr: e.Attr()}
	r.tierFD.Store(-1)
	if sf != nil {
		// The validation's open: the reader's source file, unless a copy
		// it starts takes it (attach).
		if a := catalog.AttrFromInfo(sf.Info()); a.Size == r.attr.Size && a.Mtime == r.attr.Mtime && catalog.SameAccess(a, r.attr) {
			sf.Expect(r.attr.Size, r.attr.Mtime)
			r.src = sf
		} else {
			sf.Close() // an update since: readSource opens the version r has
		}
	}
	// From here on the reader holds resources: shutdown closes it if the
	// kernel never releases it.
	p.readers.Store(r, struct{}{})
	if i := e.Tier(); i >= 0 {
		if c := p.openResident(e, i, r.attr); c != nil {
			r.res, r.tierIdx = c, i
			return r, nil
		}
	}
	if p.buffer.attach(r) {
		return r, nil
	}
	p.attach(ctx, r)
	p.cp.noteFill(ctx, e) // after attach: the fill finds this file's copy started
	if i := e.Tier(); r.fl == nil && i >= 0 {
		// Installed since the check above (attach saw it).
		if c := p.openResident(e, i, r.attr); c != nil {
			r.res, r.tierIdx = c, i
		}
	}
	return r, nil
}

// copyLater notes e to be copied once the gate opens (copyAfterWalk); a
// no-op once it has taken the notes, or after a failed load.
func (p *copier) copyLater(e *catalog.Entry) {
	p.walkMu.Lock()
	defer p.walkMu.Unlock()
	if p.readDuringWalk != nil {
		p.readDuringWalk[e] = struct{}{}
	}
}

// walking reports that the placer's gate is not open yet: the tree is not
// whole or its recorded copies are not checked (Placer.afterWalk).
func (p *copier) walking() bool {
	select {
	case <-p.ready:
		return false
	default:
		return true
	}
}

// copyAfterWalk queues, in path order, the files read while the walk ran
// (Placer.afterWalk calls it once the gate is open).
func (p *copier) copyAfterWalk() {
	p.walkMu.Lock()
	files := make([]*catalog.Entry, 0, len(p.readDuringWalk))
	for e := range p.readDuringWalk {
		if !e.Gone() {
			files = append(files, e)
		}
	}
	p.readDuringWalk = nil
	p.walkMu.Unlock()
	if len(files) == 0 {
		return
	}
	slices.SortFunc(files, func(a, b *catalog.Entry) int { return cmp.Compare(a.Index, b.Index) })
	p.queued.Add(int64(len(files)))
	p.feedCounted(files)
}

// remoteSlotWait bounds how long a read waits for a demand copy's slot when
// a remote is configured: copies from the remote are quick, and the source
// is what the remote spares.
const remoteSlotWait = 5 * time.Second

func (p *opener) attach(ctx context.Context, r *Reader) {
	e := r.e
	if e.Residency().NoSpace() || !p.o.keeps(e, r.attr) {
		// No room, or another node's share: the reader reads the
		// remote's copy or the source.
		return
	}
	if p.cp.walking() {
		// Until the placer's gate opens nothing is copied (no record
		// could name the copy before a walked tree is stored, and the
		// recorded copies are not accounted yet): the reader reads the
		// source, and the file is copied once the gate opens (never
		// after a failed load).
		p.cp.copyLater(e)
		return
	}
	if f, ok := p.cp.flights.Load(e); ok {
		// A copy of another version (started before the source changed)
		// is no use to this reader.
		if f.attr == r.attr && f.acquire() {
			r.fl = f
		}
		return
	}
	if !p.cp.demandSlot(ctx) {
		// Too many copies started by reads: read the source and let a
		// worker copy it.
		p.cp.fallbacks.Add(1)
		p.cp.enqueue(e)
		return
	}
	f, started := p.cp.startFlight(e)
	if f == nil {
		<-p.cp.demand
		return
	}
	if started && (f.attr != r.attr || e.Tier() >= 0) {
		// Not to be run: the entry changed since the reader's open, or
		// the copy before this one installed the file after the open
		// looked (it records the residency before it leaves the map).
		p.cp.dropFlight(f)
		f.finish(errResident)
		f.release()
		<-p.cp.demand
		return
	}
	if f.attr != r.attr {
		f.release()
		<-p.cp.demand
		return
	}
	if started {
		// The copy reads through the descriptor the validation opened,
		// the reader through the copy.
		r.mu.Lock()
		f.src, r.src = r.src, nil
		r.mu.Unlock()
		f.acquire() // the copier's reference
		p.cp.queued.Add(1)
		go func() {
			p.cp.run(f)
			p.cp.queued.Add(-1)
			f.release()
			<-p.cp.demand
		}()
	} else {
		<-p.cp.demand
	}
	r.fl = f
}

// demandSlot takes a slot for a copy started by a read. Without a remote
// it never waits: a read that finds every slot taken reads the source.
// With one it waits (up to remoteSlotWait, or ctx): reading the source
// directly would fetch from the PFS a file the remote may hold, which is
// the traffic the remote exists to spare.
func (p *copier) demandSlot(ctx context.Context) bool {
	select {
	case p.demand <- struct{}{}:
		return true
	default:
	}
	if p.o.Remote == nil {
		return false
	}
	t := time.NewTimer(remoteSlotWait)
	defer t.Stop()
	select {
	case p.demand <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	case <-p.ctx.Done():
	}
	return false
}

// openResident returns a held reference on e's copy in tier i, of version
// a: the kept descriptor when there is one (no system call), otherwise the
// file opened (and kept if the budget has room; resident.go). nil means the
// copy cannot be read: it was dropped when it is missing or has the wrong
// size; another error (out of descriptors, a disk error) leaves it.
func (p *opener) openResident(e *catalog.Entry, i int, a catalog.Attr) *Resident {
	if c := p.res.lookup(e, i, a); c != nil {
		return c
	}
	gen := e.Residency().CopyGen()
	fd, size, err := p.o.Tiers[i].OpenFD(e.Path())
	switch {
	case err == nil && size == a.Size:
		return p.res.newResident(e, fd, i, a, gen, false)
	case (err == nil || errors.Is(err, os.ErrNotExist)) && p.cp.walking():
		// Not checked yet (checkCopies drops it then): the source.
		if err == nil {
			syscall.Close(fd)
		}
	case err == nil:
		syscall.Close(fd)
		p.log.Warn("tier copy has the wrong size; dropped", zap.String("path", e.Path()),
			zap.Int64("size", size), zap.Int64("want", a.Size))
		p.dropCopy(e, i)
	case errors.Is(err, os.ErrNotExist):
		p.log.Warn("tier copy missing; dropped", zap.String("path", e.Path()), zap.Error(err))
		p.dropCopy(e, i)
	default:
		// Out of descriptors, a disk error: the copy may be good; the
		// tier's health counts the error. Read the source this time.
		p.log.Warn("tier copy cannot be opened; reading the source", zap.String("path", e.Path()), zap.Error(err))
	}
	return nil
}

// dropCopy forgets an unusable tier copy of e; false when e's copy was not
// in tier i (any more).
func (p *opener) dropCopy(e *catalog.Entry, i int) bool {
	if !e.DropTier(i) {
		return false
	}
	p.forgetResident(e)
	p.o.dropped(e, e.Attr())
	if err := p.o.Tiers[i].Remove(e.Path(), e.Attr().Size); err != nil {
		p.log.Warn("remove tier copy", zap.String("path", e.Path()), zap.Error(err))
	}
	if err := p.cat.Persist(e); err != nil {
		p.log.Warn("catalog update failed", zap.String("path", e.Path()), zap.Error(err))
	}
	return true
}

// Entry is the file being read.
func (r *Reader) Entry() *catalog.Entry { return r.e }

// ResidentFD is the descriptor of the installed tier copy the reader was
// opened on (opened again if the copy did not keep it), or -1. The fs
// layer splices from it; it stays valid until Close.
func (r *Reader) ResidentFD() int {
	fd, err := r.residentFD()
	if err != nil {
		return -1
	}
	return fd
}

// residentFD returns the reader's descriptor of its copy.
func (r *Reader) residentFD() (int, error) {
	if fd := r.tierFD.Load(); fd >= 0 {
		return int(fd), nil
	}
	if r.res == nil {
		return -1, errCopyGone
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if fd := r.tierFD.Load(); fd >= 0 {
		return int(fd), nil
	}
	if r.res == nil { // closed
		return -1, errCopyGone
	}
	fd, err := r.res.useFD(r.p)
	if err != nil {
		return -1, err
	}
	r.usesFD = true
	r.tierFD.Store(int32(fd))
	return fd, nil
}

// Resident is the installed tier copy the reader was opened on, or nil. It
// is shared by every reader of the copy; the fs layer attaches the kernel's
// passthrough registration of its descriptor to it.
func (r *Reader) Resident() *Resident { return r.res }

// TierIndex is the tier the reader was opened on, or -1.
func (r *Reader) TierIndex() int { return r.tierIdx }

// Changed reports that Open found the source file changed; cached pages of
// the file are stale.
func (r *Reader) Changed() bool { return r.changed }

// readRemote reads from the remote's stored copy of the file (RangeRemote),
// looked up once per reader; ok=false sends the read to the source, and
// every later one after an error.
func (r *Reader) readRemote(ctx context.Context, buf []byte, off int64) (int, bool) {
	rr, ok := r.p.o.Remote.(RangeRemote)
	if !ok {
		return 0, false
	}
	r.mu.Lock()
	if !r.remAsked {
		r.remAsked = true
		if rf, ok := rr.Stored(ctx, remoteKey(r.e, r.attr)); ok {
			r.rem = rf
		}
	}
	rf := r.rem
	r.mu.Unlock()
	if rf == nil {
		return 0, false
	}
	if off >= r.attr.Size {
		return 0, true
	}
	n, err := rf.ReadAt(ctx, buf, off)
	if err != nil {
		r.p.log.Debug("stored remote copy unusable; reading the source", zap.String("path", r.e.Path()), zap.Error(err))
		r.mu.Lock()
		r.rem = nil
		r.mu.Unlock()
		return 0, false
	}
	r.p.cp.remoteReads.Add(1)
	return n, true
}

func (r *Reader) readSource(ctx context.Context, buf []byte, off int64) (int, error) {
	r.mu.Lock()
	if r.src == nil {
		sf, err := r.openSource(ctx)
		if err != nil {
			r.mu.Unlock()
			return 0, err
		}
		r.src = sf
	}
	sf := r.src
	r.mu.Unlock()
	// Never past the size the open saw: bytes of a grown file would be
	// cut by the kernel anyway.
	if off >= r.attr.Size {
		return 0, nil
	}
	if left := r.attr.Size - off; int64(len(buf)) > left {
		buf = buf[:left]
	}
	n, err := sf.ReadAt(ctx, buf, off)
	if errors.Is(err, io.EOF) {
		err = nil
		if off+int64(n) < r.attr.Size {
			// Shorter than the open saw: the file changed since.
			err = fmt.Errorf("%w: %s shrank while open", source.ErrChanged, r.e.Path())
		}
	}
	if err != nil {
		return n, fmt.Errorf("placement: read %s: %w", r.e.Path(), err)
	}
	return n, nil
}

// openSource opens the source file and checks it is the version the open
// saw; a changed file is recorded (the next open reads the new version)
// and refused.
func (r *Reader) openSource(ctx context.Context) (*source.File, error) {
	sf, err := r.p.src.Open(ctx, r.e.Path())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if derr := r.p.val.dropEntry(r.e, r.p.val.openGuard(), err); derr != nil {
				return nil, derr
			}
			return nil, fmt.Errorf("%w: %s", ErrVanished, r.e.Path())
		}
		return nil, fmt.Errorf("placement: read %s: %w", r.e.Path(), err)
	}
	// What the open descriptor is (its fstat, taken on the inode it
	// opened): the version the open saw, and the access the kernel
	// checked, or nothing is read.
	if err := r.p.cp.opened(r.e, sf, r.attr); err != nil {
		if !errors.Is(err, ErrAccessChanged) || r.may == nil || !r.may(catalog.AttrFromInfo(sf.Info())) {
			sf.Close()
			return nil, fmt.Errorf("placement: read since it was opened: %w", err)
		}
		// The same version (opened checks that first), and the opener
		// may read it under its new access too.
		sf.Expect(r.attr.Size, r.attr.Mtime)
	}
	return sf, nil
}

// Close releases the reader's files.
func (r *Reader) Close() error {
	if _, live := r.p.readers.LoadAndDelete(r); !live {
		return nil // closed already (by Placer.Close at shutdown)
	}
	var err error
	r.mu.Lock()
	if res := r.res; res != nil {
		if r.usesFD {
			res.unuseFD()
			r.usesFD = false
		}
		r.tierFD.Store(-1)
		r.res = nil
		res.Release()
	}
	r.mu.Unlock()
	if r.fl != nil {
		r.fl.release()
	}
	if r.bent != nil {
		r.p.buffer.buf.Unref(r.bent)
		r.bent = nil
	}
	r.mu.Lock()
	if r.src != nil {
		if cerr := r.src.Close(); err == nil {
			err = cerr
		}
		r.src = nil
	}
	r.mu.Unlock()
	return err
}

// preadFull reads until buf is full or the file ends.
func preadFull(fd int, buf []byte, off int64) (int, error) {
	done := 0
	for done < len(buf) {
		n, err := syscall.Pread(fd, buf[done:], off+int64(done))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return done, err
		}
		if n == 0 {
			break
		}
		done += n
	}
	return done, nil
}

// ReadSample reads sample s (the catalog's file number, Entry.Index) whole
// through the read path, as ReadFile does: the views' engine loads its
// samples with it (preprocess.EngineOptions.Load).
func (p *opener) ReadSample(ctx context.Context, s int) ([]byte, error) {
	e := p.cat.ByIndex(s)
	if e == nil || e.Gone() {
		return nil, fmt.Errorf("placement: sample %d: %w", s, ErrNoEntry)
	}
	return p.ReadFile(ctx, e)
}

// ReadFile reads e whole through the read path (a tier copy, the copy in
// flight, the shared buffer or the source, placing it as any read does).
func (p *opener) ReadFile(ctx context.Context, e *catalog.Entry) ([]byte, error) {
	r, err := p.Open(ctx, e)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	buf := make([]byte, r.Size())
	if err := r.ReadFull(ctx, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// Size is the file's size in the version the open saw.
func (r *Reader) Size() int64 { return r.attr.Size }

// Attr is the version and access of e the reader serves.
func (r *Reader) Attr() catalog.Attr { return r.attr }

// ReadFull reads the whole file into buf, which holds Size() bytes; a file
// that ends early changed since the open.
func (r *Reader) ReadFull(ctx context.Context, buf []byte) error {
	if int64(len(buf)) != r.attr.Size {
		return fmt.Errorf("placement: read %s: a buffer of %d bytes for a file of %d", r.e.Path(), len(buf), r.attr.Size)
	}
	for off := 0; off < len(buf); {
		n, err := r.ReadAt(ctx, buf[off:], int64(off))
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("placement: read %s: %w: ended at %d of %d bytes", r.e.Path(), source.ErrChanged, off, len(buf))
		}
		off += n
	}
	return nil
}
