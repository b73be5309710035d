// Package jobs connects the sampler to the mount: it names the training
// jobs of .epochfs/jobs/, turns their sample indices into dataset paths,
// and runs the shared buffer for them. Indices are the catalog's file
// numbers (placement.Entry.Index, path order).
//
// A background loop, every Options.Interval and whenever a batch is handed
// out, reaps expired leases, applies the sampler's releases to the
// buffer, and asks the sampler what to prefetch (up to Options.Fetchers
// fetches in flight): the placer reads those files whole into the buffer,
// and each is reported Installed or Failed. A released entry is not dropped
// at once: the job that consumed it last reads it right after Next, so the
// buffer keeps it until its room is needed or its grace period ends
// (placement.Placer.Release). A demand read of a file that fits no tier is
// offered to the sampler through placement's OnFetched hook.
//
// Lock order: Manager.mu, then the sampler's lock (the sampler never calls
// back into the manager with its lock held).
package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/epochfs/epochfs/ctlpath"
	"github.com/epochfs/epochfs/placement"
	"github.com/epochfs/epochfs/sampler"
	"go.uber.org/zap"
)

// Errors the fs layer maps to errnos.
var (
	// ErrInvalid marks bad input (a job name or config): EINVAL.
	ErrInvalid = errors.New("jobs: invalid")
	// ErrExists: a job of that name is live (EEXIST).
	ErrExists = errors.New("jobs: job exists")
	// ErrNoJob: no live job of that name (ENOENT).
	ErrNoJob = errors.New("jobs: no such job")
	// ErrTooMany: sampler.MaxJobs jobs are live (ENOSPC).
	ErrTooMany = errors.New("jobs: too many jobs")
)

// DefaultBatchSize is a job's batch size until its config sets one.
const DefaultBatchSize = 32

// MaxNameLen bounds a job name.
const MaxNameLen = 64

// Options configure a Manager.
type Options struct {
	Placer *placement.Placer
	// BufferBytes is the shared buffer's budget (the placer's
	// Options.BufferBytes); the sampler's BufferSlots is this divided by
	// the catalog's mean file size.
	BufferBytes int64
	Lookahead   int           // batches drawn ahead per job (sampler default when 0)
	Lease       time.Duration // sampler.Options.Lease
	Fetchers    int           // prefetches in flight (default 8)
	Interval    time.Duration // loop period (default 20 ms)
	Seed        uint64
	Now         func() time.Time
	Logger      *zap.Logger
}

// Manager is the set of jobs of one mount.
type Manager struct {
	o     Options
	p     *placement.Placer
	s     *sampler.Sampler
	log   *zap.Logger
	files []*placement.Entry // by index

	mu     sync.Mutex
	cfgs   map[string]sampler.JobConfig // live jobs' configs as written
	ids    map[string]uint64            // live jobs' ids (for inode numbers)
	owners map[string]*placement.Cred   // live jobs' owners
	seq    uint64

	wake      chan struct{}
	ctx       context.Context
	stop      context.CancelFunc
	done      chan struct{}
	inflight  chan struct{} // semaphore of prefetches
	fetchWG   sync.WaitGroup
	closeOnce sync.Once
}

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
	cat := o.Placer.Catalog()
	files := make([]*placement.Entry, 0, cat.Files())
	cat.Root().Files(func(e *placement.Entry) bool {
		files = append(files, e)
		return true
	})
	slots := 0
	if len(files) > 0 && o.BufferBytes > 0 {
		mean := max(cat.Bytes()/int64(len(files)), 1)
		// A quarter of the budget is headroom for what the sampler does
		// not count: demand fetches before it is asked, released entries
		// in their grace period, dropped entries still being read.
		slots = int(min(o.BufferBytes*3/4/mean, int64(len(files))))
	}
	s, err := sampler.New(sampler.Options{
		Samples:     len(files),
		Residency:   sampler.ResidencyFunc(func(i int) bool { return files[i].Tier() >= 0 }),
		BufferSlots: slots,
		Lookahead:   o.Lookahead,
		Lease:       o.Lease,
		Now:         o.Now,
		Seed:        o.Seed,
	})
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		o: o, p: o.Placer, s: s, log: o.Logger, files: files,
		cfgs: map[string]sampler.JobConfig{}, ids: map[string]uint64{}, owners: map[string]*placement.Cred{},
		wake: make(chan struct{}, 1), ctx: ctx, stop: cancel, done: make(chan struct{}),
		inflight: make(chan struct{}, o.Fetchers),
	}
	if slots > 0 {
		m.p.SetDemandHook(&placement.DemandHook{Wanted: m.wanted, Keep: m.onFetched})
	}
	go m.loop()
	return m, nil
}

// Close stops the loop and waits for prefetches in flight.
func (m *Manager) Close() {
	m.closeOnce.Do(func() {
		m.p.SetDemandHook(nil)
		m.stop()
		<-m.done
		m.fetchWG.Wait()
	})
}

// Sampler exposes the sampler (status and tests).
func (m *Manager) Sampler() *sampler.Sampler { return m.s }

// CheckName validates a job name: 1..64 of [A-Za-z0-9._-], not "." or "..".
func CheckName(name string) error {
	if name == "" || len(name) > MaxNameLen || name == "." || name == ".." {
		return fmt.Errorf("%w: job name %q: want 1-%d letters, digits, '.', '_' or '-', not . or ..", ErrInvalid, clip(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: job name %q: want 1-%d letters, digits, '.', '_' or '-', not . or ..", ErrInvalid, clip(name), MaxNameLen)
		}
	}
	return nil
}

// defaultConfig is a new job's config.
func defaultConfig() sampler.JobConfig {
	return sampler.JobConfig{BatchSize: DefaultBatchSize, Kind: sampler.KindODS}
}

// Register adds a job with the default config (batch_size=32, seed=0,
// sampler=ods, every sample), owned by root.
func (m *Manager) Register(name string) error { return m.RegisterAs(name, nil) }

// RegisterAs adds a job owned by who. A job sees only the files its owner
// could list and read (placement.FilesAs): its subset, its next batches
// and the answers to its config never name another file.
func (m *Manager) RegisterAs(name string, who *placement.Cred) error {
	if err := CheckName(name); err != nil {
		return err
	}
	cfg := defaultConfig()
	var err error
	if cfg.Subset, err = m.resolve(nil, who); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncLocked()
	if _, ok := m.cfgs[name]; ok {
		return fmt.Errorf("%w: %q", ErrExists, name)
	}
	if err := m.s.RegisterJob(name, cfg); err != nil {
		return m.mapErr(err)
	}
	m.seq++
	cfg.Subset = nil
	m.cfgs[name], m.ids[name], m.owners[name] = cfg, m.seq, who
	return nil
}

// Configure replaces a job's config with the key=value text data (keys
// not given take a new job's defaults). The job starts over at epoch 1.
// A bad config changes nothing.
func (m *Manager) Configure(name string, data []byte) error {
	cfg, err := sampler.ParseJobConfig(data)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, trimPrefix(err))
	}
	if !hasKey(data, "batch_size") {
		cfg.BatchSize = DefaultBatchSize
	}
	m.mu.Lock()
	who, ok := m.owners[name]
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoJob, name)
	}
	if cfg.Subset, err = m.resolve(cfg.SubsetPrefixes, who); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncLocked()
	if _, ok := m.cfgs[name]; !ok {
		return fmt.Errorf("%w: %q", ErrNoJob, name)
	}
	if err := m.s.EndJob(name); err != nil && !errors.Is(err, sampler.ErrNoJob) && !errors.Is(err, sampler.ErrLeaseExpired) {
		return m.mapErr(err)
	}
	if err := m.s.RegisterJob(name, cfg); err != nil {
		// The old job is gone; keep the name registered with its old
		// config so that the directory stays consistent.
		old := m.cfgs[name]
		old.Subset, _ = m.resolve(old.SubsetPrefixes, who)
		if rerr := m.s.RegisterJob(name, old); rerr != nil {
			delete(m.cfgs, name)
			delete(m.ids, name)
			delete(m.owners, name)
		}
		return m.mapErr(err)
	}
	cfg.Subset = nil
	m.cfgs[name] = cfg
	m.wakeUp()
	return nil
}

// resolve maps subset prefixes (dataset paths, quoted by package ctlpath
// when they are not plain lines) to the sample indices of the files under
// them that who could list and read; no prefix is every such file (nil for
// root: every sample). A prefix that names nothing who could open is an
// error, the same whether it does not exist or is hidden from who.
func (m *Manager) resolve(prefixes []string, who *placement.Cred) ([]int, error) {
	var out []int
	add := func(e *placement.Entry) bool {
		if i := int(e.Index); i >= 0 && i < len(m.files) && m.files[i] == e {
			out = append(out, i)
		}
		return true
	}
	if len(prefixes) == 0 {
		if who.Root() {
			return nil, nil
		}
		for _, e := range m.p.FilesAs(who) {
			add(e)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: no dataset file is readable by the job's owner (%v)", ErrInvalid, who)
		}
		return out, nil
	}
	for _, raw := range prefixes {
		pre, err := ctlpath.Unquote(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: subset=%q: %v", ErrInvalid, clip(raw), err)
		}
		n := len(out)
		files, err := m.p.ResolvePathsAs(who, []string{pre})
		if err == nil {
			for _, e := range files {
				add(e)
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("%w: subset=%q matches no dataset file", ErrInvalid, clip(raw))
		}
	}
	return out, nil
}

// Config returns the job's config as key=value lines.
func (m *Manager) Config(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncLocked()
	cfg, ok := m.cfgs[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoJob, name)
	}
	return []byte(cfg.Format()), nil
}

// Next returns the job's next batch as dataset-relative paths, one per
// line, quoted by package ctlpath when they are not plain lines. At the end of an epoch it returns (nil, true, nil) once; the next
// call starts the next epoch.
func (m *Manager) Next(name string) (paths []byte, endOfEpoch bool, err error) {
	batch, end, err := m.s.Next(name)
	if err != nil {
		return nil, false, m.mapErr(err)
	}
	// Releases first: a released entry stays readable for its grace
	// period, so the reader that comes after this call still hits it.
	m.applyReleases()
	m.wakeUp()
	if end {
		return nil, true, nil
	}
	var b bytes.Buffer
	for _, i := range batch {
		b.WriteString(ctlpath.Quote(m.files[i].Path))
		b.WriteByte('\n')
	}
	return b.Bytes(), false, nil
}

// Status returns the job's status file.
func (m *Manager) Status(name string) ([]byte, error) {
	st, err := m.s.Status(name)
	if err != nil {
		return nil, m.mapErr(err)
	}
	return []byte(st.Format()), nil
}

// End removes a job (rmdir).
func (m *Manager) End(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncLocked()
	if _, ok := m.cfgs[name]; !ok {
		return fmt.Errorf("%w: %q", ErrNoJob, name)
	}
	delete(m.cfgs, name)
	delete(m.ids, name)
	delete(m.owners, name)
	if err := m.s.EndJob(name); err != nil && !errors.Is(err, sampler.ErrNoJob) && !errors.Is(err, sampler.ErrLeaseExpired) {
		return m.mapErr(err)
	}
	m.wakeUp()
	return nil
}

// Job reports whether name is a live job, and its id (unique for the life
// of the manager; the fs layer derives inode numbers from it).
func (m *Manager) Job(name string) (id uint64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncLocked()
	id, ok = m.ids[name]
	return id, ok
}

// Jobs returns the live jobs' names in registration order.
func (m *Manager) Jobs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.syncLocked()
	return m.s.Jobs()
}

// syncLocked forgets jobs the sampler dropped for their lease.
func (m *Manager) syncLocked() {
	live := m.s.Jobs()
	if len(live) == len(m.cfgs) {
		return
	}
	set := make(map[string]bool, len(live))
	for _, n := range live {
		set[n] = true
	}
	for n := range m.cfgs {
		if !set[n] {
			delete(m.cfgs, n)
			delete(m.ids, n)
			delete(m.owners, n)
		}
	}
}

func (m *Manager) mapErr(err error) error {
	switch {
	case errors.Is(err, sampler.ErrNoJob), errors.Is(err, sampler.ErrLeaseExpired):
		return fmt.Errorf("%w: %v", ErrNoJob, trimPrefix(err))
	case errors.Is(err, sampler.ErrJobExists):
		return fmt.Errorf("%w: %v", ErrExists, trimPrefix(err))
	case errors.Is(err, sampler.ErrTooManyJobs):
		return fmt.Errorf("%w: %v", ErrTooMany, trimPrefix(err))
	case errors.Is(err, sampler.ErrBadConfig):
		return fmt.Errorf("%w: %v", ErrInvalid, trimPrefix(err))
	}
	return fmt.Errorf("jobs: %w", err)
}

func (m *Manager) wakeUp() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *Manager) loop() {
	defer close(m.done)
	t := time.NewTicker(m.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
			if len(m.s.Reap()) > 0 {
				m.mu.Lock()
				m.syncLocked()
				m.mu.Unlock()
			}
			m.p.Sweep()
		case <-m.wake:
		}
		m.applyReleases()
		m.prefetch()
	}
}

func (m *Manager) applyReleases() {
	for _, i := range m.s.Releases(nil) {
		m.p.Release(m.files[i])
	}
}

// prefetch starts as many fetches as there are free slots.
func (m *Manager) prefetch() {
	free := cap(m.inflight) - len(m.inflight)
	if free <= 0 {
		return
	}
	for _, i := range m.s.Prefetch(free) {
		m.inflight <- struct{}{}
		m.fetchWG.Add(1)
		e := m.files[i]
		m.p.Fetch(e, func(err error) {
			defer m.fetchWG.Done()
			if err != nil {
				m.s.Failed(i)
			} else if !m.s.Installed(i) {
				// Every job was handed it while it was being fetched:
				// their readers are on their way.
				m.p.Release(e)
			}
			<-m.inflight
			m.wakeUp()
		})
	}
}

// onFetched is placement's hook for a demand read that buffered a file.
// wanted reports whether a live job still wants e this epoch: only then
// does a demand read of a file that fits no tier go through the buffer.
func (m *Manager) wanted(e *placement.Entry) bool {
	return e.Index >= 0 && int(e.Index) < len(m.files) && m.s.Wanted(int(e.Index))
}

func (m *Manager) onFetched(e *placement.Entry) bool {
	if e.Index < 0 || int(e.Index) >= len(m.files) {
		return false
	}
	return m.s.Installed(int(e.Index))
}

// Stats are the manager's figures for the mount's status.
type Stats struct {
	Jobs int
}

// Stats returns the live job count.
func (m *Manager) Stats() Stats { return Stats{Jobs: len(m.Jobs())} }

// hasKey reports whether the config text sets key.
func hasKey(data []byte, key string) bool {
	for _, line := range bytes.Split(data, []byte("\n")) {
		k, _, ok := bytes.Cut(line, []byte("="))
		if ok && string(bytes.TrimSpace(k)) == key {
			return true
		}
	}
	return false
}

// trimPrefix drops the "sampler: bad job config: " prefix of a sampler
// error, which the caller rewraps.
func trimPrefix(err error) string {
	s := err.Error()
	for _, p := range []string{"sampler: bad job config: ", "sampler: "} {
		if strings.HasPrefix(s, p) {
			return s[len(p):]
		}
	}
	return s
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
