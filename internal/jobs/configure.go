package jobs

import (
	"errors"
	"fmt"
	"slices"

	"github.com/epochfs/epochfs/internal/sampler"
)

// Configuring a job: a config document, parsed (config.go), checked and
// applied; the job starts over.

// Configure replaces a job's config with the config document doc (keys not
// given take DefaultConfig's values). The job starts over at epoch 1, its
// ranks included. A bad config changes nothing.
func (m *Manager) Configure(ref Ref, doc []byte) error {
	cfg, err := ParseConfig(doc)
	if err != nil {
		return err
	}
	return m.configure(ref, cfg)
}

// SetConfig is Configure of a parsed config (ConfigParser.Config).
func (m *Manager) SetConfig(ref Ref, cfg Config) error { return m.configure(ref, cfg) }

// CheckSubset reports whether a subset prefix (ConfigParser.Line's)
// names a file the job's owner may open: the error Configure would give
// for it, the same whether it names nothing or only hidden files. It
// returns how many such files it names.
func (m *Manager) CheckSubset(ref Ref, prefix string) (int, error) {
	j, err := m.jobOf(ref)
	if err != nil {
		return 0, err
	}
	if prefix != subsetAll {
		if err := m.attrsRead(); err != nil {
			return 0, err
		}
	}
	idx, err := m.resolve([]string{prefix}, j.owner)
	return len(idx), err
}

// CheckConfig makes the checks of Configure that need no resolving of the
// subset and no registering: what a config document is checked against
// after each write, before it is applied at its close. files is at least
// the number of files its subset names (CheckSubset's counts added up; -1
// without subset lines).
func (m *Manager) CheckConfig(ref Ref, cfg Config, files int) error {
	j, err := m.jobOf(ref)
	if err != nil {
		return err
	}
	if cfg.Cluster && m.o.Cluster == nil {
		return fmt.Errorf("%w: cluster=true: the mount has no [cluster] section", ErrInvalid)
	}
	if files < 0 && cfg.DropLast {
		// Every file the owner may open, counted at most once per key
		// line of the document (only subset lines repeat, and they
		// give files).
		files = m.fileList().Len()
		if !j.owner.Root() {
			files = len(m.p.Catalog().FilesAs(j.owner))
		}
	}
	if cfg.DropLast && files < cfg.WorldSize {
		return fmt.Errorf("%w: drop_last=true with world_size=%d over a subset of %d files: every rank would get none",
			ErrInvalid, cfg.WorldSize, files)
	}
	if m.vs != nil {
		return m.vs.Check(cfg.spec())
	}
	return nil
}

// configure is Configure of a parsed config.
func (m *Manager) configure(ref Ref, cfg Config) error {
	name := ref.Name
	if len(cfg.Subset) > 0 && !slices.Equal(cfg.Subset, []string{subsetAll}) {
		if err := m.attrsRead(); err != nil {
			return err
		}
	}
	// The subset is resolved over every file refreshes added so far, and
	// none joins the dataset until the job is registered with it (grow).
	m.grow()
	m.growMu.Lock()
	defer m.growMu.Unlock()
	j, err := m.jobOf(ref)
	if err != nil {
		return err
	}
	sc, err := m.samplerConfig(name, cfg, j.owner)
	if err != nil {
		return err
	}
	var k *claimer
	if cfg.Cluster {
		if m.o.Cluster == nil {
			return fmt.Errorf("%w: cluster=true: the mount has no [cluster] section", ErrInvalid)
		}
		size := m.fileList().Len()
		if sc.Subset != nil {
			size = len(sc.Subset)
		}
		// This node leaves the job's old run first: rejoining with a
		// new config while still a member would be refused.
		m.mu.Lock()
		old := j.cl
		j.cl = nil
		m.mu.Unlock()
		if old != nil {
			old.leave()
		}
		if k, err = m.newClaimer(name, cfg, size); err != nil {
			return err
		}
		sc.Claimer = k
	}
	m.mu.Lock()
	prev := j.vw
	if prev != nil {
		sc.Views = m.vs.Active(prev)
	}
	m.mu.Unlock()
	jv, err := m.attachView(cfg, prev)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.movedLocked()
	m.syncLocked()
	if m.jobs[name] != j || j.vw != prev {
		jv.Release()
		m.leaveLater(k)
		return fmt.Errorf("%w: %q", ErrNoJob, name)
	}
	if err := m.s.EndJob(j.key); err != nil && !errors.Is(err, sampler.ErrNoJob) && !errors.Is(err, sampler.ErrLeaseExpired) {
		return wrap(err)
	}
	if err := m.s.RegisterJob(j.key, sc); err != nil {
		// The old job is gone; keep the name registered with its old
		// config so that the directory stays consistent (a cluster
		// job's old config without the cluster: this node left it).
		old, oerr := m.samplerConfig(name, j.cfg, j.owner)
		if oerr != nil || m.s.RegisterJob(j.key, old) != nil {
			delete(m.jobs, name)
			m.dropViewLocked(j)
		} else if prev != nil && m.vs.Active(prev) {
			m.s.SetViews(j.key, true)
		}
		j.cfg.Cluster = false
		m.leaveLater(j.cl)
		j.cl = nil
		m.leaveLater(k)
		jv.Release()
		return wrap(err)
	}
	m.leaveLater(j.cl)
	j.cl = k
	j.cfg = cfg
	j.resumed = nil // the job starts over
	if jv != nil {
		m.installViewLocked(j, jv)
	}
	m.wakeUp()
	return nil
}
