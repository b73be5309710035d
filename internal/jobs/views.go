package jobs

// A job's views as the manager keeps them: the views package does the
// work (a job's pipeline, batches, the augmented view of a file, what the
// caches hold); the manager looks the job up, checks its ranks and its
// owner, draws its samples from the sampler and hands them over.
//
// Lock order (docs/architecture.md has the mount's): Manager.mu, then
// views.Set's or the sampler's; a batch read holds none of them while
// its draw waits for the slowest rank.

import (
	"context"
	"fmt"

	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/status"
	"github.com/epochfs/epochfs/internal/views"
)

// spec is what the job's config says of its views.
func (cfg Config) spec() views.Spec {
	return views.Spec{Form: cfg.View, BatchSize: cfg.BatchSize, Subset: cfg.Subset, Augment: cfg.Augment, Output: cfg.Output}
}

// attachView gives a job (registered or reconfigured) its views; prev is
// its current one (nil for a new job). It runs without Manager.mu (the
// engine may build a pipeline).
func (m *Manager) attachView(cfg Config, prev *views.Job) (*views.Job, error) {
	if m.vs == nil {
		return nil, nil
	}
	return m.vs.Prepare(cfg.spec(), prev)
}

// installViewLocked makes jv the job's views (a new job's, or its config
// changed).
func (m *Manager) installViewLocked(j *job, jv *views.Job) {
	old := j.vw
	j.vw = jv
	if jv != nil {
		m.vs.Install(j.key, old, jv)
	}
}

// activateLocked makes the job a consumer of its view at its first views
// read.
func (m *Manager) activateLocked(key string, jv *views.Job) {
	if m.vs.Activate(jv) {
		m.s.SetViews(key, true)
	}
}

// dropViewLocked releases a job's views (the job ended or was dropped).
func (m *Manager) dropViewLocked(j *job) {
	if m.vs == nil || j.vw == nil {
		return
	}
	m.vs.Drop(j.key, j.vw)
	j.vw = nil
}

// produce works ahead on every views job's plans (views.Job.WorkAhead): the
// engine produces the augmented views of its upcoming samples; the files
// of a view=encoded job's upcoming samples are read ahead.
func (m *Manager) produce() {
	if m.vs == nil {
		return
	}
	type want struct {
		jv    *views.Job
		key   string
		ranks int
	}
	var ws []want
	m.mu.Lock()
	for _, j := range m.jobs {
		if j.vw != nil && (j.vw.Form() == ViewAugmented || j.vw.Form() == ViewEncoded) && m.vs.Active(j.vw) {
			ws = append(ws, want{j.vw, j.key, j.cfg.WorldSize})
		}
	}
	m.mu.Unlock()
	var ahead []int
	for _, w := range ws {
		plans := make([][]int, w.ranks)
		for r := range plans {
			plans[r], _ = m.s.Plan(w.key, r, nil)
		}
		ahead = w.jv.WorkAhead(plans, ahead[:0])
		for _, s := range ahead {
			if e := m.p.Catalog().ByIndex(s); e != nil {
				m.readahead(e)
			}
		}
	}
}

// Augmented returns one augmentation of the dataset file e for the job, as
// .npy (views.Job.Augmented).
func (m *Manager) Augmented(ctx context.Context, ref Ref, e *catalog.Entry) ([]byte, error) {
	if m.vs == nil {
		return nil, fmt.Errorf("%w: the mount serves no views", ErrInvalid)
	}
	m.mu.Lock()
	j, err := m.jobOfLocked(ref)
	var jv *views.Job
	if err == nil {
		jv = j.vw
		if jv != nil {
			m.activateLocked(j.key, jv)
		}
	}
	m.mu.Unlock()
	if err != nil || jv == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoJob, ref.Name)
	}
	if int(e.Index) < 0 || !m.visible(j, e) {
		return nil, fmt.Errorf("jobs: %s: %w", e.Path(), placement.ErrNoEntry)
	}
	// A job that reads its views is alive, like one that reads next.
	if err := m.s.TouchJob(j.key); err != nil {
		return nil, wrap(err)
	}
	return jv.Augmented(ctx, int(e.Index))
}

// Batch returns the next batch of a job (rank -1: a job of world size 1)
// as an .npz assembled in memory from alloc (nil: the manager's pool), or
// end=true once at the end of each epoch.
func (m *Manager) Batch(ctx context.Context, ref Ref, rank int, alloc views.Alloc) (b *views.Batch, end bool, err error) {
	name := ref.Name
	if alloc == nil {
		alloc = m.bufs.Alloc
	}
	if m.vs == nil {
		return nil, false, fmt.Errorf("%w: the mount serves no views", ErrInvalid)
	}
	j, err := m.jobOf(ref)
	if err != nil {
		return nil, false, err
	}
	if rank < 0 {
		if err := j.soloRank(name, "batch"); err != nil {
			return nil, false, err
		}
		rank = 0
	}
	m.mu.Lock()
	jv, size := j.vw, j.cfg.BatchSize
	if jv != nil {
		m.activateLocked(j.key, jv)
	}
	m.mu.Unlock()
	if jv == nil {
		return nil, false, fmt.Errorf("%w: job %q has no view", ErrInvalid, name)
	}
	if err := m.s.Touch(j.key, rank); err != nil {
		return nil, false, wrap(err)
	}
	draw := func(ctx context.Context) ([]int, bool, error) { return m.nextIndices(ctx, j, rank) }
	return m.vs.NextBatch(ctx, jv, j.key, rank, size, draw, alloc)
}

// visible reports whether the job's owner may open e.
func (m *Manager) visible(j *job, e *catalog.Entry) bool {
	if j.owner.Root() {
		return true
	}
	_, err := m.p.Catalog().LookupAs(j.owner, e.Path())
	return err == nil
}

// viewStatus fills the job's views part of its status file.
func (m *Manager) viewStatus(j *job, d *status.Doc) {
	if m.vs == nil {
		return
	}
	m.mu.Lock()
	jv := j.vw
	m.mu.Unlock()
	if jv != nil {
		jv.Status(d)
	}
}
