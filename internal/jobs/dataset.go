package jobs

// The dataset as jobs see it: the files numbered for the sampler (grown
// by the files refreshes add), and a job's subset resolved as its owner
// may read it.

import (
	"fmt"
	"strings"

	"github.com/epochfs/epochfs/internal/ctlpath"
	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/sampler"
	"go.uber.org/zap"
)

// fileList is the dataset's files by Index.
func (m *Manager) fileList() *catalog.Numbering { return m.filesp.Load() }

// grow takes in the files refreshes added since the last look (the
// catalog numbers them after every file it had): the sampler grows, and
// each job takes, from its next epoch, the new files its subset names and
// its owner may read (a job over the whole dataset as root: all of them;
// a cluster job: none, its nodes must agree on its subset).
func (m *Manager) grow() {
	if m.p.Catalog().ByIndex(m.fileList().Len()) == nil {
		return // nothing added: the common case, without a lock
	}
	m.growMu.Lock()
	defer m.growMu.Unlock()
	files := m.fileList()
	all := m.p.Catalog().Numbered()
	if all.Len() <= files.Len() {
		return
	}
	add := map[string][]int{}
	m.mu.Lock()
	for _, j := range m.jobs {
		if j.cfg.Cluster || j.cfg.Fixed {
			continue
		}
		for i := files.Len(); i < all.Len(); i++ {
			if e := all.At(i); m.joins(j, e) {
				add[j.key] = append(add[j.key], int(e.Index))
			}
		}
	}
	m.mu.Unlock()
	m.filesp.Store(&all)
	if err := m.s.Grow(all.Len(), add); err != nil {
		m.log.Error("jobs: the files a refresh added cannot join the jobs", zap.Error(err))
		return
	}
	m.log.Info("files a refresh added join the jobs from their next epoch", zap.Int("files", all.Len()-files.Len()))
}

// joins reports whether a file a refresh added belongs to job j's subset:
// under one of its subset's paths (any, without one) and readable by its
// owner as the whole path is.
func (m *Manager) joins(j *job, e *catalog.Entry) bool {
	if e.Gone() || e.Kind() != catalog.KindFile {
		return false
	}
	if !underSubset(e.Path(), j.cfg.Subset) {
		return false
	}
	if j.owner.Root() {
		return true
	}
	files, err := m.p.Catalog().ResolvePathsAs(j.owner, []string{e.Path()})
	return err == nil && len(files) == 1 && files[0] == e
}

// underSubset reports whether a dataset path lies under one of a job's
// subset paths (Config.Subset; none, or subset=all: the whole dataset),
// component by component.
func underSubset(p string, subset []string) bool {
	if len(subset) == 0 {
		return true
	}
	for _, pre := range subset {
		if pre == subsetAll || p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

// samplerConfig is cfg for the sampler, its subset resolved as who sees
// the dataset.
func (m *Manager) samplerConfig(name string, cfg Config, who *catalog.Cred) (sampler.JobConfig, error) {
	subset, err := m.resolve(cfg.Subset, who)
	if err != nil {
		return sampler.JobConfig{}, err
	}
	size := m.fileList().Len()
	if subset != nil {
		size = len(subset)
	}
	if cfg.DropLast && size < cfg.WorldSize {
		return sampler.JobConfig{}, fmt.Errorf("%w: drop_last=true with world_size=%d over a subset of %d files: every rank would get none",
			ErrInvalid, cfg.WorldSize, size)
	}
	return sampler.JobConfig{BatchSize: cfg.BatchSize, Seed: cfg.Seed, Kind: cfg.Sampler, Subset: subset,
		WorldSize: cfg.WorldSize, DropLast: cfg.DropLast, Fixed: cfg.Fixed, SeedName: name}, nil
}

// resolve maps subset prefixes to the sample indices of the files under
// them that who could list and read; no prefix is every such file (nil
// for root: every sample). A prefix that names nothing who could open is
// an error, the same whether it does not exist or is hidden from who.
func (m *Manager) resolve(prefixes []string, who *catalog.Cred) ([]int, error) {
	var out []int
	add := func(e *catalog.Entry) bool {
		if i := int(e.Index); i >= 0 && i < m.fileList().Len() && m.fileList().At(i) == e && !e.Gone() {
			out = append(out, i)
		}
		return true
	}
	if len(prefixes) == 0 {
		if who.Root() {
			// The whole dataset: every file numbered at the start, less
			// those a refresh removed since.
			for _, e := range m.fileList().All() {
				add(e)
			}
			if len(out) == m.fileList().Len() {
				return nil, nil
			}
			if len(out) == 0 {
				return nil, fmt.Errorf("%w: the dataset has no file left", ErrInvalid)
			}
			return out, nil
		}
		for _, e := range m.p.Catalog().FilesAs(who) {
			add(e)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: no dataset file is readable by the job's owner (%v)", ErrInvalid, who)
		}
		return out, nil
	}
	for _, pre := range prefixes {
		n := len(out)
		if files, err := m.p.Catalog().ResolvePathsAs(who, []string{pre}); err == nil {
			for _, e := range files {
				add(e)
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("%w: subset=%s matches no dataset file", ErrInvalid, clip(ctlpath.Quote(pre)))
		}
	}
	return out, nil
}
