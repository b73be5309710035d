// Package daemon assembles one epochfs mount and takes it down again. The
// CLI's daemon (`epochfs mount`) and the mount tests build their mounts
// with New, so the tests run the production wiring.
//
// A Mount's life, in order: take STATE/daemon.lock (before anything in the
// state directory or the tiers is touched: a daemon still draining them
// owns them), listen for metrics (a bad address fails before anything is
// mounted), open the tiers, the catalog, the source, the placer and the
// jobs manager, mount, write the runtime record (record.go). Close undoes
// it: unmount if the mount is still there (lazily if files are open, then
// waiting for them up to the shutdown deadline), close the jobs manager,
// the placer and the catalog within that deadline (shutdown.go), stop the
// metrics server, remove the record, drop the lock.
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/epochfs/epochfs/internal/cluster"
	"github.com/epochfs/epochfs/internal/cluster/peer"
	"github.com/epochfs/epochfs/internal/fs"
	"github.com/epochfs/epochfs/internal/jobs"
	"github.com/epochfs/epochfs/internal/metrics"
	"github.com/epochfs/epochfs/internal/model"
	"github.com/epochfs/epochfs/internal/model/split"
	"github.com/epochfs/epochfs/internal/mounts"
	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/preprocess"
	"github.com/epochfs/epochfs/internal/source"
	"github.com/epochfs/epochfs/internal/status"
	"github.com/epochfs/epochfs/internal/tier"
	"github.com/epochfs/epochfs/internal/views"
)

// Errors of New and Close. Callers map them to exit codes with errors.Is.
var (
	// ErrConfig marks an error in what the caller asked for (a tier that
	// cannot be used, a state directory of another source): exit 2.
	ErrConfig = errors.New("daemon: configuration")
	// ErrStateInUse: another live daemon holds the state directory
	// (mounts.ErrStateInUse).
	ErrStateInUse = mounts.ErrStateInUse
	// ErrShutdownStuck: a close did not finish within the shutdown
	// deadline and was abandoned.
	ErrShutdownStuck = errors.New("shutdown")
	// ErrMount: the kernel mount itself failed (for a user other than
	// root, fusermount3 refused it and said why on stderr).
	ErrMount = errors.New("daemon: mount")
)

// configError marks err as ErrConfig while keeping its own chain.
type configError struct{ err error }

func (e *configError) Error() string        { return e.err.Error() }
func (e *configError) Unwrap() error        { return e.err }
func (e *configError) Is(target error) bool { return target == ErrConfig }

// Options describe one mount. Only Source, Mountpoint, StateDir and Tiers
// are required.
type Options struct {
	Source     string // absolute path of the dataset on the shared file system
	Mountpoint string
	StateDir   string         // the catalog and daemon.lock live here
	Tiers      []tier.Options // fastest first
	Rescan     bool           // walk the source even if the catalog is complete
	Progress   func(int64)    // called during a walk with the entries seen
	// WaitWalk walks the source (or loads the stored catalog) before New
	// returns (mount --wait-walk); otherwise the mount serves while the
	// source is walked or the catalog loaded (catalog.Options.Background),
	// unless the model splits the memory (model.memory_budget), which
	// needs the dataset's counts.
	WaitWalk bool
	// WalkNames makes a first mount's background walk read every
	// directory's names before the attributes (catalog.Options.NamesFirst).
	WalkNames bool
	// LoadHold holds a background load of the stored catalog until it is
	// closed (catalog.Options.LoadHold; tests).
	LoadHold <-chan struct{}
	// FirstID starts the catalog's entry IDs (the inode numbers) past it
	// (catalog.Options.FirstID; tests).
	FirstID uint64

	// Each package's own options, as the caller sets them. New fills in
	// what it wires itself, over what they hold: the source's root, logger
	// and hooks (its Patience applies only to a source an earlier mount
	// knew); the placer's catalog, source, tiers, remote and logger; the
	// jobs manager's placer, views, cluster and logger; the FUSE layer's
	// placer, jobs, views, paths, logger and status.
	SourceOptions source.Options    // Bandwidth, Timeout, Patience
	Placement     placement.Options // Workers, validation, refresh, drops, warmup bound, buffer, kept copies
	Jobs          jobs.Options      // Lookahead, Lease, MaxJobsPerUser
	FUSE          fs.Options        // NoPassthrough, Prewarm, IoUring, Readers, DocBudget, Version
	Metrics       MetricsOptions

	// ModelSettings is the [model] section. With a memory budget, the
	// DSI model splits it (internal/model/split): a tier whose Quota is 0 takes the
	// encoded share, caches without budgets of their own take theirs.
	// .epochfs/model shows the decision and what was applied; nil leaves
	// the file out.
	ModelSettings *model.Settings
	// Views, if set, serves the preprocessed views (.epochfs/views/).
	Views *views.Config
	// Cluster, if set, is the Redis Cluster the nodes of a job share
	// (cluster.go): a cluster tier between the local tiers and the source.
	// A cluster that cannot be used fails New with ErrConfig.
	Cluster *cluster.Options
	// PeerListen is where this node serves its copies to its peers
	// (cluster data = "peers"; Cluster.PeerAdvertise is where they reach
	// it, by default the address listened at: a port 0 takes a free one).
	PeerListen string
	// PeerTLS, if set, serves and reads the peers over TLS.
	PeerTLS peer.TLSFiles
	// ShutdownTimeout bounds Close (DefaultShutdownTimeout if 0).
	ShutdownTimeout time.Duration
	// RuntimeDir, if set, is where the runtime record is written (the
	// CLI's daemon: mounts.RuntimeDir()); ConfigID is recorded in it.
	RuntimeDir string
	ConfigID   string
	Logger     *zap.Logger
}

// MetricsOptions configure the metrics endpoint.
type MetricsOptions struct {
	// Listen is the endpoint's address (host:port); "" serves none.
	Listen string
	// Pprof also serves Go's profiles there.
	Pprof bool
}

// Mount is one assembled, mounted dataset.
type Mount struct {
	o       Options
	log     *zap.Logger
	lock    *mounts.StateLock
	steps   []step // closed by Close, last first
	cat     *catalog.Catalog
	src     *source.Source
	p       *placement.Placer
	placer  atomic.Pointer[placement.Placer] // p, for the source's hook
	jm      *jobs.Manager
	fsys    *fs.FS
	met     *metrics.Metrics
	engine  *preprocess.Engine
	view    *preprocess.View
	split   *split.Split
	cl      *cluster.Cluster
	peerSrv *peer.Server
	peerTLS *tls.Config // the peer server's, or nil
	// census is the peers' census of the dataset (peers.go).
	censusMu sync.Mutex
	census   census
	// sharePasses counts the passes that queued this node's share.
	sharePasses atomic.Int64
	metSrv      *metrics.Server
	dev         string
	rec         mounts.Record
	recPath     string
	done        chan struct{} // closed when the kernel mount is gone

	closeOnce sync.Once
	closeErr  error
	owners    sync.Map // uid → user name, for the metrics' owner label
}

// New takes the state directory, assembles the mount and mounts it. It
// returns once the kernel answers requests on the mount point. On error
// everything it opened is closed again.
//
// Long: the daemon is wired in one place, so that its runtime graph reads top to bottom in one function.
func New(ctx context.Context, o Options) (_ *Mount, err error) {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	m := &Mount{o: o, log: o.Logger, done: make(chan struct{})}
	if err := tier.SecureDir(o.StateDir); err != nil {
		return nil, &configError{fmt.Errorf("daemon: state directory: %w", err)}
	}
	if m.lock, err = mounts.LockState(o.StateDir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			m.teardown()
		}
	}()
	if o.Metrics.Listen != "" {
		m.met = metrics.New(metrics.Options{Status: m.statusDoc, Jobs: m.jobList, Logger: o.Logger})
		if m.metSrv, err = m.met.Listen(o.Metrics.Listen, o.Metrics.Pprof); err != nil {
			return nil, fmt.Errorf("daemon: %w", err)
		}
	}
	peerL, err := m.listenPeers()
	if err != nil {
		return nil, err
	}
	if err := m.openCluster(ctx); err != nil {
		if peerL != nil {
			peerL.Close()
		}
		return nil, err
	}
	if err := m.startPeerServer(peerL); err != nil {
		return nil, err
	}
	var names []string
	for _, to := range o.Tiers {
		names = append(names, to.Name)
	}
	// The source first: the walk reads through its root descriptor, and
	// the model measures the pipeline on a few of its files.
	// A source an earlier mount knew may be sick now: the mount serves
	// what that mount left and finds the source in the background.
	sopts := o.SourceOptions
	sopts.Root, sopts.Logger, sopts.OnNewMount, sopts.ProbeInterval = o.Source, o.Logger, m.sourceMountedAgain, sourceProbe
	sopts.Expect = nil
	if id, ok := LastSourceID(o.StateDir, o.Source); ok {
		sopts.Expect = &id
	} else {
		sopts.Patience = 0
	}
	m.src, err = source.Open(sopts)
	if err != nil {
		return nil, &configError{fmt.Errorf("daemon: %w", err)}
	}
	m.steps = append(m.steps, step{what: "the source's root", close: m.src.Close, always: true})
	id, found := m.src.Identity()
	if found {
		if err := saveSourceID(o.StateDir, o.Source, id); err != nil {
			m.log.Warn("the source's identity is not kept: a later mount whose source does not answer cannot start", zap.Error(err))
		}
	}
	// The catalog next: the model splits the memory by its counts, and
	// a tier's quota may be the model's share.
	copts := catalog.Options{
		StateDir: o.StateDir, Source: o.Source, Walker: m.src, Tiers: names, Rescan: o.Rescan,
		Workers: 16, Logger: o.Logger, Progress: o.Progress,
		Background: !o.WaitWalk && (o.ModelSettings == nil || o.ModelSettings.MemoryBudget == nil),
		Offline:    !found, LoadHold: o.LoadHold, FirstID: o.FirstID, NamesFirst: o.WalkNames,
	}
	if m.cl != nil {
		copts.Shared = m.sharedWalk
	}
	m.cat, err = catalog.Open(ctx, copts)
	if err != nil {
		if errors.Is(err, catalog.ErrOtherSource) || errors.Is(err, catalog.ErrNoCatalog) {
			return nil, &configError{fmt.Errorf("daemon: %w", err)}
		}
		return nil, fmt.Errorf("daemon: %w", err)
	}
	m.steps = append(m.steps, step{what: "the catalog (sync and close)", close: m.cat.Close, always: true})
	m.split = split.Decide(ctx, split.Options{Settings: o.ModelSettings, Catalog: m.cat, Source: m.src, Tiers: o.Tiers, Views: splitViews(o.Views),
		Logger: o.Logger})
	topts, err := m.split.TierQuotas(o.Tiers)
	if err != nil {
		return nil, &configError{fmt.Errorf("daemon: %w", err)}
	}
	var tiers []*tier.Tier
	owner := &tier.Owner{StateDir: o.StateDir, Source: o.Source, Mountpoint: o.Mountpoint}
	if abs, err := filepath.Abs(o.StateDir); err == nil {
		owner.StateDir = abs
	}
	for _, to := range topts {
		to.Owner = owner
		t, err := tier.Open(to)
		if err != nil {
			return nil, &configError{fmt.Errorf("daemon: %w", err)}
		}
		tiers = append(tiers, t)
	}
	po := o.Placement
	po.Catalog, po.Source, po.Tiers, po.Logger, po.Remote, po.ObserveOpen = m.cat, m.src, tiers, o.Logger, nil, nil
	switch {
	case m.cl != nil && m.cl.Peers():
		po.Remote = peersRemote{m.cl}
	case m.cl != nil:
		po.Remote = clusterRemote{m.cl}
	}
	if m.met != nil {
		po.ObserveOpen = m.met.ObserveOpen
		m.src.Limiter().SetObserver(m.met.ObserveSourceRead)
	}
	if m.p, err = placement.New(po); err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	m.placer.Store(m.p)
	m.steps = append(m.steps, step{what: "the placer (copies in progress, reading the source)",
		close: func() error { m.p.Close(); return nil }})
	m.startSharePasses()
	var vset *views.Set
	if o.Views != nil {
		dec, aug := m.split.CacheBudgets(splitViews(o.Views))
		if err := m.startViews(o.Views, dec, aug); err != nil {
			return nil, err
		}
		vset = views.NewSet(views.Options{Engine: m.engine, Pipeline: o.Views.Pipeline, MaxBatchBytes: o.Views.MaxBatchBytes,
			Placer: m.p, Logger: o.Logger})
	}
	jo := o.Jobs
	jo.Placer, jo.Logger, jo.Views, jo.Cluster = m.p, o.Logger, vset, nil
	if m.cl != nil {
		jo.Cluster = clusterJobs{m.cl}
	}
	if m.cl != nil && m.cl.Peers() {
		jo.PeerHeld = m.peerHeld
	}
	m.jm, err = jobs.New(jo)
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	// Every hook is installed here, where the runtime graph is built: a
	// setter holds one subscriber (a second one panics).
	demand, finished := m.jm.Hooks()
	if demand != nil {
		m.p.Buffer().SetDemandHook(demand)
	}
	if finished != nil && m.engine != nil {
		m.engine.OnFinish(finished)
	}
	m.steps = append(m.steps, step{what: "the jobs manager (prefetches in flight, reading the source)",
		close: func() error { m.p.Buffer().SetDemandHook(nil); m.jm.Close(); return nil }})
	fo := o.FUSE
	fo.Placer, fo.Source, fo.Mountpoint, fo.Logger, fo.Jobs = m.p, o.Source, o.Mountpoint, o.Logger, m.jm
	fo.Views, fo.MoreStatus, fo.Model = nil, nil, nil
	if m.view != nil {
		fo.Views = m.view
	}
	if m.cl != nil {
		fo.MoreStatus = m.clusterStatus
	}
	if o.ModelSettings != nil {
		text := m.split.Text()
		fo.Model = func() []byte { return text }
	}
	fsys, err := fs.Mount(fo)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMount, err)
	}
	m.fsys = fsys
	m.p.SetNotify(fsys.OnEvent)
	m.steps = append(m.steps, step{what: "the kernel's notifications", close: func() error { m.p.SetNotify(nil); return nil }})
	go func() { fsys.Wait(); close(m.done) }()
	m.dev, _ = mounts.MountDev(o.Mountpoint)
	go m.watchHolders()
	if o.RuntimeDir != "" {
		m.rec = mounts.Record{PID: os.Getpid(), Start: mounts.ProcStart(os.Getpid()), StateDir: o.StateDir,
			Mountpoint: o.Mountpoint, Dev: m.dev, Source: o.Source, Config: o.ConfigID}
		if m.metSrv != nil {
			m.rec.Metrics = m.metSrv.Addr()
		}
		if path, rerr := mounts.WriteRecord(o.RuntimeDir, m.rec); rerr != nil {
			o.Logger.Warn("cannot write the runtime record; 'epochfs unmount' finds this daemon through its status only", zap.Error(rerr))
		} else {
			m.recPath = path
		}
	}
	return m, nil
}

// FS is the mounted file system.
func (m *Mount) FS() *fs.FS { return m.fsys }

// Placer is the mount's placer.
func (m *Mount) Placer() *placement.Placer { return m.p }

// Catalog is the mount's catalog.
func (m *Mount) Catalog() *catalog.Catalog { return m.cat }

// Source is the mount's source.
func (m *Mount) Source() *source.Source { return m.src }

// Jobs is the mount's jobs manager.
func (m *Mount) Jobs() *jobs.Manager { return m.jm }

// MetricsAddr is the metrics endpoint's address, "" without one.
func (m *Mount) MetricsAddr() string {
	if m.metSrv == nil {
		return ""
	}
	return m.metSrv.Addr()
}

// Done is closed once the kernel mount is gone (unmounted here or from
// outside) and the FUSE server has stopped.
func (m *Mount) Done() <-chan struct{} { return m.done }

// Unmount unmounts the mount; it fails (EBUSY) while files are open.
func (m *Mount) Unmount() error {
	if err := m.fsys.Unmount(); err != nil {
		return fmt.Errorf("daemon: unmount %s: %w", m.o.Mountpoint, err)
	}
	return nil
}

// Close takes the mount down (see the package comment) and returns the
// first error; an abandoned close matches ErrShutdownStuck. It is safe to
// call more than once.
func (m *Mount) Close() error {
	m.closeOnce.Do(func() {
		select {
		case <-m.done:
		default:
			m.stopMount()
			select {
			case <-m.done:
			case <-time.After(m.o.ShutdownTimeout):
				// Open files keep a detached mount alive; Close asks the
				// mount to go, so it goes, and their reads fail from now on.
				m.log.Warn("files are still open on the detached mount; exiting anyway", zap.Duration("after", m.o.ShutdownTimeout))
			}
		}
		m.closeErr = m.teardown()
	})
	return m.closeErr
}

// stopMount unmounts the mount, lazily if files are open. It leaves the
// mount point alone when it no longer shows this mount: the mount was
// detached from outside, and a later mount may sit there now.
func (m *Mount) stopMount() {
	if cur, ok := mounts.MountDev(m.o.Mountpoint); !ok || cur != m.dev {
		m.log.Info("the mount was detached already; waiting for its open files")
		return
	}
	if err := m.fsys.Unmount(); err != nil {
		m.log.Warn("unmount failed; detaching lazily", zap.Error(err))
		if err := mounts.Unmount(m.o.Mountpoint, true); err != nil {
			m.log.Error("lazy unmount failed", zap.Error(err))
		}
	}
}

// teardown closes what New opened, last first, within the deadline, then
// stops the metrics server, removes the record and drops the lock.
func (m *Mount) teardown() error {
	err := shutdown(m.log, m.steps, m.o.ShutdownTimeout)
	if m.metSrv != nil {
		if cerr := m.metSrv.Close(); err == nil {
			err = cerr
		}
	}
	if m.recPath != "" {
		mounts.RemoveRecord(m.recPath, m.rec)
	}
	if lerr := m.lock.Release(); err == nil && lerr != nil {
		err = fmt.Errorf("daemon: release %s: %w", mounts.LockName, lerr)
	}
	return err
}

// statusDoc is the status for the metrics (empty before the mount).
func (m *Mount) statusDoc() *status.Doc {
	if m.fsys == nil {
		return status.New()
	}
	return m.fsys.Status()
}

// sourceProbe is how often the source's prober checks its root (status
// reads what it found, never the source).
const sourceProbe = 2 * time.Second

// holderCheck is how often the daemon looks whether its mount left its
// mount namespace while the kernel still serves it elsewhere, when it
// cannot watch the mount table (mounts.WatchTable); with the watch, it
// looks when the table changed.
const holderCheck = 2 * time.Second

// watchHolders logs, once, that the mount was unmounted in the daemon's
// mount namespace while another namespace still holds it: the daemon then
// serves that namespace (and keeps its state directory) until the mount
// is unmounted there, and the log says who holds it.
func (m *Mount) watchHolders() {
	w, err := mounts.WatchTable()
	if err != nil {
		m.log.Warn("cannot watch the mount table; reading it every 2 s instead", zap.Error(err))
	}
	unwatch := func() {
		if w != nil {
			w.Close()
			w = nil
		}
	}
	defer unwatch()
	t := time.NewTicker(holderCheck)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		default:
		}
		if w != nil {
			changed, err := w.Wait(holderCheck)
			if err != nil {
				m.log.Warn("cannot watch the mount table; reading it every 2 s instead", zap.Error(err))
				unwatch()
			}
			if !changed {
				continue
			}
		} else {
			select {
			case <-m.done:
				return
			case <-t.C:
			}
		}
		if cur, ok := mounts.MountDev(m.o.Mountpoint); m.dev == "" || ok && cur == m.dev {
			continue
		}
		if hs := mounts.Holders(m.dev); len(hs) > 0 {
			m.log.Warn("the mount was unmounted here, but another mount namespace still holds it: serving it there until it is unmounted there or its processes exit",
				zap.String("mountpoint", m.o.Mountpoint), zap.String("holders", mounts.HoldersText(hs)))
			return
		}
		// Gone here, held nowhere yet that Holders saw: the table here
		// may not change again, so look every holderCheck from now on.
		unwatch()
	}
}

// sourceMountedAgain is the source's OnNewMount: the placer checks every
// file against the new mount (a hook of the source, which is opened
// before the placer exists).
func (m *Mount) sourceMountedAgain() {
	if p := m.placer.Load(); p != nil {
		p.Scrubber().NewSourceMount()
	}
}

// jobList is the live jobs for the metrics.
func (m *Mount) jobList() []metrics.Job {
	if m.fsys == nil || m.jm == nil {
		return nil
	}
	var out []metrics.Job
	for _, in := range m.jm.List() {
		st, err := m.jm.Status(in.Ref())
		if err != nil {
			continue // ended meanwhile
		}
		uid := uint32(0)
		if in.Owner != nil {
			uid = in.Owner.UID
		}
		out = append(out, metrics.Job{Name: in.Name, Status: st, Owner: m.userName(uid)})
	}
	return out
}

// userName is uid's login name, or the number if it has none.
func (m *Mount) userName(uid uint32) string {
	if v, ok := m.owners.Load(uid); ok {
		return v.(string)
	}
	name := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	m.owners.Store(uid, name)
	return name
}
