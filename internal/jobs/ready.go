package jobs

// When jobs can be created: once the catalog's files are numbered (the
// placer's gate, or a walk of names first's numbers), and what waits for
// the files' attributes after that.

import (
	"context"
	"errors"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// ErrAttrsPending means a walk of names first (placement.walk = "names")
// is still reading the files' attributes: what needs them (a subset, a
// resumed state, another user's job) is refused with it unless its caller
// waited (WaitAttrs, WaitReadyAs: the mount's ctl files do).
var ErrAttrsPending = errors.New("jobs: the files' attributes are still being read (status: walk_attrs_pending); " +
	"a subset or a resumed state can be given once status says catalog=ok")

// WaitReady waits until jobs can be created (the placer's gate opened and
// the manager started), or ctx ends.
func (m *Manager) WaitReady(ctx context.Context) error {
	select {
	case <-m.ready:
		return nil
	case <-m.ctx.Done():
		return ErrNotReady
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitReadyAs is WaitReady for a job of who: a user other than root also
// waits for the files' attributes (a walk of names first reads them after
// the jobs start), by which the files who may read are known.
func (m *Manager) WaitReadyAs(ctx context.Context, who *catalog.Cred) error {
	if err := m.WaitReady(ctx); err != nil {
		return err
	}
	if who.Root() {
		return nil
	}
	return m.WaitAttrs(ctx)
}

// WaitAttrs waits until the files' attributes are read (a walk of names
// first reads them after the jobs start), or ctx ends: a subset, another
// user's files and a resumed state's paths are resolved on them.
func (m *Manager) WaitAttrs(ctx context.Context) error {
	if !m.p.Catalog().Walking() {
		return nil
	}
	return m.o.Placer.WaitReady(ctx)
}

// attrsRead fails while a walk of names first reads the files'
// attributes (the jobs start before: catalog.Named): a subset, another
// user's files and a resumed state's paths are resolved on the tree with
// its attributes.
func (m *Manager) attrsRead() error {
	if m.p.Catalog().Walking() {
		return ErrAttrsPending
	}
	return nil
}
