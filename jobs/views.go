package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/epochfs/epochfs/placement"
	"github.com/epochfs/epochfs/preprocess"
	"github.com/epochfs/epochfs/preprocess/spec"
	"github.com/puzpuzpuz/xsync/v3"
)

// A job's views (docs/views.md). Every job is a consumer of the mount's
// preprocessing engine (preprocess.Engine): its pipeline is the mount's
// with the job's own augment steps and output, and jobs with equal
// pipelines share one View, so each augmentation is computed once for all
// of them and no job takes the same one twice.
//
// Batches. A read of jobs/NAME/batch (or a rank's) takes the job's next
// batch as one .npz: x, the samples' tensors stacked (view=augmented or
// decoded; view=encoded: the files' bytes one after the other, with
// offsets), y, their labels (torchvision ImageFolder's classes of the
// job's subset root), and paths. The samples come from the sampler in the
// job's order, and are produced ahead (the rank's plan: its lookahead) on
// the engine's pool. MinatoLoader: a sample whose production runs past the
// pool's timeout does not hold its batch back: the batch is completed with
// samples that are ready, drawn further ahead in the same epoch, and the
// slow one goes into a later batch of that epoch (the rank's carry). A
// sample that cannot be preprocessed (a corrupt image) is left out of its
// batch and counted.
//
// Lock order: Manager.mu, then the sampler's lock, then the engine's. The
// sampler asks the views what they hold (Caches) with its lock held: that
// path reads m.views, a lock-free map, and the engine, never Manager.mu.

// ViewsOptions give a Manager the mount's views.
type ViewsOptions struct {
	Engine   *preprocess.Engine
	Pipeline preprocess.Options // the mount's default pipeline
	// MaxBatchBytes bounds a batch's bytes (DefaultMaxBatchBytes if 0): a
	// config whose batches would be larger is refused when it is written,
	// and a batch of encoded files that grows past it fails.
	MaxBatchBytes int64
}

// jobView is a job's part of the views.
type jobView struct {
	view     *preprocess.View
	consumer int
	form     string
	root     string         // the class root: the job's one subset directory, else ""
	classes  map[string]int // first path component under root → label
	fixed    bool           // the form has one shape for every sample (batches stack)
	shape    []int          // that shape, and its element type (fixed only)
	dtype    preprocess.DType
	// active: the job reads views (a batch or an augmented file): it is
	// a consumer of its View, and ODS prefers what the caches hold for
	// it. A job that reads only next is not: generations would wait in
	// the cache for it forever. Guarded by Manager.mu.
	active bool
	// advised: the samples of the job's plan whose files were last read
	// ahead (view=encoded); used by the manager's loop only.
	advised map[int]struct{}

	cached, produced, corrupt atomic.Int64
}

// carry is what a rank drew and has not been handed yet: samples set
// aside while slow, and the draws taken to complete a batch.
type carry struct {
	mu      sync.Mutex // held by the rank's batch read
	samples []int
	ended   bool // the sampler ended the epoch; the carry drains first
}

// viewState is the manager's views state.
type viewState struct {
	o         *ViewsOptions
	consumers uint64 // slots in use (guarded by Manager.mu)
	byJob     *xsync.MapOf[string, *jobView]
	carries   map[rankKey]*carry // guarded by Manager.mu
}

// maxBatchBytes is the bound of one batch's bytes.
func (vs *viewState) maxBatchBytes() int64 {
	if vs.o.MaxBatchBytes > 0 {
		return vs.o.MaxBatchBytes
	}
	return DefaultMaxBatchBytes
}

// outputName is the tensor layout as the config spells it.
func outputName(output string) string {
	if output == "" {
		return spec.OutputUint8HWC
	}
	return output
}

func newViewState(o *ViewsOptions) *viewState {
	if o == nil {
		return nil
	}
	return &viewState{o: o, byJob: xsync.NewMapOf[string, *jobView](), carries: map[rankKey]*carry{}}
}

// pipelineFor is the job's pipeline: the mount's, with the job's own
// augment steps and output.
func (vs *viewState) pipelineFor(cfg Config) preprocess.Options {
	o := vs.o.Pipeline
	if cfg.Augment != nil {
		o.Augment = cfg.Augment
	}
	if cfg.Output != "" {
		o.Output = cfg.Output
		if cfg.Output != spec.OutputFloat32CHW {
			o.Normalize = nil
		}
	}
	return o
}

// fixedShape reports whether the steps end every image at one size (the
// last step that sets the size is a crop or a resize to H×W), and that
// height and width.
func fixedShape(steps []string) (h, w int, ok bool) {
	for _, t := range steps {
		st, err := spec.Parse(t)
		if err != nil {
			return 0, 0, false
		}
		switch st.Kind {
		case spec.CenterCrop, spec.RandomResizedCrop:
			h, w, ok = st.H, st.W, true
		case spec.Resize:
			h, w, ok = st.H, st.W, st.H > 0 && st.W > 0 && !st.Short
		}
	}
	return h, w, ok
}

// DefaultMaxBatchBytes bounds one batch's tensor bytes when
// ViewsOptions.MaxBatchBytes is 0: one user's config cannot make the root
// daemon hold an unbounded batch.
const DefaultMaxBatchBytes = 256 << 20

// sampleShape is the tensor shape of one sample of a fixed-size form
// (h, w from fixedShape) and its bytes.
func sampleShape(h, w int, output string) (shape []int, dtype preprocess.DType, bytes int64) {
	if output == spec.OutputFloat32CHW {
		return []int{3, h, w}, preprocess.Float32, 4 * 3 * int64(h) * int64(w)
	}
	return []int{h, w, 3}, preprocess.Uint8, 3 * int64(h) * int64(w)
}

// attachView gives a job (registered or reconfigured) its view; prev is
// its current one (nil for a new job). It runs without Manager.mu (the
// engine may build a pipeline).
func (m *Manager) attachView(name string, cfg Config, prev *jobView, who *placement.Cred) (*jobView, error) {
	vs := m.vs
	if vs == nil {
		return nil, nil
	}
	po := vs.pipelineFor(cfg)
	jv := &jobView{form: cfg.View}
	var h, w int
	switch cfg.View {
	case ViewAugmented:
		h, w, jv.fixed = fixedShape(append(slices.Clone(po.Static), po.Augment...))
	case ViewDecoded:
		h, w, jv.fixed = fixedShape(po.Static)
	}
	if jv.fixed {
		var per int64
		jv.shape, jv.dtype, per = sampleShape(h, w, po.Output)
		if max := vs.maxBatchBytes(); per > 0 && int64(cfg.BatchSize) > max/per {
			return nil, fmt.Errorf("%w: batch_size=%d of %dx%d %s samples is %d MiB a batch, over the mount's %d MiB (views.max_batch_bytes): lower batch_size or the image size",
				ErrInvalid, cfg.BatchSize, h, w, outputName(po.Output), int64(cfg.BatchSize)*per>>20, max>>20)
		}
	}
	v, err := vs.o.Engine.View(po) // a reference of its own, even to the same view
	if err != nil {
		return nil, fmt.Errorf("%w: the job's pipeline: %w", ErrInvalid, err)
	}
	jv.view = v
	jv.consumer = -1
	if prev != nil {
		jv.consumer = prev.consumer
	}
	jv.root, jv.classes = m.classesOf(cfg)
	return jv, nil
}

// releaseUnused gives back the reference attachView took for a config that
// was not applied.
func releaseUnused(jv *jobView) {
	if jv != nil {
		jv.view.Release()
	}
}

// takeConsumerLocked gives jv a consumer slot (a new job's).
func (m *Manager) takeConsumerLocked(jv *jobView) error {
	if jv == nil || jv.consumer >= 0 {
		return nil
	}
	for c := range preprocess.MaxConsumers {
		if m.vs.consumers&(1<<uint(c)) == 0 {
			m.vs.consumers |= 1 << uint(c)
			jv.consumer = c
			return nil
		}
	}
	return fmt.Errorf("%w: %d jobs use views", ErrTooMany, preprocess.MaxConsumers)
}

// installViewLocked makes jv the job's view, replacing old (the job's
// config changed: it starts over, its carries go).
func (m *Manager) installViewLocked(name string, j *job, jv *jobView) {
	old := j.vw
	j.vw = jv
	if jv == nil {
		return
	}
	if old != nil {
		jv.active = old.active
		if old.active && old.view != jv.view {
			old.view.Leave(old.consumer)
		}
		if jv.active && old.view != jv.view {
			jv.view.Join(jv.consumer)
		}
		old.view.Release()
	}
	m.vs.byJob.Store(name, jv)
	for k := range m.vs.carries {
		if k.job == name {
			delete(m.vs.carries, k)
		}
	}
}

// activateLocked makes the job a consumer of its view at its first views
// read.
func (m *Manager) activateLocked(name string, jv *jobView) {
	if jv.active {
		return
	}
	jv.active = true
	jv.view.Join(jv.consumer)
	m.s.SetViews(name, true)
}

// dropViewLocked releases a job's view (the job ended or was dropped).
func (m *Manager) dropViewLocked(name string, j *job) {
	if m.vs == nil || j.vw == nil {
		return
	}
	jv := j.vw
	j.vw = nil
	if jv.active {
		jv.view.Leave(jv.consumer)
	}
	jv.view.Release()
	m.vs.consumers &^= 1 << uint(jv.consumer)
	if cur, ok := m.vs.byJob.Load(name); ok && cur == jv {
		m.vs.byJob.Delete(name)
	}
	for k := range m.vs.carries {
		if k.job == name {
			delete(m.vs.carries, k)
		}
	}
}

// classesOf is ImageFolder's classes for the job: the subdirectories of its
// one subset directory (or of the dataset root), sorted by name.
func (m *Manager) classesOf(cfg Config) (string, map[string]int) {
	cat := m.p.Catalog()
	root := cat.Root()
	if len(cfg.Subset) == 1 {
		if e := cat.Find(cfg.Subset[0]); e != nil && e.Kind == placement.KindDir {
			root = e
		}
	}
	classes := map[string]int{}
	for _, c := range root.Children() { // sorted by name, as ImageFolder sorts
		if c.Kind == placement.KindDir {
			classes[c.Name()] = len(classes)
		}
	}
	return root.Path, classes
}

// label is sample e's class for the job, or -1 (not under a class
// directory of its root).
func (jv *jobView) label(p string) int64 {
	rel := p
	if jv.root != "" {
		var ok bool
		if rel, ok = strings.CutPrefix(p, jv.root+"/"); !ok {
			return -1
		}
	}
	first, _, ok := strings.Cut(rel, "/")
	if !ok {
		return -1
	}
	if l, found := jv.classes[first]; found {
		return int64(l)
	}
	return -1
}

// Cached implements sampler.Caches: a form of e the job reads is held.
func (m *Manager) Cached(job string, e int) bool {
	jv, ok := m.vs.byJob.Load(job)
	if !ok {
		return false
	}
	switch jv.form {
	case ViewAugmented:
		return jv.view.Cached(jv.consumer, e) || jv.view.DecodedCached(e)
	case ViewDecoded:
		return jv.view.DecodedCached(e)
	}
	return false
}

// Candidates implements sampler.Caches: augmented generations the job has
// not taken, then decoded forms.
func (m *Manager) Candidates(job string, dst []int, max int) []int {
	jv, ok := m.vs.byJob.Load(job)
	if !ok {
		return dst
	}
	if jv.form == ViewAugmented {
		dst = jv.view.Candidates(jv.consumer, dst, max)
	}
	if jv.form != ViewEncoded && len(dst) < max {
		dst = jv.view.DecodedCandidates(dst, max)
	}
	return dst
}

// produce works ahead on every views job's plans: the engine produces the
// augmented views of its upcoming samples; the files of a view=encoded
// job's upcoming samples are read ahead into the page cache, so that the
// batch reads that gather them do not wait on the disk one batch at a
// time.
func (m *Manager) produce() {
	if m.vs == nil {
		return
	}
	type want struct {
		jv    *jobView
		name  string
		ranks int
	}
	var ws []want
	m.mu.Lock()
	for name, j := range m.jobs {
		if j.vw != nil && j.vw.active && (j.vw.form == ViewAugmented || j.vw.form == ViewEncoded) {
			ws = append(ws, want{j.vw, name, j.cfg.WorldSize})
		}
	}
	m.mu.Unlock()
	var plan []int
	for _, w := range ws {
		if w.jv.form == ViewEncoded {
			next := make(map[int]struct{}, len(w.jv.advised))
			for r := 0; r < w.ranks; r++ {
				plan, _ = m.s.Plan(w.name, r, plan[:0])
				for _, s := range plan {
					next[s] = struct{}{}
					if _, done := w.jv.advised[s]; !done {
						if e := m.p.Catalog().ByIndex(s); e != nil {
							m.readahead(e)
						}
					}
				}
			}
			w.jv.advised = next
			continue
		}
		for r := 0; r < w.ranks; r++ {
			plan, _ = m.s.Plan(w.name, r, plan[:0])
			for _, s := range plan {
				if !w.jv.view.Want(w.jv.consumer, s) {
					break // the budget is full: the reader produces the rest
				}
			}
		}
	}
}

// Augmented returns one augmentation of the dataset file p for the job: a
// generation the job has not taken (preprocess.View.Take), as .npy.
func (m *Manager) Augmented(ctx context.Context, name string, e *placement.Entry) ([]byte, error) {
	if m.vs == nil {
		return nil, fmt.Errorf("%w: the mount serves no views", ErrInvalid)
	}
	m.mu.Lock()
	m.syncLocked()
	j, ok := m.jobs[name]
	var jv *jobView
	if ok {
		jv = j.vw
		if jv != nil {
			m.activateLocked(name, jv)
		}
	}
	m.mu.Unlock()
	if !ok || jv == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoJob, name)
	}
	if int(e.Index) < 0 || !m.visible(j, e) {
		return nil, fmt.Errorf("jobs: %s: %w", e.Path, placement.ErrNoEntry)
	}
	// A job that reads its views is alive, like one that reads next.
	if err := m.s.TouchJob(name); err != nil {
		return nil, wrap(err)
	}
	t, info, err := jv.view.Take(ctx, jv.consumer, int(e.Index))
	if err != nil {
		if errors.Is(err, preprocess.ErrBadSample) {
			jv.corrupt.Add(1)
		}
		return nil, err
	}
	if info.Cached {
		jv.cached.Add(1)
	} else {
		jv.produced.Add(1)
	}
	return preprocess.EncodeNPY(t), nil
}

// visible reports whether the job's owner may open e.
func (m *Manager) visible(j *job, e *placement.Entry) bool {
	if j.owner.Root() {
		return true
	}
	_, err := m.p.LookupAs(j.owner, e.Path)
	return err == nil
}

// viewStatus is the job's views lines for its status file.
func (jv *jobView) viewStatus() []kv {
	if jv == nil {
		return []kv{{"view", "none"}}
	}
	return []kv{
		{"view", jv.form}, {"pipeline", jv.view.Key()},
		{"view_samples_cached", jv.cached.Load()}, {"view_samples_produced", jv.produced.Load()},
		{"corrupt", jv.corrupt.Load()},
	}
}
