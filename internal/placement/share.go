package placement

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/epochfs/epochfs/internal/placement/catalog"
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
	if e == nil || e.Kind != catalog.KindFile || e.Gone() {
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
	fd, size, err := p.o.Tiers[i].OpenFD(e.Path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, ErrNotResident
		}
		return nil, err
	}
	f := os.NewFile(uintptr(fd), e.Path)
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
	case e.Residency().NoSpace():
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

// CopyShare queues a background copy of every file this node keeps and
// has no copy of (with a Sharer: its share; without one: every file), in
// the catalog's order, waiting for room in the queue. It returns the files
// queued, or ctx's error when ctx ends first (a newer pass replaces it).
func (p *Placer) CopyShare(ctx context.Context) (int, error) {
	if err := p.cat.WaitWalk(ctx); err != nil {
		return 0, err
	}
	n := 0
	for i := range p.cat.Indexed() {
		e := p.cat.ByIndex(i)
		if e == nil || e.Gone() || !p.cp.wants(e) {
			continue
		}
		p.cp.queued.Add(1)
		if err := p.cp.enqueueCounted(ctx, e); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
