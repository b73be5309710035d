package sampler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Lock order: Sampler.mu is the only lock. Residency is called with it held.

// MaxJobs is the number of live jobs a Sampler serves at once: the per-sample
// reference count has 6 bits.
const MaxJobs = 63

// DefaultLease is Options.Lease when it is zero.
const DefaultLease = 2 * time.Minute

// DefaultLookahead is Options.Lookahead (batches pre-drawn per rank) when it is zero.
const DefaultLookahead = 2

// Residency tells the sampler which samples are resident in a tier: reading
// them costs no source fetch. It is called with the sampler's lock held, per
// draw, so it must be cheap and must not call back into the Sampler.
type Residency interface {
	Resident(i int) bool
}

// PeerResidency is a Residency that also knows the samples another node
// of a peers cluster keeps (cluster data = "peers"): reading one costs a
// read from that node, not from the source. ODS proposes them after this
// node's, before the rest, and the jobs' status counts reads by where the
// sample was.
type PeerResidency interface {
	Residency
	PeerHeld(i int) bool
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
	// Lookahead is how many batches of each rank are drawn ahead of its
	// reads, and so known to Prefetch (0: DefaultLookahead).
	Lookahead int
	// Lease: a rank that has not called NextRank or Touch for this long is
	// lost; a job whose ranks are all lost is dropped (0: DefaultLease;
	// negative: never).
	Lease time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Seed seeds the shared DSA decisions.
	Seed uint64
	// Caches, if set, is what the views hold: ODS substitutes a views
	// job's draws from it before the buffer (caches.go).
	Caches Caches
	// NoSubstitution turns ODS substitution off (ablation: ods jobs then
	// differ from random ones only by DSA).
	NoSubstitution bool
	// NoDSA turns DSA off: every job draws on its own.
	NoDSA bool
	// Gone reports a sample removed from the dataset since the sampler
	// was made (a refresh found its file gone); nil: none is. A gone
	// sample is never handed out (ranks.go: skipGone).
	Gone func(i int) bool
}

// Sampler holds every job's epoch state and the shared buffer's index. It is
// safe for concurrent use; every method is O(batch · jobs · ranks) or
// O(buffer) except epoch starts, which are O(subset).
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
	status   []uint8 // per sample: state (2 bits) | refcount << 2; nil until a sample is buffered (bufAdd)
	buf      []int32 // samples with state != stNone
	bufPos   map[int32]int
	releases []int
	stats    Stats

	lost     []lostReport // cluster jobs' ranks lost, not yet told (Reap)
	scratch  []int        // Caches.Candidates' buffer
	dsa      *dsaIndex    // nil unless DSA is active (dsa.go)
	dsaKnown bool         // whether dsa reflects the live jobs
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
		bufPos:  map[int32]int{},
	}, nil
}

// Samples returns N.
func (s *Sampler) Samples() int { return s.n }

// Grow extends the dataset to n samples (a refresh added files; their
// indices are Samples()..n-1). A job over the whole dataset takes them all
// from its next epoch; add names, per job, the new samples that join its
// subset from its next epoch (the caller decides which files a job's
// subset and owner take). Epochs in flight are unchanged.
func (s *Sampler) Grow(n int, add map[string][]int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < s.n || n > 1<<31-1 {
		return fmt.Errorf("%w: Grow to %d samples from %d", ErrBadOptions, n, s.n)
	}
	for name, idx := range add {
		j, ok := s.jobs[name]
		if !ok || j.subset == nil || j.cfg.Fixed || j.cfg.Claimer != nil {
			continue
		}
		last := j.subset[len(j.subset)-1]
		if len(j.joining) > 0 {
			last = j.joining[len(j.joining)-1]
		}
		slices.Sort(idx)
		for _, i := range idx {
			if i < 0 || i >= n {
				return fmt.Errorf("%w: job %q: sample %d out of range 0..%d", ErrBadConfig, name, i, n-1)
			}
			if int32(i) > last {
				j.joining = append(j.joining, int32(i))
				last = int32(i)
			}
		}
	}
	if n == s.n {
		return nil
	}
	if s.status != nil {
		s.status = append(s.status, make([]uint8, n-s.n)...)
	}
	s.n = n
	s.invalidateDSA()
	return nil
}

// Lease returns the lease in effect (negative: never).
func (s *Sampler) Lease() time.Duration { return s.opt.Lease }

// RegisterJob adds a live job of cfg.WorldSize ranks, all in epoch 1
// (their first NextRank starts it).
func (s *Sampler) RegisterJob(name string, cfg JobConfig) error {
	j, err := s.newJob(name, cfg)
	if err != nil {
		return err
	}
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
	s.install(j, now)
	return nil
}

// newJob checks cfg and returns the job it describes, not yet installed.
func (s *Sampler) newJob(name string, cfg JobConfig) (*job, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty job name", ErrBadConfig)
	}
	if cfg.BatchSize <= 0 || cfg.BatchSize > MaxBatchSize {
		return nil, fmt.Errorf("%w: job %q: batch size %d: want 1..%d", ErrBadConfig, name, cfg.BatchSize, MaxBatchSize)
	}
	if cfg.Kind >= kinds {
		return nil, fmt.Errorf("%w: job %q: sampler kind %d", ErrBadConfig, name, cfg.Kind)
	}
	if cfg.WorldSize == 0 {
		cfg.WorldSize = 1
	}
	if cfg.WorldSize < 1 || cfg.WorldSize > MaxWorldSize {
		return nil, fmt.Errorf("%w: job %q: world size %d: want 1..%d", ErrBadConfig, name, cfg.WorldSize, MaxWorldSize)
	}
	var subset []int32
	if cfg.Subset != nil {
		if len(cfg.Subset) == 0 {
			return nil, fmt.Errorf("%w: job %q: empty subset", ErrBadConfig, name)
		}
		subset = make([]int32, 0, len(cfg.Subset))
		for _, i := range cfg.Subset {
			if i < 0 || i >= s.n {
				return nil, fmt.Errorf("%w: job %q: subset index %d out of range 0..%d", ErrBadConfig, name, i, s.n-1)
			}
			subset = append(subset, int32(i))
		}
		slices.Sort(subset)
		subset = slices.Compact(subset)
		if len(subset) == s.n {
			subset = nil
		}
	} else if s.n == 0 {
		return nil, fmt.Errorf("%w: job %q: the dataset is empty", ErrBadConfig, name)
	}
	cfg.Subset = nil // the sorted copy is kept instead
	m := s.n
	if subset != nil {
		m = len(subset)
	}
	share := perRank(m, cfg.WorldSize, cfg.DropLast)
	if share == 0 {
		return nil, fmt.Errorf("%w: job %q: %d samples over %d ranks with drop_last: every rank would get none",
			ErrBadConfig, name, m, cfg.WorldSize)
	}
	j := &job{name: name, cfg: cfg, subset: subset, size: m, share: share}
	j.st = JobStatus{Name: name, Kind: cfg.Kind, BatchSize: cfg.BatchSize, Size: m,
		WorldSize: cfg.WorldSize, DropLast: cfg.DropLast, PerRank: share}
	return j, nil
}

// install makes j live, its ranks in its first epoch (s.mu held; the name
// is free and a slot too).
func (s *Sampler) install(j *job, now time.Time) {
	slot := 0
	for s.slots&(1<<uint(slot)) != 0 {
		slot++
	}
	j.slot, j.minLast = slot, now
	j.ranks = make([]*rank, j.cfg.WorldSize)
	for i := range j.ranks {
		j.ranks[i] = &rank{id: i, last: now}
	}
	s.slots |= 1 << uint(slot)
	s.jobs[j.name] = j
	s.order = append(s.order, j)
	delete(s.expired, j.name)
	ep := s.newEpoch(j) // the new job wants every buffered sample of its subset
	for _, r := range j.ranks {
		r.ep = ep
	}
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

// Touch renews a rank's lease without reading (a heartbeat: a batch read
// that does not draw), and ends its pause. A lost rank stays lost until it
// reads.
func (s *Sampler) Touch(name string, rank int) error { return s.renew(name, rank, 0) }

// renew renews a rank's lease, and sets its pause to end after pause
// (0: no pause).
func (s *Sampler) renew(name string, rank int, pause time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opt.Now()
	s.reap(now)
	_, r, err := s.lookupRank(name, rank)
	if err != nil {
		return err
	}
	if !r.lost {
		r.last = now
	}
	r.pauseUntil = time.Time{}
	if pause > 0 {
		r.pauseUntil = now.Add(pause)
	}
	return nil
}

// MaxPause bounds a rank's pause.
const MaxPause = 24 * time.Hour

// Pause says that a rank reads nothing for d (a validation pass between
// epochs, a long checkpoint): its lease runs from the pause's end, so it
// is lost only if it does not read within a lease after d. Its next read
// ends the pause; d = 0 ends it now. A lost rank stays lost until it
// reads.
func (s *Sampler) Pause(name string, rank int, d time.Duration) error {
	if d < 0 || d > MaxPause {
		return fmt.Errorf("%w: pause of %v: want 0..%v", ErrBadConfig, d, MaxPause)
	}
	return s.renew(name, rank, d)
}

// TouchJob renews the lease of every live rank of a job: a read of the
// job's views (which name no rank) shows the job is alive.
func (s *Sampler) TouchJob(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opt.Now()
	s.reap(now)
	j, err := s.lookup(name)
	if err != nil {
		return err
	}
	for _, r := range j.ranks {
		if !r.lost && !j.remote(r) {
			r.last = now
		}
	}
	return nil
}

// Reap loses every rank whose lease has expired, drops every job whose
// ranks are all lost, and returns the dropped jobs' names. Every other
// method reaps too; the jobs layer calls Reap on a timer so that a dead job
// is dropped even when nothing else happens.
func (s *Sampler) Reap() []string {
	s.mu.Lock()
	dropped := s.reap(s.opt.Now())
	lost := s.lost
	s.lost = nil
	s.mu.Unlock()
	// Cluster jobs' lost ranks, told without the lock (each call is
	// bounded by the cluster's timeout).
	for _, l := range lost {
		l.k.Lost(l.epoch, l.rank, l.returned)
	}
	return dropped
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

// Next is NextRank of rank 0 (the only rank of a job of world size 1).
func (s *Sampler) Next(name string) (batch []int, endOfEpoch bool, err error) {
	return s.NextRank(name, 0)
}

// NextRank returns the rank's next batch: up to BatchSize sample indices.
// Each epoch, every rank of the job gets the job's share (see JobConfig.
// DropLast), no sample goes to two ranks (padding aside), and together
// they get every sample of the subset. Once the rank got its share,
// NextRank returns (nil, true, nil) once; the following call starts its
// next epoch, or answers ErrRankAhead while that would put the rank two
// epochs ahead of the slowest live rank (call again later: each call
// renews the lease). NextRank renews the rank's lease; a lost rank that
// calls it rejoins.
//
// For a job with a Claimer, NextRank claims the rank's samples through it
// without holding the sampler's lock (claims.go), answers ErrRankAhead
// when the claimer says the rank is two epochs ahead of the slowest rank
// on any node, and ErrClaimPending while another read's claim for the
// rank is out; the caller calls again in both cases.
func (s *Sampler) NextRank(name string, rank int) (batch []int, endOfEpoch bool, err error) {
	s.mu.Lock()
	locked := true
	defer func() {
		if locked {
			s.mu.Unlock()
		}
	}()
	for try := 0; ; try++ {
		now := s.opt.Now()
		s.reap(now)
		j, r, err := s.lookupRank(name, rank)
		if err != nil {
			return nil, false, err
		}
		r.last = now
		r.st.LastRead = now
		r.pauseUntil = time.Time{}
		if j.cfg.Claimer == nil {
			return s.nextRank(j, r)
		}
		if err := s.advance(j, r); err != nil {
			return nil, false, err
		}
		req := s.prepareClaim(j, r, try == 0)
		if req == nil {
			batch, end, err := s.nextRank(j, r)
			if end {
				num := r.ep.num
				s.mu.Unlock()
				locked = false
				j.cfg.Claimer.Ended(num, r.id)
			}
			return batch, end, err
		}
		s.mu.Unlock()
		ans, cerr := j.cfg.Claimer.Claim(ClaimRequest{Epoch: req.ep.num, Rank: r.id, Share: req.share, Padded: req.pad,
			Want: req.want, Cands: req.cands, Probe: req.probe})
		s.mu.Lock()
		if err := s.applyClaim(req, ans, cerr); err != nil {
			return nil, false, err
		}
	}
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

func (s *Sampler) lookupRank(name string, rank int) (*job, *rank, error) {
	j, err := s.lookup(name)
	if err != nil {
		return nil, nil, err
	}
	if rank < 0 || rank >= len(j.ranks) {
		return nil, nil, fmt.Errorf("%w: job %q has ranks 0..%d, not %d", ErrNoRank, name, len(j.ranks)-1, rank)
	}
	return j, j.ranks[rank], nil
}

func (s *Sampler) reap(now time.Time) []string {
	if s.opt.Lease < 0 {
		return nil
	}
	var dropped []string
	for _, j := range slices.Clone(s.order) {
		if now.Sub(j.minLast) < s.opt.Lease {
			continue
		}
		var expired []*rank
		live := 0
		oldest := now
		for _, r := range j.ranks {
			switch {
			case r.lost:
			case j.remote(r):
				// A rank on another node is never lost here; it keeps
				// the job alive for a lease from its registration.
				if now.Sub(r.last) < s.opt.Lease {
					live++
					if r.last.Before(oldest) {
						oldest = r.last
					}
				}
			case now.Sub(r.leased()) >= s.opt.Lease:
				expired = append(expired, r)
			default:
				live++
				if r.leased().Before(oldest) {
					oldest = r.leased()
				}
			}
		}
		if live == 0 {
			if j.cfg.Claimer != nil {
				// The cluster's other nodes take over what its ranks
				// here had not read.
				for _, r := range expired {
					s.loseRank(j, r)
				}
			}
			s.drop(j)
			s.expired[j.name] = now
			dropped = append(dropped, j.name)
			continue
		}
		for _, r := range expired {
			s.loseRank(j, r)
		}
		j.minLast = oldest
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
	s.rewant(j, func() { j.eps = nil })
	delete(s.jobs, j.name)
	s.order = slices.DeleteFunc(s.order, func(o *job) bool { return o == j })
	s.slots &^= 1 << uint(j.slot)
	s.invalidateDSA()
}
