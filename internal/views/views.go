// Package views is a job's preprocessed views (docs/views.md), without
// FUSE: which pipeline a job reads and its share of the mount's
// preprocessing engine, a rank's batches gathered and assembled into one
// .npz (batch.go, npz.go) in memory the kernel can serve (memfile.go), the
// augmented view of one file, and what the caches hold for cache-aware
// sampling (Set.Cached and Set.Candidates: sampler.Caches).
//
// Every job is a consumer of the mount's engine (preprocess.Engine): its
// pipeline is the mount's with the job's own augment steps and output, and
// jobs with equal pipelines share one View, so each augmentation is
// computed once for all of them and no job takes the same one twice.
//
// Batches. A read of jobs/NAME/batch (or a rank's) takes the job's next
// batch as one .npz: x, the samples' tensors stacked (view=augmented or
// decoded; view=encoded: the files' bytes one after the other, with
// offsets), y, their labels (torchvision ImageFolder's classes of the
// job's subset root), and paths. The samples come from the sampler in the
// job's order (the jobs package draws them), and are produced ahead (the
// rank's plan: its lookahead) on the engine's pool. MinatoLoader: a sample
// whose production runs past the pool's timeout does not hold its batch
// back: the batch is completed with samples that are ready, drawn further
// ahead in the same epoch, and the slow one goes into a later batch of
// that epoch (the rank's carry, carry.go). A sample that cannot be preprocessed (a
// corrupt image) is left out of its batch and counted.
//
// Who calls whom: jobs (a job's identity, config, ranks and leases) calls
// this package, which calls preprocess (the engine) and placement (the
// catalog, the files of view=encoded batches). The sampler asks a Set what
// the caches hold through sampler.Caches; this package imports neither
// jobs nor the sampler, so no call goes back up.
//
// Lock order (docs/architecture.md has the mount's): the jobs manager's
// lock, then Set.mu, then a carry's, then the engine's. The sampler calls
// Cached and Candidates with its own lock held: they read the lock-free
// byJob map and the engine, never Set.mu. A rank's turn (carry.go) is not
// a lock: it is waited for with the read's context and never while a lock
// is held.
package views

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/preprocess"
	"github.com/epochfs/epochfs/internal/preprocess/spec"
	"github.com/epochfs/epochfs/internal/status"
	"github.com/puzpuzpuz/xsync/v3"
	"go.uber.org/zap"
)

// The forms of a job's samples in its batch file (the config's view key).
const (
	Encoded   = "encoded"
	Decoded   = "decoded"
	Augmented = "augmented"
)

// Errors the fs layer maps to errnos (internal/fs/errno.go).
var (
	// ErrInvalid: a job's views config or a read the views cannot serve
	// (EINVAL).
	ErrInvalid = errors.New("views: invalid")
	// ErrTooMany: preprocess.MaxConsumers jobs use views (ENOSPC).
	ErrTooMany = errors.New("views: too many jobs use views")
)

// DefaultMaxBatchBytes bounds one batch's tensor bytes when
// Options.MaxBatchBytes is 0: one user's config cannot make the root
// daemon hold an unbounded batch.
const DefaultMaxBatchBytes = 256 << 20

// Options give a Set the mount's views.
type Options struct {
	Engine   *preprocess.Engine
	Pipeline preprocess.Options // the mount's default pipeline
	// MaxBatchBytes bounds a batch's bytes (DefaultMaxBatchBytes if 0): a
	// config whose batches would be larger is refused when it is written,
	// and a batch of encoded files that grows past it fails.
	MaxBatchBytes int64
	// Placer serves the files of view=encoded batches; its catalog names
	// the samples and gives the class directories.
	Placer *placement.Placer
	Logger *zap.Logger
}

// Spec is what a job's config says of its views.
type Spec struct {
	Form      string // Encoded, Decoded or Augmented
	BatchSize int
	Subset    []string // the job's subset prefixes: one directory is the class root
	Augment   []string // the job's own augment steps (nil: the mount's; empty: none)
	Output    string   // the job's own output ("": the mount's)
}

// Set is the views of one mount's jobs.
type Set struct {
	o     Options
	log   *zap.Logger
	byJob *xsync.MapOf[string, *Job]

	mu        sync.Mutex
	consumers uint64             // the engine's consumer slots in use
	carries   map[rankKey]*carry // a rank's samples drawn and not handed yet
}

type rankKey struct {
	job  string
	rank int
}

// NewSet returns the views of a mount whose engine and pipeline o gives.
func NewSet(o Options) *Set {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return &Set{o: o, log: o.Logger, byJob: xsync.NewMapOf[string, *Job](), carries: map[rankKey]*carry{}}
}

// Job is one job's part of the views.
type Job struct {
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
	// the cache for it forever. Guarded by Set.mu.
	active bool
	// advised: the samples of the job's plan whose files were last read
	// ahead (view=encoded); used by WorkAhead only, from one goroutine.
	advised map[int]struct{}

	cached, produced, corrupt atomic.Int64
}

// Active reports whether the job reads its views (see Activate).
func (s *Set) Active(j *Job) bool {
	if j == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return j.active
}

// Form is the job's form of its samples.
func (j *Job) Form() string { return j.form }

// maxBatchBytes is the bound of one batch's bytes.
func (s *Set) maxBatchBytes() int64 {
	if s.o.MaxBatchBytes > 0 {
		return s.o.MaxBatchBytes
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

// pipelineFor is the job's pipeline: the mount's, with the job's own
// augment steps and output.
func (s *Set) pipelineFor(sp Spec) preprocess.Options {
	o := s.o.Pipeline
	if sp.Augment != nil {
		o.Augment = sp.Augment
	}
	if sp.Output != "" {
		o.Output = sp.Output
		if sp.Output != spec.OutputFloat32CHW {
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

// sampleShape is the tensor shape of one sample of a fixed-size form
// (h, w from fixedShape) and its bytes.
func sampleShape(h, w int, output string) (shape []int, dtype preprocess.DType, bytes int64) {
	if output == spec.OutputFloat32CHW {
		return []int{3, h, w}, preprocess.Float32, 4 * 3 * int64(h) * int64(w)
	}
	return []int{h, w, 3}, preprocess.Uint8, 3 * int64(h) * int64(w)
}

// Prepare makes a job's views for sp (a new job's, or a reconfigured one's:
// prev is its current Job, nil for a new job). It takes a reference of the
// engine's view, which Install or Release gives back; it may build a
// pipeline, so the caller holds no lock.
func (s *Set) Prepare(sp Spec, prev *Job) (*Job, error) {
	po := s.pipelineFor(sp)
	j := &Job{form: sp.Form}
	var err error
	if j.shape, j.dtype, j.fixed, err = s.batchShape(sp, po); err != nil {
		return nil, err
	}
	v, err := s.o.Engine.View(po) // a reference of its own, even to the same view
	if err != nil {
		return nil, fmt.Errorf("%w: the job's pipeline: %w", ErrInvalid, err)
	}
	j.view = v
	j.consumer = -1
	if prev != nil {
		j.consumer = prev.consumer
	}
	j.root, j.classes = s.classesOf(sp.Subset)
	return j, nil
}

// Check is Prepare's check of a spec's batch size, without a pipeline:
// cheap enough for every write of a config document.
func (s *Set) Check(sp Spec) error {
	_, _, _, err := s.batchShape(sp, s.pipelineFor(sp))
	return err
}

// batchShape is a sample's shape and type in sp's batches, when its
// pipeline fixes one, refused when a batch would be over
// views.max_batch_bytes.
func (s *Set) batchShape(sp Spec, po preprocess.Options) (shape []int, dtype preprocess.DType, fixed bool, err error) {
	var h, w int
	switch sp.Form {
	case Augmented:
		h, w, fixed = fixedShape(append(slices.Clone(po.Static), po.Augment...))
	case Decoded:
		h, w, fixed = fixedShape(po.Static)
	}
	if !fixed {
		return nil, "", false, nil
	}
	var per int64
	shape, dtype, per = sampleShape(h, w, po.Output)
	if max := s.maxBatchBytes(); per > 0 && int64(sp.BatchSize) > max/per {
		return nil, "", false, fmt.Errorf("%w: batch_size=%d of %dx%d %s samples is %d MiB a batch, over the mount's %d MiB (views.max_batch_bytes): lower batch_size or the image size",
			ErrInvalid, sp.BatchSize, h, w, outputName(po.Output), int64(sp.BatchSize)*per>>20, max>>20)
	}
	return shape, dtype, true, nil
}

// Release gives back the reference Prepare took, for a Job that was not
// installed (nil: nothing).
func (j *Job) Release() {
	if j != nil {
		j.view.Release()
	}
}

// TakeConsumer gives j (a new job's) a consumer slot of the engine.
func (s *Set) TakeConsumer(j *Job) error {
	if j == nil || j.consumer >= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range preprocess.MaxConsumers {
		if s.consumers&(1<<uint(c)) == 0 {
			s.consumers |= 1 << uint(c)
			j.consumer = c
			return nil
		}
	}
	return fmt.Errorf("%w: %d jobs use views", ErrTooMany, preprocess.MaxConsumers)
}

// FreeConsumer gives back j's slot (a new job that was not registered
// after all).
func (s *Set) FreeConsumer(j *Job) {
	if j == nil || j.consumer < 0 {
		return
	}
	s.mu.Lock()
	s.consumers &^= 1 << uint(j.consumer)
	s.mu.Unlock()
}

// Install makes j the views of job name, replacing old (nil for a new
// job; else the job's config changed: it starts over, its carries go).
func (s *Set) Install(name string, old, j *Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old != nil {
		j.active = old.active
		if old.active && old.view != j.view {
			old.view.Leave(old.consumer)
		}
		if j.active && old.view != j.view {
			j.view.Join(j.consumer)
		}
		old.view.Release()
	}
	s.byJob.Store(name, j)
	s.dropCarriesLocked(name)
}

// Activate makes the job a consumer of its view at its first views read;
// it reports whether this call did (the jobs manager then tells the
// sampler that the job reads views).
func (s *Set) Activate(j *Job) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j.active {
		return false
	}
	j.active = true
	j.view.Join(j.consumer)
	return true
}

// Drop releases a job's views (the job ended or was dropped).
func (s *Set) Drop(name string, j *Job) {
	if j == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if j.active {
		j.view.Leave(j.consumer)
	}
	j.view.Release()
	s.consumers &^= 1 << uint(j.consumer)
	if cur, ok := s.byJob.Load(name); ok && cur == j {
		s.byJob.Delete(name)
	}
	s.dropCarriesLocked(name)
}

func (s *Set) dropCarriesLocked(name string) {
	for k := range s.carries {
		if k.job == name {
			delete(s.carries, k)
		}
	}
}

// classesOf is ImageFolder's classes for a job of subset: the
// subdirectories of its one subset directory (or of the dataset root),
// sorted by name.
func (s *Set) classesOf(subset []string) (string, map[string]int) {
	cat := s.o.Placer.Catalog()
	root := cat.Root()
	if len(subset) == 1 {
		if e := cat.Find(subset[0]); e != nil && e.Kind() == catalog.KindDir {
			root = e
		}
	}
	classes := map[string]int{}
	for c := range root.Children().All() { // sorted by name, as ImageFolder sorts
		if c.Kind() == catalog.KindDir {
			classes[c.Name()] = len(classes)
		}
	}
	return root.Path(), classes
}

// label is sample p's class for the job, or -1 (not under a class
// directory of its root).
func (j *Job) label(p string) int64 {
	rel := p
	if j.root != "" {
		var ok bool
		if rel, ok = strings.CutPrefix(p, j.root+"/"); !ok {
			return -1
		}
	}
	first, _, ok := strings.Cut(rel, "/")
	if !ok {
		return -1
	}
	if l, found := j.classes[first]; found {
		return int64(l)
	}
	return -1
}

// Cached implements sampler.Caches: a form of e the job reads is held.
func (s *Set) Cached(job string, e int) bool {
	j, ok := s.byJob.Load(job)
	if !ok {
		return false
	}
	switch j.form {
	case Augmented:
		return j.view.Cached(j.consumer, e) || j.view.DecodedCached(e)
	case Decoded:
		return j.view.DecodedCached(e)
	}
	return false
}

// Candidates implements sampler.Caches: augmented generations the job has
// not taken, then decoded forms.
func (s *Set) Candidates(job string, dst []int, max int) []int {
	j, ok := s.byJob.Load(job)
	if !ok {
		return dst
	}
	if j.form == Augmented {
		dst = j.view.Candidates(j.consumer, dst, max)
	}
	if j.form != Encoded && len(dst) < max {
		dst = j.view.DecodedCandidates(dst, max)
	}
	return dst
}

// WorkAhead works ahead on an active job's plans (one per rank, from the
// sampler): the engine produces the augmented views of its upcoming
// samples, within its budget; for a view=encoded job it returns the
// samples whose files to read ahead into the page cache (those not
// returned by its last call), so that the batch reads that gather them do
// not wait on the disk one batch at a time. One goroutine calls it (the
// jobs manager's loop).
func (j *Job) WorkAhead(plans [][]int, readAhead []int) []int {
	switch j.form {
	case Encoded:
		next := make(map[int]struct{}, len(j.advised))
		for _, plan := range plans {
			for _, s := range plan {
				next[s] = struct{}{}
				if _, done := j.advised[s]; !done {
					readAhead = append(readAhead, s)
				}
			}
		}
		j.advised = next
	case Augmented:
		for _, plan := range plans {
			for _, s := range plan {
				if !j.view.Want(j.consumer, s) {
					break // the budget is full: the reader produces the rest
				}
			}
		}
	}
	return readAhead
}

// Augmented returns one augmentation of sample e for the job: a generation
// the job has not taken (preprocess.View.Take), as .npy.
func (j *Job) Augmented(ctx context.Context, e int) ([]byte, error) {
	t, info, err := j.view.Take(ctx, j.consumer, e)
	if err != nil {
		if errors.Is(err, preprocess.ErrBadSample) {
			j.corrupt.Add(1)
		}
		return nil, err
	}
	j.count(info)
	return preprocess.EncodeNPY(t), nil
}

// count counts a sample taken from the caches or produced for the job.
func (j *Job) count(info preprocess.TakeInfo) {
	if info.Cached {
		j.cached.Add(1)
	} else {
		j.produced.Add(1)
	}
}

// ImageTensor is a decoded image as the views serve it: H×W×3 uint8,
// without row padding (a batch's x of view=decoded, views/decoded/PATH).
func ImageTensor(img *preprocess.Image) *preprocess.Tensor {
	return &preprocess.Tensor{DType: preprocess.Uint8, Shape: []int{img.H, img.W, 3}, U8: img.Compact().Pix}
}

// DecodedNPY is the decoded view of sample s (views/decoded/PATH) from the
// mount's view v, as .npy.
func DecodedNPY(ctx context.Context, v *preprocess.View, s int) ([]byte, error) {
	img, err := v.Decoded(ctx, s)
	if err != nil {
		return nil, err
	}
	return preprocess.EncodeNPY(ImageTensor(img)), nil
}

// Status fills the job's views part of its status file (j nil: a job
// without views).
func (j *Job) Status(d *status.Doc) {
	if j == nil {
		d.Text("view", "none")
		return
	}
	d.Text("view", j.form)
	d.Text("pipeline", j.view.Key())
	d.Int("view_samples_cached", j.cached.Load())
	d.Int("view_samples_produced", j.produced.Load())
	d.Int("corrupt", j.corrupt.Load())
}
