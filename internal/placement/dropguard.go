package placement

// The mass-deletion guard. A source that answers "no such file" for much
// of the dataset at once is far more often a source in trouble (a half
// restored project directory, a PFS mounted from the wrong server, a sync
// in progress) than a dataset an admin meant to shrink, and what the
// catalog drops is copied again, at the PFS's cost, when it comes back. So
// one refresh or verify never removes more than Options.MaxDrop of the
// catalog's files, and the opens' validations together never remove more
// than that between two refreshes (nothing at all after a pass that held
// files back, until a refresh that may): past it the entries stay (their copies
// too), the pass says why in its errors and the log, and an open of such a
// file serves its copy if it has one (as during an outage of the source)
// and otherwise fails with EIO (ErrDropHeld), not ENOENT. A refresh asked
// with AllowDrop (`epochfs refresh --allow-drop`) removes what it finds
// gone, whatever the count, and resets the opens' budget.

import (
	"cmp"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/source"
)

// DefaultMaxDrop is the share of the catalog's files one pass may remove.
const DefaultMaxDrop = 0.10

// ErrDropHeld: the source no longer has the file, but removing it would
// take the pass past Options.MaxDrop; the entry is kept.
var ErrDropHeld = errors.New("placement: the source no longer has this file, but more than placement.max_drop of the dataset is gone at once; kept until `epochfs refresh --allow-drop`")

// dropGuard is one pass's removal budget.
type dropGuard struct {
	allow bool  // remove whatever the count (--allow-drop)
	limit int64 // files the pass may remove
	used  atomic.Int64
	held  atomic.Int64 // files kept because of the limit
	once  sync.Once
}

// newDropGuard is a pass's budget: the share max of the catalog's files
// (at least one file: removing one file is never a mass deletion).
func (p *validator) newDropGuard(allow bool) *dropGuard {
	return &dropGuard{allow: allow, limit: max(1, int64(p.o.MaxDrop*float64(p.cat.Files())))}
}

// take reserves n files of the budget; false: they must be kept.
func (g *dropGuard) take(n int64) bool {
	if g.allow || n == 0 {
		g.used.Add(n)
		return true
	}
	for {
		u := g.used.Load()
		if u+n > g.limit {
			g.held.Add(n)
			return false
		}
		if g.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// dropEntry removes e, which the source answered cause about (a "no such
// file"), under g's budget: ErrDropHeld when it must stay (the first time a
// pass's guard refuses, it says so in the log). Something else at e's path
// (a symlink on the way, a FIFO or a device: source.ErrNotRegular) is no
// sign of an outage and is not guarded.
func (p *validator) dropEntry(e *catalog.Entry, g *dropGuard, cause error) error {
	if errors.Is(cause, source.ErrNotRegular) || errors.Is(cause, source.ErrSymlinkInPath) {
		p.removeEntry(e)
		return nil
	}
	if err := p.takeDrop(e, g); err != nil {
		return err
	}
	p.removeEntry(e)
	return nil
}

// dropEntries is dropEntry for entries of the directory dir that its
// listing no longer has, removed together (removeEntries). Those g's
// budget does not cover stay, and the error names the first. It returns
// the files removed.
func (p *validator) dropEntries(dir *catalog.Entry, es []*catalog.Entry, g *dropGuard) (int64, error) {
	var drop []*catalog.Entry
	var held error
	for _, e := range es {
		if err := p.takeDrop(e, g); err != nil {
			held = cmp.Or(held, err)
			continue
		}
		drop = append(drop, e)
	}
	if len(drop) == 0 {
		return 0, held
	}
	return p.removeEntries(dir, drop), held
}

// takeDrop takes e's files from g's budget, or says that e must stay:
// ErrDropHeld (the first time a pass's guard refuses, it says so in the
// log).
func (p *validator) takeDrop(e *catalog.Entry, g *dropGuard) error {
	n := countFiles(e)
	if g.take(n) {
		return nil
	}
	p.dropsHeld.Add(n)
	g.once.Do(func() {
		p.log.Error("the source no longer has more than placement.max_drop of the dataset's files; keeping them (check the source, then `epochfs refresh --allow-drop`)",
			zap.String("path", e.Path()), zap.Int64("limit", g.limit), zap.Float64("max_drop", p.o.MaxDrop))
	})
	return fmt.Errorf("%w: %s (%d files)", ErrDropHeld, e.Path(), n)
}

// openGuard is the opens' validations' budget, renewed by each refresh
// that finishes.
func (p *validator) openGuard() *dropGuard {
	if g := p.opensGuard.Load(); g != nil {
		return g
	}
	p.opensGuard.CompareAndSwap(nil, p.newDropGuard(false))
	return p.opensGuard.Load()
}

// heldDrops is how many files the guard kept since the mount.
func (p *validator) heldDrops() int64 { return p.dropsHeld.Load() }

// removeEntry drops e (a file or a directory with everything under it)
// from the dataset: tier copies, records, the tree. It logs once.
func (p *validator) removeEntry(e *catalog.Entry) {
	p.refreshMu.Lock()
	files, ok := p.cat.Remove(e)
	p.dropRemoved(files)
	p.refreshMu.Unlock()
	if !ok {
		return // removed already
	}
	p.removed.Add(int64(len(files)))
	p.log.Info("gone from the source; removed from the dataset", zap.String("path", e.Path()), zap.Int("files", len(files)))
	p.notify(EntryRemoved, e, false)
}

// removeEntries is removeEntry for entries of the directory dir, removed
// from the tree together (catalog.RemoveAll). It returns the files
// removed.
func (p *validator) removeEntries(dir *catalog.Entry, es []*catalog.Entry) int64 {
	p.refreshMu.Lock()
	files, removed := p.cat.RemoveAll(dir, es)
	p.dropRemoved(files)
	p.refreshMu.Unlock()
	p.removed.Add(int64(len(files)))
	const msg = "gone from the source; removed from the dataset"
	level := zap.DebugLevel // the batch has its line (logBatch)
	if len(removed) == 1 {
		level = zap.InfoLevel
	}
	for _, e := range removed {
		if ce := p.log.Check(level, msg); ce != nil {
			ce.Write(zap.String("path", e.Path()), zap.Int64("files", countFiles(e)))
		}
		p.notify(EntryRemoved, e, false)
	}
	if len(removed) > 1 {
		logBatch(p.log, msg, dir, removed, len(files))
	}
	return int64(len(files))
}

// dropRemoved drops what the placer knows of files removed from the
// tree, and their tier copies. Called with refreshMu held.
func (p *validator) dropRemoved(files []*catalog.Entry) {
	for _, f := range files {
		if f.Residency().SetRecheck(false) {
			p.rechecks.Add(-1)
		}
		if i := f.Tier(); i >= 0 {
			f.SetTier(-1)
			p.forgetResident(f)
			p.o.dropped(f, f.Attr())
			if err := p.removeCopy(i, f.Path(), f.Attr().Size); err != nil {
				p.log.Warn("drop copy of a removed file", zap.String("path", f.Path()), zap.Error(err))
			}
		}
	}
}
