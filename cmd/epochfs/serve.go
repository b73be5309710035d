package main

// `epochfs mount` is safe to call from a job prolog, several at once:
//
//   - Mounts (and unmounts) of one mount point serialize on
//     RUNTIME/KEY.lock (internal/mounts/users.go), and mounts of one state directory on
//     STATE/mount.lock, held from the first check until the daemon reports
//     the mount ready (or fails). The second of two concurrent mounts then
//     finds the first one's mount.
//   - A mount point already served by a live epochfs of the same source is
//     left as it is (exit 0, "nothing to do"); of another source, exit 2.
//     A live daemon is one whose runtime record names the mount (same
//     device number) and whose status answers.
//   - A dead epochfs mount (its daemon is gone: "Transport endpoint is not
//     connected") is detached lazily and mounted again.
//   - A state directory held by the daemon of another mount point is exit
//     2: two catalogs cannot share it.
//   - --user-ref ID counts ID as a user of the mount (internal/mounts/users.go).
//
// Lock order: RUNTIME/KEY.lock, then STATE/mount.lock; the daemon then
// takes STATE/daemon.lock for its life (internal/mounts/lock.go). An unmount takes
// KEY.lock only.
//
// The daemon itself is assembled by the daemon package; serve runs it in
// this process until the mount goes away or a signal comes.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"

	"github.com/epochfs/epochfs/internal/cluster"
	"github.com/epochfs/epochfs/internal/config"
	"github.com/epochfs/epochfs/internal/daemon"
	"github.com/epochfs/epochfs/internal/fs"
	"github.com/epochfs/epochfs/internal/jobs"
	"github.com/epochfs/epochfs/internal/mounts"
	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/preprocess"
	"github.com/epochfs/epochfs/internal/source"
	"github.com/epochfs/epochfs/internal/tier"
	"github.com/epochfs/epochfs/internal/views"
)

func runMount(args []string, stdout, stderr io.Writer) error {
	ma, err := parseMountArgs(args, stderr)
	if err != nil {
		return err
	}
	if ma.readyFD >= 0 {
		// The daemon started by daemonize: its parent holds the locks
		// and has done the checks.
		return serve(ma, stderr, nil)
	}
	mnt := ma.cfg.Mountpoint
	lk, err := lockMountpoint(mnt, stderr)
	if err != nil {
		return err
	}
	defer mounts.ReleaseMountpoint(lk, mnt)
	mountedAlready, err := prepareMountpoint(ma, stdout, stderr)
	if err != nil {
		return err
	}
	if mountedAlready {
		return addUser(mnt, ma.userRef, ma.keep)
	}
	sick, err := checkPaths(&ma.cfg)
	if err != nil {
		return err
	}
	if sick != nil {
		// The daemon need not wait for the source again.
		ma.sourcePatience = 100 * time.Millisecond
		args = append([]string{"--source-patience=100ms"}, args...)
		fmt.Fprintf(stderr, "epochfs: warning: %v; mounting what the last mount left: resident files are served, others fail with EIO until the source answers (status: source_state)\n", strings.ReplaceAll(sick.Error(), "\n", " "))
	}
	if err := os.MkdirAll(ma.cfg.StateDir, 0o700); err != nil {
		return usageErr("state directory %s: %v", ma.cfg.StateDir, err)
	}
	slk, err := mounts.Lock(filepath.Join(ma.cfg.StateDir, "mount.lock"), true)
	if err != nil {
		return runtimeErr("%v", err)
	}
	defer slk.Release()
	// Refuse here, with the holder's pid, rather than from a daemon that
	// would fail later. The daemon takes the lock again for good.
	if err := checkStateFree(ma.cfg); err != nil {
		return err
	}
	// A mount made for no job (by hand, by systemd) is kept: no job's
	// epilog unmounts it, only a plain unmount.
	keep := ma.keep || ma.userRef == ""
	if ma.foreground {
		err := serve(ma, stderr, func() error {
			err := addUser(mnt, ma.userRef, keep)
			lk.Release()
			slk.Release()
			return err
		})
		mounts.TidyMountpoint(mnt)
		return err
	}
	if err := daemonize(ma, args, stdout); err != nil {
		return err
	}
	if err := addUser(mnt, ma.userRef, keep); err != nil {
		return err
	}
	if ma.waitWalk {
		return waitWalk(mnt, stderr)
	}
	noteWalk(mnt, stderr)
	return nil
}

// prepareMountpoint looks at what is mounted at the mount point already:
// a live epochfs of the same source (mountedAlready), of another source
// (exit 2), or a dead epochfs mount, which it clears.
func prepareMountpoint(ma *mountArgs, stdout, stderr io.Writer) (mountedAlready bool, err error) {
	mnt := ma.cfg.Mountpoint
	entry, mounted := mounts.FindMount(mnt)
	if !mounted || !entry.Epochfs() {
		return false, nil // checkPaths names any other mount
	}
	if d := mounts.FindDaemon(mnt, warn); d.PID > 0 {
		st, err := mounts.StatusWithin(mnt, mounts.StatusTimeout)
		if err != nil {
			return false, runtimeErr("%s is mounted but its daemon (pid %d) does not answer (%v): see %s; 'epochfs unmount --lazy %s' detaches it", mnt, d.PID, err, d.LogPath(), mnt)
		}
		src := st["source"]
		if src != ma.cfg.Source {
			return false, usageErr("%s is already mounted from %s (epochfs pid %d), not from %s: unmount it first ('epochfs unmount %s') or use another mount point", mnt, src, d.PID, ma.cfg.Source, mnt)
		}
		if d.Config != "" && d.Config != ma.configID {
			fmt.Fprintf(stderr, "epochfs mount: warning: %s is mounted with another configuration (pid %d); keeping it: unmount it and mount again to apply this one\n", mnt, d.PID)
		}
		fmt.Fprintf(stdout, "epochfs: %s is already mounted at %s (pid %d); nothing to do\n", src, mnt, d.PID)
		return true, nil
	}
	// The kernel still has the mount but nobody serves it.
	if err := mounts.Unmount(mnt, true); err != nil {
		return false, runtimeErr("%s is a dead epochfs mount (its daemon is gone) and cannot be cleared: %v", mnt, err)
	}
	fmt.Fprintf(stdout, "epochfs: cleared the dead epochfs mount at %s (its daemon is gone)\n", mnt)
	return false, nil
}

// checkStateFree fails when a live daemon holds the state directory: exit
// 2 if it serves another mount point, else exit 1 (a daemon of this mount
// point still draining).
func checkStateFree(cfg config.Config) error {
	err := mounts.CheckStateFree(cfg.StateDir)
	if err == nil {
		return nil
	}
	if errors.Is(err, daemon.ErrStateInUse) {
		// A daemon that still serves its mount elsewhere is a
		// configuration error; one draining a detached mount goes away.
		if r, ok := mounts.RecordOfState(cfg.StateDir); ok && r.Mountpoint != cfg.Mountpoint && servesMount(r) {
			what := "epochfs"
			if r.Source != "" {
				what = "epochfs mount of " + r.Source
			}
			return usageErr("state directory %s is in use by the %s at %s (pid %d): give this mount its own --state", cfg.StateDir, what, r.Mountpoint, r.PID)
		}
		if r, ok := mounts.RecordOfState(cfg.StateDir); ok && r.Dev != "" {
			if hs := mounts.Holders(r.Dev); len(hs) > 0 {
				return runtimeErr("%v: its mount is still held by another mount namespace: %s; it ends when it is unmounted there (nsenter -t %d -m umount %s) or those processes exit",
					err, mounts.HoldersText(hs), hs[0].PID, hs[0].Dir)
			}
		}
		return &exitError{code: exitRuntime, err: err}
	}
	return runtimeErr("%v", err)
}

// servesMount reports whether r's mount is still at its mount point.
func servesMount(r mounts.Record) bool {
	dev, ok := mounts.MountDev(r.Mountpoint)
	return ok && dev == r.Dev
}

// configID identifies a configuration: a hash of what the daemon is
// started with (the log settings aside).
func configID(cfg config.Config) string {
	cfg.Log = config.Log{}
	data, _ := json.Marshal(cfg)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// daemonize starts the daemon in the background and waits until it
// reports the mount ready or fails.
func daemonize(ma *mountArgs, args []string, stdout io.Writer) error {
	logPath := filepath.Join(ma.cfg.StateDir, "epochfs.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return runtimeErr("log file: %v", err)
	}
	defer logf.Close()
	var logStart int64
	if st, err := logf.Stat(); err == nil {
		logStart = st.Size()
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return runtimeErr("%v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return runtimeErr("%v", err)
	}
	cmd := exec.Command(exe, append([]string{"mount", "--foreground", "--ready-fd=3"}, args...)...)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{pw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// A service manager waiting for our readiness hears it from us, not
	// from the daemon (it is not the unit's main process).
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "NOTIFY_SOCKET=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	// The child resolves relative paths from here, then moves to "/".
	if err := cmd.Start(); err != nil {
		return runtimeErr("start daemon: %v", err)
	}
	pw.Close()
	line, _ := bufio.NewReader(pr).ReadString('\n')
	pr.Close()
	line = strings.TrimSpace(line)
	switch {
	case line == "ok":
		pid := cmd.Process.Pid
		cmd.Process.Release()
		fmt.Fprintf(stdout, "epochfs: %s mounted at %s (pid %d, log %s)\n", ma.cfg.Source, ma.cfg.Mountpoint, pid, logPath)
		return nil
	case strings.HasPrefix(line, "err "):
		cmd.Wait()
		code, msg, _ := strings.Cut(strings.TrimPrefix(line, "err "), " ")
		c, _ := strconv.Atoi(code)
		if c == 0 {
			c = exitRuntime
		}
		if why := mounts.FusermountReason(logPath, logStart); why != "" {
			msg = mounts.UnprivilegedMountMessage(ma.cfg.Mountpoint, why, logPath)
		}
		return &exitError{code: c, err: errors.New(msg)}
	default:
		cmd.Wait()
		return runtimeErr("the daemon exited before the mount was ready; see %s", logPath)
	}
}

// serve runs the daemon in this process until the mount goes away or a
// signal comes. onReady, if set, runs once the mount answers.
//
// Long: the daemon's start and end in order (readiness pipe, logger, limits, config, daemon.New, signals, shutdown); each step is a call.
func serve(ma *mountArgs, stderr io.Writer, onReady func() error) (err error) {
	cfg := &ma.cfg
	var ready *os.File
	if ma.readyFD >= 0 {
		ready = os.NewFile(uintptr(ma.readyFD), "ready")
	}
	defer func() {
		if ready != nil {
			if err != nil {
				code := exitRuntime
				var ee *exitError
				if errors.As(err, &ee) {
					code = ee.code
				}
				fmt.Fprintf(ready, "err %d %s\n", code, strings.ReplaceAll(err.Error(), "\n", " "))
			}
			ready.Close()
		}
	}()
	log := newLogger(cfg.Log, stderr)
	defer log.Sync()
	// Hold no directory busy: every path is absolute by now.
	os.Chdir("/")
	// Process-wide settings: the daemon's, not its libraries'.
	raiseNoFile(log)
	cluster.QuietRedis()

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	validate, err := placement.ParseValidate(cfg.Placement.Validate)
	if err != nil {
		return usageErr("%v", err)
	}
	var tiers []tier.Options
	var tierBytes int64
	for _, tc := range cfg.Tiers {
		tierBytes += tc.Quota.Bytes
		o := tier.Options{Name: tc.Name, Dir: tc.Path, Quota: tc.Quota.Bytes, RequireMount: tc.RequireMount}
		if tc.MinFree.IsPct {
			o.MinFreePct = tc.MinFree.Pct
		} else {
			o.MinFreeBytes = tc.MinFree.Bytes
		}
		tiers = append(tiers, o)
	}
	ioUring := fs.IoUringMode(cfg.Fuse.IoUring)
	readers, cpus := transportProcs(ioUring)
	views := viewsOptions(cfg.Preprocess)
	if views != nil && views.Workers <= 0 {
		views.Workers = cpus
	}
	lastLog := time.Now()
	m, err := daemon.New(ctx, daemon.Options{
		Source: cfg.Source, Mountpoint: cfg.Mountpoint, StateDir: cfg.StateDir, Tiers: tiers,
		Rescan: ma.rescan,
		Progress: func(n int64) {
			if time.Since(lastLog) > 5*time.Second {
				lastLog = time.Now()
				log.Info("walking the source", zap.Int64("entries", n))
			}
		},
		// With a parent (daemonize) the parent waits for the walk;
		// in the foreground the daemon does.
		WaitWalk: ma.waitWalk && ma.readyFD < 0,
		SourceOptions: source.Options{
			Bandwidth: cfg.Placement.SourceBandwidth.BytesPerSec,
			Timeout:   cfg.Placement.SourceTimeoutDuration(),
			Patience:  ma.sourcePatience,
		},
		Placement: placement.Options{
			Workers: cfg.Placement.Workers, Validate: validate,
			ValidateTTL:      cfg.Placement.ValidateTTLDuration(),
			FillAfter:        cfg.Placement.FillAfter,
			RefreshRate:      cfg.Placement.RefreshRate,
			MaxDrop:          cfg.Placement.MaxDropFraction(),
			MaxWarmupPerUser: max(1, cfg.Placement.WarmupPerUserBytes(tierBytes)),
			BufferBytes:      cfg.Sampler.Buffer.Bytes,
		},
		Jobs: jobs.Options{Lookahead: cfg.Sampler.Lookahead, Lease: cfg.Sampler.LeaseDuration(),
			MaxJobsPerUser: cfg.Sampler.MaxJobsPerUser},
		FUSE: fs.Options{NoPassthrough: ma.noPassthrough, Prewarm: cfg.Fuse.Prewarm, Version: version,
			IoUring: ioUring, Readers: readers},
		ModelSettings:   ptr(modelSettings(cfg.Model)),
		Views:           views,
		Metrics:         daemon.MetricsOptions{Listen: cfg.Metrics.Listen, Pprof: cfg.Metrics.Pprof},
		Cluster:         clusterOptions(cfg),
		ShutdownTimeout: ma.shutdownTimeout,
		RuntimeDir:      mounts.RuntimeDir(), ConfigID: ma.configID,
		Logger: log,
	})
	if err != nil {
		switch {
		case errors.Is(err, daemon.ErrConfig):
			return usageErr("%v", err)
		case errors.Is(err, daemon.ErrStateInUse):
			return &exitError{code: exitRuntime, err: err}
		case errors.Is(err, daemon.ErrMount) && os.Geteuid() != 0 && ready == nil:
			return runtimeErr("cannot mount %s as uid %d: %v (fusermount3's reason is printed above): mount as root, or fix what it says", cfg.Mountpoint, os.Geteuid(), err)
		}
		return runtimeErr("%v", err)
	}
	setMemoryLimit(m.MemoryBudget(), log)
	relCtx, endRelease := context.WithCancel(context.Background())
	defer endRelease()
	go releaseAfterCopies(relCtx, m.Placer().Stats, log)
	log.Info("mounted", zap.String("source", cfg.Source), zap.String("mountpoint", cfg.Mountpoint),
		zap.Bool("passthrough", m.FS().Passthrough()), zap.String("transport", m.FS().Transport()), zap.Int64("files", m.Catalog().Files()),
		zap.Bool("walked", m.Catalog().Walked()), zap.Int("pid", os.Getpid()),
		zap.String("metrics", m.MetricsAddr()))
	if ready != nil {
		fmt.Fprintln(ready, "ok")
		ready.Close()
		ready = nil
	}
	if onReady != nil {
		if err := onReady(); err != nil {
			log.Warn("mounted, but the user could not be recorded", zap.Error(err))
		}
	}
	// systemd (Type=notify): the mount answers now. Without NOTIFY_SOCKET
	// this does nothing.
	if _, err := sddaemon.SdNotify(false, fmt.Sprintf("READY=1\nMAINPID=%d\nSTATUS=serving %s at %s", os.Getpid(), cfg.Source, cfg.Mountpoint)); err != nil {
		log.Warn("sd_notify READY failed", zap.Error(err))
	}
	select {
	case <-m.Done():
		log.Info("unmounted")
	case <-ctx.Done():
		log.Info("signal received; unmounting")
	}
	sddaemon.SdNotify(false, "STOPPING=1")
	err = m.Close()
	// Unmounted by umount(8), fusermount3 or a signal rather than by
	// `epochfs unmount`: the mount point's users and keep go with the
	// mount, so that the next mount there starts afresh.
	mounts.ForgetUsersIfUnmounted(cfg.Mountpoint)
	if err != nil {
		return runtimeErr("%v", err)
	}
	return nil
}

// memoryMargin is the part of the daemon's memory beyond its budgets that
// does not grow with the dataset (FUSE and copy buffers, pools, the Go
// runtime): measured at about 260 MiB with three jobs of views
// (docs/benchmarks.md, "Preprocessed views"), with room.
const memoryMargin = 384 << 20

// setMemoryLimit asks Go's collector to keep the heap within the mount's
// budgets (caches and shared buffer) plus its overhead: what it holds once
// mounted (the catalog's tree above all) and memoryMargin. By default the
// collector lets the heap grow to twice what is live, which for gigabytes
// of caches is gigabytes more. A GOMEMLIMIT in the environment wins.
func setMemoryLimit(budget int64, log *zap.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	limit := budget + int64(ms.HeapAlloc) + memoryMargin
	debug.SetMemoryLimit(limit)
	log.Info("memory limit", zap.Int64("bytes", limit), zap.Int64("budgets", budget), zap.Uint64("heap_at_mount", ms.HeapAlloc))
}

// raiseNoFile lifts RLIMIT_NOFILE to its hard limit: every open dataset
// file holds a tier or source descriptor.
//
// The hard limit is raised too, to the kernel's ceiling (fs.nr_open), when
// the process may (CAP_SYS_RESOURCE): a hard limit of a few thousand (a
// container's default) leaves a cached-mode mount few kept descriptors
// (placement.DefaultOpenFiles is half the limit). A process-wide effect,
// so it is the daemon's to make, not a library's.
func raiseNoFile(log *zap.Logger) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return
	}
	if data, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if ceil, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64); err == nil && r.Max < ceil {
			if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: ceil, Max: ceil}) == nil {
				return
			}
		}
	}
	if r.Cur < r.Max {
		r.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
			log.Warn("cannot raise the open-file limit", zap.Error(err))
		}
	}
}

func ptr[T any](v T) *T { return &v }

// pipelineOptions is the [preprocess] section's pipeline: the one place
// the config's keys become preprocess.Options (the daemon's views,
// `epochfs preprocess`, the model's profile).
func pipelineOptions(pc config.Preprocess) preprocess.Options {
	return preprocess.Options{Static: pc.Static, Augment: pc.Augment, Normalize: pc.Normalize,
		Output: pc.OutputOrDefault(), MaxPixels: pc.MaxPixels, FastUpsample: pc.FastUpsample}
}

// viewsOptions is the [preprocess] section for the daemon (nil: views off).
func viewsOptions(pc config.Preprocess) *views.Config {
	if !pc.ViewsOn() {
		return nil
	}
	budget := func(v config.Size) int64 {
		if v.Raw == "" {
			return -1
		}
		return v.Bytes
	}
	return &views.Config{
		Pipeline: pipelineOptions(pc),
		Seed:     pc.Seed, Workers: pc.Workers,
		DecodedBytes: budget(pc.DecodedCache), AugmentedBytes: budget(pc.AugmentedCache),
		DefaultDecoded: config.DefaultDecodedCache, DefaultAugmented: config.DefaultAugmentedCache,
		MaxBatchBytes: pc.MaxBatchBytes.Bytes,
	}
}

// clusterOptions is the [cluster] section for the daemon (nil: no cluster).
// A wait for another node's fill is bounded by the lease, and by half the
// source timeout so that a reader following the copy never times out.
func clusterOptions(cfg *config.Config) *cluster.Options {
	cc := cfg.Cluster
	if !cc.On() {
		return nil
	}
	lease := cc.LeaseDuration()
	if lease <= 0 {
		lease = cluster.DefaultLease
	}
	wait := min(lease, cfg.Placement.SourceTimeoutDuration()/2)
	return &cluster.Options{
		Addrs: cc.Redis, Username: cc.Username, PasswordFile: cc.PasswordFile, KeyFile: cc.KeyFile, Insecure: cc.Insecure,
		TLS: cc.TLS, CAFile: cc.CAFile, DatasetID: cc.DatasetOrDefault(), Quota: cc.TierQuota.Bytes,
		Timeout: cc.TimeoutDuration(), Lease: lease, MaxWait: wait,
	}
}
