// Package jobs is a training job as the mount sees it: its name, its owner,
// its config (parsed here: config.go), its ranks, and the shared buffer it
// reads through. It connects the pure sampler to the placer: it turns
// sample indices (the catalog's file numbers, catalog.Entry.Index, in
// path order) into dataset paths, resolves subsets as the owner sees the
// dataset, and runs the buffer for the sampler (buffer.go). The fs layer
// only translates its files to these calls.
//
// A job of world_size W has ranks 0..W-1, each reading its own batches
// (NextRank) with torch's DistributedSampler counts; a rank that ends its
// epoch and would run two epochs ahead of the slowest waits in NextRank
// (next.go), its lease renewed, until the others catch up or are lost.
//
// Lock order: Manager.mu, then the sampler's lock (the sampler never calls
// back into the manager with its lock held). Manager.mu is never held
// while waiting.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/sampler"
	"github.com/epochfs/epochfs/internal/status"
	"github.com/epochfs/epochfs/internal/views"
	"go.uber.org/zap"
)

// Options configure a Manager.
type Options struct {
	// Placer serves the files; its shared buffer (placement.Options.
	// BufferBytes) is the jobs' buffer, sized by Placer.Buffer().Slots.
	Placer    *placement.Placer
	Lookahead int           // batches drawn ahead per rank (sampler default when 0)
	Lease     time.Duration // sampler.Options.Lease
	Fetchers  int           // prefetches in flight (default 8)
	Interval  time.Duration // loop period (default 20 ms)
	Seed      uint64
	Now       func() time.Time
	Logger    *zap.Logger
	// Views, if set, gives jobs their preprocessed views (the views
	// package).
	Views *views.Set
	// Cluster, if set, is the mount's cluster: jobs with cluster=true
	// claim their epochs in it (cluster.go). Nil: cluster=true is refused.
	Cluster ClusterJobs
	// PeerHeld, if set, reports whether another node of a peers cluster
	// keeps sample i (a file this node does not): ODS jobs propose those
	// after this node's, and the status counts reads from peers.
	PeerHeld func(i int) bool
	// MaxJobsPerUser bounds the live jobs of one user other than root
	// (DefaultMaxJobsPerUser if 0, none if negative): one user cannot take
	// every job slot of the mount.
	MaxJobsPerUser int
}

// DefaultMaxJobsPerUser is a quarter of the sampler's job slots.
const DefaultMaxJobsPerUser = (sampler.MaxJobs + 1) / 4

// Ref names one registration of a job: its name and the ID it got. A job
// ended and made again under the same name is another job, with another
// ID: every call that acts on a job takes its Ref and refuses (ErrNoJob)
// once that registration is gone, so that a handle kept on an ended job's
// file never reaches the next job of its name, whoever owns it.
type Ref struct {
	Name string
	ID   uint64
}

// Ref returns the job's reference.
func (in Info) Ref() Ref { return Ref{in.Name, in.ID} }

// Info is what the fs layer needs of a live job.
type Info struct {
	Name string
	// ID is unique for the life of the manager; the fs layer derives
	// inode numbers from it.
	ID uint64
	// Owner made the job; nil is root. The job's files are theirs, and
	// the job sees only the files they may open.
	Owner     *catalog.Cred
	WorldSize int
}

// job is a live job as the manager keeps it.
type job struct {
	id uint64
	// key names the job in the sampler and the views: its name and ID
	// (sampleKey), so that what they keep of an ended job is never the
	// next one's of its name.
	key   string
	owner *catalog.Cred
	cfg   Config
	vw    *views.Job // nil without views
	cl    *claimer   // nil unless cfg.Cluster
	// resumed is what the job last resumed from (nil: nothing since its
	// config was last written), for its status and to put it back when a
	// later resume is refused (m.mu).
	resumed *ResumePoint
}

// Manager is the set of jobs of one mount.
type Manager struct {
	o   Options
	p   *placement.Placer
	s   *sampler.Sampler
	log *zap.Logger
	// files are the dataset's files by Index (the sampler's samples):
	// numbered at start, grown by the files refreshes add (grow).
	filesp atomic.Pointer[catalog.Numbering]
	// base is the number of files numbered at start, in path order;
	// refreshes number the files they add after them.
	base   int
	growMu sync.Mutex // serialises grow, and grow with Configure (growMu, then mu)
	vs     *views.Set // nil without views
	bufs   views.Pool // batch buffers when Batch is given no Alloc

	mu   sync.Mutex
	jobs map[string]*job
	seq  uint64
	// moved is closed (and replaced) whenever a rank moves on, a rank or a
	// job goes, or a config changes: what a waiting rank waits for.
	moved   chan struct{}
	waiting map[rankKey]int // reads waiting for the slowest rank

	wake      chan struct{}
	ctx       context.Context
	stop      context.CancelFunc
	done      chan struct{}
	inflight  chan struct{} // semaphore of prefetches
	fetchWG   sync.WaitGroup
	ahead     chan *catalog.Entry // files to read ahead (readahead workers)
	closeOnce sync.Once
	bg        sync.WaitGroup  // cluster jobs leaving (cluster.go)
	cst       clusterCounters // cluster jobs' figures

	// built is set once files and s exist: at New, or once the catalog's
	// background walk has ended (start); ready is closed then.
	built    atomic.Bool
	ready    chan struct{}
	starting sync.WaitGroup
}

// ErrNotReady means the catalog is still being walked: jobs number the
// dataset's files, which needs the whole tree.
var ErrNotReady = errors.New("jobs: the source is still being walked; jobs can be created once it is (status: catalog=walking)")

// readaheadWorkers read files ahead in parallel: a cold file costs a few
// synchronous metadata reads before its data is even asked for, and one
// after another they would be slower than the batches they feed.
const readaheadWorkers = 16

// New builds a manager over the placer's catalog and starts its loop.
func New(o Options) (*Manager, error) {
	if o.Placer == nil {
		return nil, errors.New("jobs: no placer")
	}
	if o.Fetchers <= 0 {
		o.Fetchers = 8
	}
	if o.Interval <= 0 {
		o.Interval = 20 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		o: o, p: o.Placer, log: o.Logger, vs: o.Views,
		jobs: map[string]*job{}, moved: make(chan struct{}), waiting: map[rankKey]int{},
		wake: make(chan struct{}, 1), ctx: ctx, stop: cancel, done: make(chan struct{}),
		inflight: make(chan struct{}, o.Fetchers),
		ahead:    make(chan *catalog.Entry, 4096),
		ready:    make(chan struct{}),
	}
	select {
	case <-o.Placer.Ready():
		if err := m.start(); err != nil {
			cancel()
			return nil, err
		}
	default:
		// The catalog is walked or loaded in the background: the
		// manager starts once the tree is whole and the copies it
		// records are checked (the placer's gate, status catalog=ok),
		// so that a job's draws see every good copy; until then no job
		// can be created.
		// A walk that reads names first numbers the files before
		// their attributes are read (catalog.Named): there are no
		// copies yet to see, and the jobs start then.
		m.starting.Add(1)
		go func() {
			defer m.starting.Done()
			gate := make(chan error, 1)
			go func() { gate <- o.Placer.WaitReady(ctx) }()
			select {
			case <-o.Placer.Catalog().Named():
			case err := <-gate:
				if err != nil {
					return
				}
			}
			if err := m.start(); err != nil {
				m.log.Error("jobs cannot start", zap.Error(err))
			}
		}()
	}
	return m, nil
}

// start numbers the dataset's files, builds the sampler and starts the
// loop and the readahead workers.
func (m *Manager) start() error {
	o := m.o
	cat := o.Placer.Catalog()
	// The catalog's table of the files by number, shared, not copied.
	files := cat.Numbered()
	m.filesp.Store(&files)
	m.base = files.Len()
	slots := o.Placer.Buffer().Slots()
	so := sampler.Options{
		Samples: files.Len(),
		// The catalog's methods: the sampler asks placement, not a
		// closure of this package (no call goes back up).
		Residency:   residency(cat, o.PeerHeld),
		BufferSlots: slots,
		Lookahead:   o.Lookahead,
		Lease:       o.Lease,
		Now:         o.Now,
		Seed:        o.Seed,
		// A file a refresh removed keeps its number (Entry.Gone): the
		// sampler never hands it out.
		Gone: cat.SampleGone,
	}
	if m.vs != nil {
		so.Caches = m.vs
	}
	s, err := sampler.New(so)
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	m.s = s
	go m.loop()
	for range readaheadWorkers {
		m.fetchWG.Add(1)
		go func() {
			defer m.fetchWG.Done()
			for {
				select {
				case <-m.ctx.Done():
					return
				case e := <-m.ahead:
					m.p.Buffer().Readahead(e)
				}
			}
		}()
	}
	m.built.Store(true)
	close(m.ready)
	return nil
}

// readahead queues e to be read ahead; when the queue is full it is not.
func (m *Manager) readahead(e *catalog.Entry) {
	select {
	case m.ahead <- e:
	default:
	}
}

// Close stops the loop and waits for prefetches in flight.
func (m *Manager) Close() {
	m.closeOnce.Do(func() {
		m.stop()
		m.starting.Wait()
		if !m.built.Load() {
			return
		}
		<-m.done
		m.fetchWG.Wait()
		m.mu.Lock()
		for _, j := range m.jobs {
			m.leaveLater(j.cl)
			j.cl = nil
		}
		m.mu.Unlock()
		m.bg.Wait()
	})
}

// Sampler exposes the sampler (status and tests).
func (m *Manager) Sampler() *sampler.Sampler { return m.s }

// Register adds a job of the default config, owned by who (nil: root), and
// returns it. A job sees only the files its owner could list and read
// (placement.FilesAs): its subset, its batches and the answers to its config
// never name another file.
func (m *Manager) Register(name string, who *catalog.Cred) (Info, error) {
	if err := CheckName(name); err != nil {
		return Info{}, err
	}
	if !m.built.Load() {
		return Info{}, ErrNotReady
	}
	if !who.Root() {
		if err := m.attrsRead(); err != nil {
			return Info{}, err // WaitReadyAs waits for them
		}
	}
	cfg := DefaultConfig()
	// Over every file refreshes added so far (a refresh may have
	// replaced every file the mount started with), as configure does.
	m.grow()
	m.growMu.Lock()
	defer m.growMu.Unlock()
	sc, err := m.samplerConfig(name, cfg, who)
	if err != nil {
		return Info{}, err
	}
	jv, err := m.attachView(cfg, nil)
	if err != nil {
		return Info{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncLocked()
	if _, ok := m.jobs[name]; ok {
		jv.Release()
		return Info{}, fmt.Errorf("%w: %q", ErrExists, name)
	}
	if limit := m.maxJobsPerUser(); limit > 0 && !who.Root() {
		if n := m.jobsOfLocked(who.UID); n >= limit {
			jv.Release()
			return Info{}, fmt.Errorf("%w: uid %d has %d live jobs, the most one user may have (jobs end with rmdir, or when their lease runs out)", ErrTooMany, who.UID, n)
		}
	}
	if err := m.vs.TakeConsumer(jv); err != nil {
		jv.Release()
		return Info{}, err
	}
	j := &job{id: m.seq + 1, key: sampleKey(name, m.seq+1), owner: who, cfg: cfg}
	if err := m.s.RegisterJob(j.key, sc); err != nil {
		m.vs.FreeConsumer(jv)
		jv.Release()
		return Info{}, wrap(err)
	}
	m.seq++
	m.jobs[name] = j
	if jv != nil {
		m.installViewLocked(j, jv)
	}
	// The loop ticks again (its leases, the buffer's grace periods).
	m.wakeUp()
	return j.info(name), nil
}

func (m *Manager) maxJobsPerUser() int {
	if m.o.MaxJobsPerUser == 0 {
		return DefaultMaxJobsPerUser
	}
	return m.o.MaxJobsPerUser
}

// jobsOfLocked counts the live jobs of uid (m.mu held).
func (m *Manager) jobsOfLocked(uid uint32) int {
	n := 0
	for _, j := range m.jobs {
		if !j.owner.Root() && j.owner.UID == uid {
			n++
		}
	}
	return n
}

// JobsByUser counts the live jobs of each owner (root's under uid 0).
func (m *Manager) JobsByUser() map[uint32]int {
	if !m.built.Load() {
		return map[uint32]int{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncLocked()
	out := map[uint32]int{}
	for _, j := range m.jobs {
		uid := uint32(0)
		if !j.owner.Root() {
			uid = j.owner.UID
		}
		out[uid]++
	}
	return out
}

// sampleKey is the name of job name's registration id in the sampler and
// the views ('#' is not in job names: CheckName).
func sampleKey(name string, id uint64) string { return name + "#" + strconv.FormatUint(id, 10) }

// nameOf is the job name of a sampler key.
func nameOf(key string) string { return key[:strings.LastIndexByte(key, '#')] }

// jobOf returns the live job ref names (ErrNoJob once that registration
// has ended, whatever job has the name now).
func (m *Manager) jobOf(ref Ref) (*job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.jobOfLocked(ref)
}

func (m *Manager) jobOfLocked(ref Ref) (*job, error) {
	m.syncLocked()
	if j, ok := m.jobs[ref.Name]; ok && j.id == ref.ID {
		return j, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrNoJob, ref.Name)
}

func (j *job) info(name string) Info {
	return Info{Name: name, ID: j.id, Owner: j.owner, WorldSize: j.cfg.WorldSize}
}

// Config returns the job's config document.
func (m *Manager) Config(ref Ref) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, err := m.jobOfLocked(ref)
	if err != nil {
		return nil, err
	}
	return j.cfg.Format(), nil
}

// End removes a job (rmdir).
func (m *Manager) End(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.movedLocked()
	m.syncLocked()
	j, ok := m.jobs[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoJob, name)
	}
	delete(m.jobs, name)
	m.dropViewLocked(j)
	m.leaveLater(j.cl)
	if err := m.s.EndJob(j.key); err != nil && !errors.Is(err, sampler.ErrNoJob) && !errors.Is(err, sampler.ErrLeaseExpired) {
		return wrap(err)
	}
	m.wakeUp()
	return nil
}

// Lookup returns a live job.
func (m *Manager) Lookup(name string) (Info, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncLocked()
	j, ok := m.jobs[name]
	if !ok {
		return Info{}, false
	}
	return j.info(name), true
}

// List returns the live jobs in registration order.
func (m *Manager) List() []Info {
	if !m.built.Load() {
		return nil // no job before the manager starts
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncLocked()
	var out []Info
	for _, key := range m.s.Jobs() {
		name := nameOf(key)
		if j, ok := m.jobs[name]; ok && j.key == key {
			out = append(out, j.info(name))
		}
	}
	return out
}

// Jobs returns the live jobs' names in registration order.
func (m *Manager) Jobs() []string {
	var names []string
	for _, in := range m.List() {
		names = append(names, in.Name)
	}
	return names
}

// syncLocked forgets jobs the sampler dropped for their lease.
func (m *Manager) syncLocked() {
	if !m.built.Load() {
		return // no job yet
	}
	live := m.s.Jobs()
	if len(live) == len(m.jobs) {
		return
	}
	set := make(map[string]bool, len(live))
	for _, n := range live {
		set[n] = true
	}
	for n, j := range m.jobs {
		if !set[j.key] {
			delete(m.jobs, n)
			m.dropViewLocked(j)
			m.leaveLater(j.cl)
		}
	}
	m.movedLocked()
}

// movedLocked wakes the ranks waiting for others to move on.
func (m *Manager) movedLocked() {
	close(m.moved)
	m.moved = make(chan struct{})
}

// Stats are the manager's figures for the mount's status.
type Stats struct {
	Jobs int
	// Cluster jobs: epochs drawn locally after a claim failed, waits
	// for a rank two epochs behind given up after the lease, ends of
	// epochs the cluster did not record.
	ClaimFallbacks, AheadTimeouts, EndErrors int64
}

// Stats returns the live job count and the cluster jobs' figures.
func (m *Manager) Stats() Stats {
	if !m.built.Load() {
		return Stats{}
	}
	return Stats{Jobs: len(m.Jobs()), ClaimFallbacks: int64(m.s.Stats().ClaimFallbacks),
		AheadTimeouts: m.cst.aheadTimeouts.Load(), EndErrors: m.cst.endErrors.Load()}
}

// MountStatus fills the jobs' section of the mount's status: the live
// jobs, and each user's.
func (m *Manager) MountStatus(d *status.Doc) {
	d.Int("jobs", int64(len(m.Jobs())))
	byUser := m.JobsByUser()
	uids := make([]uint32, 0, len(byUser))
	for uid := range byUser {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	for _, uid := range uids {
		d.Int("jobs.uid."+strconv.FormatUint(uint64(uid), 10), int64(byUser[uid]))
	}
}

// residency is the catalog as the sampler's Residency, and with peerHeld
// a PeerResidency.
func residency(cat *catalog.Catalog, peerHeld func(int) bool) sampler.Residency {
	if peerHeld == nil {
		return cat
	}
	return peerResidency{cat, peerHeld}
}

type peerResidency struct {
	*catalog.Catalog
	held func(int) bool
}

func (r peerResidency) PeerHeld(i int) bool { return r.held(i) }
