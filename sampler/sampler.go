package sampler

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"
)

// Lock order: Sampler.mu is the only lock. Residency is called with it held.

// MaxJobs is the number of live jobs a Sampler serves at once: the per-sample
// reference count has 6 bits.
const MaxJobs = 63

// DefaultLease is Options.Lease when it is zero.
const DefaultLease = 2 * time.Minute

// DefaultLookahead is Options.Lookahead (batches pre-drawn per job) when it is zero.
const DefaultLookahead = 2

// Residency tells the sampler which samples are resident in a tier: reading
// them costs no source fetch. It is called with the sampler's lock held, per
// draw, so it must be cheap and must not call back into the Sampler.
type Residency interface {
	Resident(i int) bool
}

// ResidencyFunc adapts a function to Residency.
type ResidencyFunc func(i int) bool

// Resident implements Residency.
func (f ResidencyFunc) Resident(i int) bool { return f(i) }

// Options configures a Sampler.
type Options struct {
	// Samples is the dataset size N: samples are 0..N-1 in catalog order.
	Samples int
	// Residency reports tier residency; nil means nothing is resident.
	Residency Residency
	// BufferSlots is the number of samples the shared buffer holds
	// (installed plus being fetched). 0 disables the buffer: no prefetch,
	// no substitution.
	BufferSlots int
	// Lookahead is how many batches of each job are drawn ahead of its
	// reads, and so known to Prefetch (default DefaultLookahead).
	Lookahead int
	// Lease: a job that has not called Next or Touch for this long is
	// dropped (default DefaultLease; negative: never).
	Lease time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Seed seeds the shared DSA decisions.
	Seed uint64
	// NoSubstitution turns ODS substitution off (ablation: ods jobs then
	// differ from random ones only by DSA).
	NoSubstitution bool
	// NoDSA turns DSA off: every job draws on its own.
	NoDSA bool
}

// Sampler holds every job's epoch state and the shared buffer's index. It is
// safe for concurrent use; every method is O(batch · jobs) or O(buffer)
// except epoch starts, which are O(subset).
type Sampler struct {
	mu   sync.Mutex
	opt  Options
	n    int
	res  Residency
	rng  *rand.Rand
	jobs map[string]*job
	// order is the live jobs in registration order (deterministic iteration).
	order   []*job
	slots   uint64 // job slots in use (bit i = slot i)
	expired map[string]time.Time

	// Shared buffer index (buffer.go).
	status   []uint8 // per sample: state (2 bits) | refcount << 2
	buf      []int32 // samples with state != stNone
	bufPos   map[int32]int
	releases []int
	stats    Stats

	dsa      *dsaIndex // nil unless DSA is active (dsa.go)
	dsaKnown bool      // whether dsa reflects the live jobs
}

type job struct {
	name    string
	slot    int
	cfg     JobConfig
	subset  []int32 // sorted, unique; nil = all samples
	set     *drawSet
	plan    []int32 // drawn, not yet served; head first
	planned map[int32]struct{}
	served  int
	epoch   int
	ended   bool // the end of the epoch was reported; the next Next starts one
	rng     *rand.Rand
	last    time.Time
	st      JobStatus
}

// New returns a Sampler over opt.Samples samples.
func New(opt Options) (*Sampler, error) {
	if opt.Samples < 0 || opt.Samples > 1<<31-1 {
		return nil, fmt.Errorf("%w: Samples=%d", ErrBadOptions, opt.Samples)
	}
	if opt.BufferSlots < 0 {
		return nil, fmt.Errorf("%w: BufferSlots=%d", ErrBadOptions, opt.BufferSlots)
	}
	if opt.Lookahead < 0 {
		return nil, fmt.Errorf("%w: Lookahead=%d", ErrBadOptions, opt.Lookahead)
	}
	if opt.Lookahead == 0 {
		opt.Lookahead = DefaultLookahead
	}
	if opt.Lease == 0 {
		opt.Lease = DefaultLease
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	res := opt.Residency
	if res == nil {
		res = ResidencyFunc(func(int) bool { return false })
	}
	return &Sampler{
		opt:     opt,
		n:       opt.Samples,
		res:     res,
		rng:     rand.New(rand.NewPCG(opt.Seed, 0x6570_6f63_6866_73)),
		jobs:    map[string]*job{},
		expired: map[string]time.Time{},
		status:  make([]uint8, opt.Samples),
		bufPos:  map[int32]int{},
	}, nil
}

// Samples returns N.
func (s *Sampler) Samples() int { return s.n }

// RegisterJob adds a live job. Its first Next starts epoch 1.
func (s *Sampler) RegisterJob(name string, cfg JobConfig) error {
	if name == "" {
		return fmt.Errorf("%w: empty job name", ErrBadConfig)
	}
	if cfg.BatchSize <= 0 || cfg.BatchSize > MaxBatchSize {
		return fmt.Errorf("%w: job %q: batch_size=%d: want 1..%d", ErrBadConfig, name, cfg.BatchSize, MaxBatchSize)
	}
	if cfg.Kind > KindSequential {
		return fmt.Errorf("%w: job %q: sampler kind %d", ErrBadConfig, name, cfg.Kind)
	}
	var subset []int32
	if cfg.Subset != nil {
		if len(cfg.Subset) == 0 {
			return fmt.Errorf("%w: job %q: empty subset", ErrBadConfig, name)
		}
		subset = make([]int32, 0, len(cfg.Subset))
		for _, i := range cfg.Subset {
			if i < 0 || i >= s.n {
				return fmt.Errorf("%w: job %q: subset index %d out of range 0..%d", ErrBadConfig, name, i, s.n-1)
			}
			subset = append(subset, int32(i))
		}
		slices.Sort(subset)
		subset = slices.Compact(subset)
		if len(subset) == s.n {
			subset = nil
		}
	} else if s.n == 0 {
		return fmt.Errorf("%w: job %q: the dataset is empty", ErrBadConfig, name)
	}
	cfg.Subset = nil // the sorted copy is kept instead

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opt.Now()
	s.reap(now)
	if _, ok := s.jobs[name]; ok {
		return fmt.Errorf("%w: %q", ErrJobExists, name)
	}
	if len(s.jobs) >= MaxJobs {
		return fmt.Errorf("%w: %d live", ErrTooManyJobs, len(s.jobs))
	}
	slot := 0
	for s.slots&(1<<uint(slot)) != 0 {
		slot++
	}
	m := s.n
	if subset != nil {
		m = len(subset)
	}
	j := &job{
		name: name, slot: slot, cfg: cfg, subset: subset,
		set: newDrawSet(m), planned: map[int32]struct{}{}, last: now,
	}
	j.st = JobStatus{Name: name, Kind: cfg.Kind, BatchSize: cfg.BatchSize, Size: m}
	j.rng = j.seededRNG()
	s.slots |= 1 << uint(slot)
	s.jobs[name] = j
	s.order = append(s.order, j)
	delete(s.expired, name)
	// The new job wants every buffered sample of its subset.
	s.bufAdjust(j, +1)
	s.invalidateDSA()
	return nil
}

// EndJob removes a job and releases its references (rmdir of its ctl dir).
func (s *Sampler) EndJob(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reap(s.opt.Now())
	j, err := s.lookup(name)
	if err != nil {
		return err
	}
	s.drop(j)
	return nil
}

// Touch renews a job's lease without reading (a heartbeat).
func (s *Sampler) Touch(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opt.Now()
	s.reap(now)
	j, err := s.lookup(name)
	if err != nil {
		return err
	}
	j.last = now
	return nil
}

// Reap drops every job whose lease has expired and returns their names. Every
// other method reaps too; Part 2 calls Reap on a timer so that a dead job is
// dropped even when nothing else happens.
func (s *Sampler) Reap() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reap(s.opt.Now())
}

// Jobs returns the live jobs' names in registration order.
func (s *Sampler) Jobs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reap(s.opt.Now())
	names := make([]string, len(s.order))
	for i, j := range s.order {
		names[i] = j.name
	}
	return names
}

// Next returns the job's next batch: up to BatchSize sample indices that the
// job has not had this epoch. When the epoch is exhausted it returns
// (nil, true, nil) once; the following call starts the next epoch. Next
// renews the job's lease.
func (s *Sampler) Next(name string) (batch []int, endOfEpoch bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opt.Now()
	s.reap(now)
	j, err := s.lookup(name)
	if err != nil {
		return nil, false, err
	}
	j.last = now
	if j.epoch == 0 || j.ended {
		s.startEpoch(j)
	}
	if j.served == j.set.n {
		j.ended = true
		return nil, true, nil
	}
	s.fill(j)
	k := min(j.cfg.BatchSize, len(j.plan))
	if j.cfg.Kind == KindODS {
		s.substitute(j, k)
	}
	batch = make([]int, k)
	for i, e := range j.plan[:k] {
		batch[i] = int(e)
		delete(j.planned, e)
		s.serve(j, e)
	}
	j.plan = append(j.plan[:0], j.plan[k:]...)
	j.served += k
	j.st.Batches++
	// Draw the next window now, so that Prefetch sees it before the next read.
	if j.served < j.set.n {
		s.fill(j)
	}
	return batch, false, nil
}

// JobStatus is a job's progress and counters.
type JobStatus struct {
	Name      string
	Kind      Kind
	BatchSize int
	Size      int // samples in the subset
	Epoch     int // 1-based; 0 before the first Next
	Position  int // samples served this epoch
	Planned   int // samples drawn ahead (the lookahead window)
	Batches   int // batches served, all epochs
	// Samples served, all epochs, by where they were when served.
	ResidentReads int // in a tier
	BufferReads   int // in the shared buffer or being fetched into it
	SourceReads   int // neither: the reader fetches from the source
	Substitutions int // draws replaced by buffered samples (ODS)
	SharedDraws   int // draws shared with another job by DSA
	LastRead      time.Time
}

// Format renders the status as key=value lines (the ctl file's form).
func (st JobStatus) Format() string {
	return fmt.Sprintf("name=%s\nsampler=%s\nbatch_size=%d\nsize=%d\nepoch=%d\nposition=%d\nplanned=%d\nbatches=%d\n"+
		"resident_reads=%d\nbuffer_reads=%d\nsource_reads=%d\nsubstitutions=%d\nshared_draws=%d\nlast_read=%s\n",
		st.Name, st.Kind, st.BatchSize, st.Size, st.Epoch, st.Position, st.Planned, st.Batches,
		st.ResidentReads, st.BufferReads, st.SourceReads, st.Substitutions, st.SharedDraws,
		st.LastRead.UTC().Format(time.RFC3339Nano))
}

// Status returns the job's status. It does not renew the lease.
func (s *Sampler) Status(name string) (JobStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reap(s.opt.Now())
	j, err := s.lookup(name)
	if err != nil {
		return JobStatus{}, err
	}
	st := j.st
	st.Epoch, st.Position, st.Planned, st.LastRead = j.epoch, j.served, len(j.plan), j.last
	return st, nil
}

func (s *Sampler) lookup(name string) (*job, error) {
	if j, ok := s.jobs[name]; ok {
		return j, nil
	}
	if _, ok := s.expired[name]; ok {
		return nil, fmt.Errorf("%w: %q", ErrLeaseExpired, name)
	}
	return nil, fmt.Errorf("%w: %q", ErrNoJob, name)
}

func (s *Sampler) reap(now time.Time) []string {
	if s.opt.Lease < 0 {
		return nil
	}
	var dropped []string
	for _, j := range slices.Clone(s.order) {
		if now.Sub(j.last) >= s.opt.Lease {
			s.drop(j)
			s.expired[j.name] = now
			dropped = append(dropped, j.name)
		}
	}
	// Remember expired names for a while so that their errors say why.
	for name, t := range s.expired {
		if now.Sub(t) > 10*s.opt.Lease || len(s.expired) > 4*MaxJobs {
			delete(s.expired, name)
		}
	}
	return dropped
}

func (s *Sampler) drop(j *job) {
	s.bufAdjust(j, -1)
	delete(s.jobs, j.name)
	s.order = slices.DeleteFunc(s.order, func(o *job) bool { return o == j })
	s.slots &^= 1 << uint(j.slot)
	s.invalidateDSA()
}

func (j *job) seededRNG() *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(j.name))
	return rand.New(rand.NewPCG(j.cfg.Seed^h.Sum64(), uint64(j.epoch)*0x9e3779b97f4a7c15+1))
}

func (s *Sampler) startEpoch(j *job) {
	if j.epoch > 0 {
		// Every sample of the subset becomes wanted again.
		j.set.reset()
		j.served = 0
		s.bufAdjust(j, +1)
		s.invalidateDSA()
	}
	j.epoch++
	j.ended = false
	j.rng = j.seededRNG()
}

// local maps a sample to the job's local index.
func (j *job) local(e int32) (int, bool) {
	if j.subset == nil {
		return int(e), true
	}
	i := sort.Search(len(j.subset), func(k int) bool { return j.subset[k] >= e })
	return i, i < len(j.subset) && j.subset[i] == e
}

func (j *job) global(l int) int32 {
	if j.subset == nil {
		return int32(l)
	}
	return j.subset[l]
}

// wants reports whether the job has not been served e this epoch and e is in
// its subset.
func (j *job) wants(e int32) bool {
	l, ok := j.local(e)
	if !ok {
		return false
	}
	if !j.set.has(l) {
		return true
	}
	_, p := j.planned[e]
	return p
}

// free reports whether e is in the job's subset and neither served nor planned.
func (j *job) free(e int32) bool {
	l, ok := j.local(e)
	return ok && !j.set.has(l)
}

// take moves a free sample into the job's plan.
func (s *Sampler) take(j *job, e int32) {
	l, _ := j.local(e)
	j.set.take(l)
	j.planned[e] = struct{}{}
	if s.dsa != nil {
		s.dsa.remove(s, j, e)
	}
}

// untake returns a planned sample to the job's unseen set.
func (s *Sampler) untake(j *job, e int32) {
	l, _ := j.local(e)
	j.set.untake(l)
	delete(j.planned, e)
	if s.dsa != nil {
		s.dsa.restore(s, j, e)
	}
}

// fill draws the job's plan up to its window.
func (s *Sampler) fill(j *job) {
	want := max(s.opt.Lookahead*j.cfg.BatchSize, j.cfg.BatchSize)
	if len(j.plan) >= want || j.set.free == 0 {
		return
	}
	if j.cfg.Kind == KindODS && s.dsaActive() {
		s.dsaFill(j, want)
		return
	}
	for len(j.plan) < want && j.set.free > 0 {
		s.drawOwn(j)
	}
}

// drawOwn appends one draw of the job's own (no DSA).
func (s *Sampler) drawOwn(j *job) {
	var l int
	if j.cfg.Kind == KindSequential {
		l = j.set.kth(0)
	} else {
		l = j.set.kth(j.rng.IntN(j.set.free))
	}
	e := j.global(l)
	s.take(j, e)
	j.plan = append(j.plan, e)
}
