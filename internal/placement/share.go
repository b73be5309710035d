package placement

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"go.uber.org/zap"
)

// A node's share of a dataset split between nodes (Sharer): the copies it
// serves to the others (OpenCopy), the copies they ask it to make
// (FetchNow), and the pass that copies what it keeps (CopyShare).

// Errors of OpenCopy and FetchNow.
var (
	// ErrNotResident: this node has no tier copy of that version.
	ErrNotResident = errors.New("placement: no tier copy of that version here")
	// ErrNoRoom: no tier has room for the file.
	ErrNoRoom = errors.New("placement: no tier has room for the file")
)

// entryOf is the file version k names, or an error matching ErrNoEntry
// when the dataset has no such file or another version of it.
func (p *Placer) entryOf(k RemoteKey) (*catalog.Entry, catalog.Attr, error) {
	e := p.cat.Find(k.Path)
	if e == nil || e.Kind() != catalog.KindFile || e.Gone() {
		return nil, catalog.Attr{}, fmt.Errorf("%w: %q", ErrNoEntry, k.Path)
	}
	a := e.Attr()
	if a.Size != k.Size || a.Mtime != k.Mtime {
		return nil, catalog.Attr{}, fmt.Errorf("%w: %q in another version", ErrNoEntry, k.Path)
	}
	return e, a, nil
}

// OpenCopy opens this node's tier copy of version k for a peer to read:
// ErrNotResident (or ErrNoEntry) when it has none. The copy is the one the
// tier holds now; the peer checks every byte against the file's MACs.
func (p *Placer) OpenCopy(k RemoteKey) (*os.File, error) {
	e, a, err := p.entryOf(k)
	if err != nil {
		return nil, err
	}
	i := e.Tier()
	if i < 0 {
		return nil, ErrNotResident
	}
	fd, size, err := p.o.Tiers[i].OpenFD(e.Path())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, ErrNotResident
		}
		return nil, err
	}
	f := os.NewFile(uintptr(fd), e.Path())
	if size != a.Size || e.Tier() != i || e.Attr() != a {
		// Dropped or replaced while it was opened.
		f.Close()
		return nil, ErrNotResident
	}
	return f, nil
}

// FetchNow copies version k into a tier now, for a peer that needs it:
// nil once the copy runs (or the file is resident); ErrNoRoom when no tier
// has room for it; ErrNoEntry when the dataset has no such version. The
// copy takes a demand slot when one is free and is queued otherwise.
func (p *Placer) FetchNow(k RemoteKey) error {
	e, _, err := p.entryOf(k)
	if err != nil {
		return err
	}
	cp := p.cp
	switch {
	case e.Tier() >= 0:
		return nil
	case e.Residency().NoSpace() || !cp.placeable(e):
		return ErrNoRoom
	}
	if _, busy := cp.flights.Load(e); busy {
		return nil
	}
	select {
	case cp.demand <- struct{}{}:
	default:
		if !cp.enqueue(e) && e.Tier() < 0 {
			if _, busy := cp.flights.Load(e); !busy {
				return fmt.Errorf("placement: the copy queue is full")
			}
		}
		return nil
	}
	f, started := cp.startFlight(e)
	if f == nil || !started {
		if f != nil {
			f.release()
		}
		<-cp.demand
		return nil
	}
	cp.queued.Add(1)
	go func() {
		cp.run(f)
		cp.queued.Add(-1)
		f.release()
		<-cp.demand
	}()
	return nil
}

// A node's tiers keep its own share first, then whatever else fits: copies
// of files other nodes keep (copies beyond the share: the pass below, the
// shared buffer's fetches, the copies peers ask for) take only the room
// beyond the bytes of the share not yet copied (copier.shareDue, counted
// by each pass and lowered as the share's copies install or find no
// room). When the share grows (a node left) and does not fit, the pass
// drops copies beyond the share that another node holds, the last to be
// needed first: nothing is dropped that the cluster holds only here.

// roomBeyondShare is the room the healthy tiers have left beyond the
// share's bytes not yet copied; none while the node takes no share.
func (p *copier) roomBeyondShare() int64 {
	s := p.o.sharer()
	if s == nil || !s.Sharing() {
		return 0
	}
	return p.tierRoom() - max(p.shareDue.Load(), 0)
}

// placeable reports whether a copy of e may go into a tier: a file of
// this node's share, or one beyond it that fits the room beyond it.
func (p *copier) placeable(e *catalog.Entry) bool {
	a := e.Attr()
	return p.o.keeps(e, a) || p.roomBeyondShare() >= max(a.Size, 1)
}

// tierRoom is the room the healthy tiers' quotas have left.
func (p *copier) tierRoom() int64 {
	var room int64
	for _, t := range p.o.Tiers {
		if t.Healthy() {
			room += max(t.Quota()-t.Used()-t.Reserved(), 0)
		}
	}
	return room
}

// ShareStats are the bytes of this node's share not yet copied, as the
// last pass counted them less the copies since (0 without a Sharer), and
// the copies beyond the share dropped to make room for it.
func (p *Placer) ShareStats() (due, dropped int64) {
	return max(p.cp.shareDue.Load(), 0), p.cp.extraDrops.Load()
}

// shareCopied lowers the share's bytes not yet copied by a copy of size
// installed, or refused for want of room.
func (p *copier) shareCopied(size int64) {
	if p.o.sharer() != nil {
		p.shareDue.Add(-size)
	}
}

// CopyShare queues a background copy of every file this node keeps and
// has no copy of (with a Sharer: its share; without one: every file), in
// the catalog's order, waiting for room in the queue; with a Sharer it
// first drops copies beyond the share that another node holds when the
// share does not fit otherwise, and then queues copies beyond the share
// (in the order of Sharer.Rank) while the room beyond it lasts. It returns
// the files of the share queued, or ctx's error when ctx ends first (a
// newer pass replaces it).
func (p *Placer) CopyShare(ctx context.Context) (int, error) {
	if err := p.cat.WaitWalk(ctx); err != nil {
		return 0, err
	}
	select {
	case <-p.cp.ready:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	s := p.o.sharer()
	if s != nil && !s.Sharing() {
		return 0, nil // a pass follows once the nodes agree
	}
	if s != nil {
		var due int64
		for i := range p.cat.Indexed() {
			if e := p.cat.ByIndex(i); e != nil && !e.Gone() && p.shareWants(e) {
				due += e.Attr().Size
			}
		}
		p.cp.shareDue.Store(due)
		if err := p.makeRoom(ctx, s, due); err != nil {
			return 0, err
		}
	}
	n := 0
	for i := range p.cat.Indexed() {
		e := p.cat.ByIndex(i)
		if e == nil || e.Gone() || !p.shareWants(e) || !p.cp.wants(e) {
			continue
		}
		p.cp.queued.Add(1)
		if err := p.cp.enqueueCounted(ctx, e); err != nil {
			return n, err
		}
		n++
	}
	if s != nil {
		if err := p.copyBeyondShare(ctx, s); err != nil {
			return n, err
		}
	}
	return n, nil
}

// shareWants reports whether e is a file of this node's share with no
// copy yet and a chance of one.
func (p *Placer) shareWants(e *catalog.Entry) bool {
	return e.Kind() == catalog.KindFile && e.Tier() < 0 && !e.Residency().NoSpace() && p.o.keeps(e, e.Attr())
}

// ranks calls fn with the files of each rank (Sharer.Rank) from first
// up to the highest, or from the highest down to first with down, while
// fn returns true.
func (p *Placer) ranks(ctx context.Context, s Sharer, first int, down bool, fn func(e *catalog.Entry) bool) error {
	top := -1
	for i := range p.cat.Indexed() {
		if e := p.cat.ByIndex(i); e != nil && e.Kind() == catalog.KindFile {
			top = max(top, s.Rank(remoteKey(e, e.Attr())))
		}
	}
	r, step := first, 1
	if down {
		r, step = top, -1
	}
	for ; r >= first && r <= top; r += step {
		for i := range p.cat.Indexed() {
			if err := ctx.Err(); err != nil {
				return err
			}
			e := p.cat.ByIndex(i)
			if e == nil || e.Gone() || e.Kind() != catalog.KindFile || s.Rank(remoteKey(e, e.Attr())) != r {
				continue
			}
			if !fn(e) {
				return nil
			}
		}
	}
	return nil
}

// makeRoom drops copies beyond the share (the highest rank first) that
// another node holds until the tiers have room for due more bytes.
func (p *Placer) makeRoom(ctx context.Context, s Sharer, due int64) error {
	p.roomMu.Lock()
	defer p.roomMu.Unlock()
	return p.makeRoomLocked(ctx, s, due)
}

func (p *Placer) makeRoomLocked(ctx context.Context, s Sharer, due int64) error {
	need := due - p.cp.tierRoom()
	if need <= 0 {
		return nil
	}
	var dropped, bytes int64
	err := p.ranks(ctx, s, 1, true, func(e *catalog.Entry) bool {
		i, a := e.Tier(), e.Attr()
		if i < 0 || p.o.keeps(e, a) || !s.HeldElsewhere(ctx, remoteKey(e, a)) {
			return true
		}
		if p.op.dropCopy(e, i) {
			dropped++
			bytes += a.Size
			p.cp.extraDrops.Add(1)
		}
		return bytes < need
	})
	if dropped > 0 {
		p.log.Info("dropped copies beyond this node's share to make room for it",
			zap.Int64("files", dropped), zap.Int64("bytes", bytes), zap.Int64("share_due", due))
	}
	return err
}

// roomBatch is the least room makeRoomNow makes (or a sixteenth of the
// tiers' quotas, if less): a node's share grows by many files at once (a
// node died), and each drop is found by a walk of the catalog.
const roomBatch = 64 << 20

// makeRoomNow drops copies beyond the share that another node holds, for
// a copy of size of the share that found every tier full (a file of a
// dead node's share, before the pass after its membership ends); at least
// roomBatch, or the share's bytes not yet copied. It reports whether the
// tiers have room for size now. One at a time: the others wait for it and
// find the room it made.
func (p *Placer) makeRoomNow(size int64) bool {
	s := p.o.sharer()
	if s == nil {
		return false
	}
	p.roomMu.Lock()
	defer p.roomMu.Unlock()
	if p.cp.tierRoom() >= size {
		return true
	}
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	var quota int64
	for _, t := range p.o.Tiers {
		quota += t.Quota()
	}
	p.makeRoomLocked(ctx, s, max(size, min(roomBatch, quota/16), p.cp.shareDue.Load()))
	return p.cp.tierRoom() >= size
}

// copyBeyondShare queues copies of files beyond this node's share that
// another node holds (read from it: the PFS serves each file once, to the
// node that keeps it), in the order of their rank, while the room beyond
// the share lasts.
func (p *Placer) copyBeyondShare(ctx context.Context, s Sharer) error {
	// What is queued counts against the room: the copies run in the
	// queue's order, several at once, and those of the first ranks take
	// the room.
	room := p.cp.roomBeyondShare()
	return p.ranks(ctx, s, 1, false, func(e *catalog.Entry) bool {
		if room <= 0 {
			return false
		}
		a := e.Attr()
		if a.Size > room || !p.cp.wants(e) || !s.HeldElsewhere(ctx, remoteKey(e, a)) {
			return true
		}
		room -= a.Size
		p.cp.queued.Add(1)
		return p.cp.enqueueCounted(ctx, e) == nil
	})
}
