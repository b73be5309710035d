package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/epochfs/epochfs/config"
	"github.com/epochfs/epochfs/fs"
	"github.com/epochfs/epochfs/jobs"
	"github.com/epochfs/epochfs/placement"
	"github.com/epochfs/epochfs/tier"
)

const mountSynopsis = "mount [--config FILE] [--tier NAME=PATH:QUOTA]... [--state DIR] [--foreground] [--rescan] SOURCE MOUNTPOINT"

type mountArgs struct {
	cfg           config.Config
	foreground    bool
	rescan        bool
	noPassthrough bool
	readyFD       int
	// shutdownTimeout bounds the daemon's closes on its way out
	// (shutdown.go).
	shutdownTimeout time.Duration
}

func parseMountArgs(args []string, stderr io.Writer) (*mountArgs, error) {
	f := newFlagSet("mount", mountSynopsis, stderr)
	cfgFile := f.String("config", "", "TOML config file")
	var tiers stringList
	f.Var(&tiers, "tier", "a tier NAME=PATH:QUOTA, fastest first (repeatable; replaces the config's tiers)")
	state := f.String("state", "", "state directory for the catalog and the log (default /var/lib/epochfs/<mountpoint>)")
	fg := f.Bool("foreground", false, "stay attached (for systemd); log to stderr")
	rescan := f.Bool("rescan", false, "walk the source again even if the catalog is complete")
	noPT := f.Bool("no-passthrough", false, "serve resident files through the daemon instead of FUSE passthrough")
	ready := f.Int("ready-fd", -1, "internal: report readiness on this descriptor")
	shutdownTimeout := f.Duration("shutdown-timeout", defaultShutdownTimeout, "internal: how long the daemon waits for its closes before it exits anyway")
	pos, err := parseFlags(f, args)
	if err != nil {
		return nil, err
	}
	cfg := config.Default()
	if *cfgFile != "" {
		if cfg, err = config.Load(*cfgFile); err != nil {
			return nil, &exitError{code: exitUsage, err: err}
		}
	}
	switch len(pos) {
	case 0:
	case 2:
		cfg.Source, cfg.Mountpoint = pos[0], pos[1]
	default:
		return nil, usageErr("want SOURCE and MOUNTPOINT (usage: epochfs %s)", mountSynopsis)
	}
	if len(tiers) > 0 {
		cfg.Tiers = nil
		for _, t := range tiers {
			tc, err := config.ParseTierFlag(t)
			if err != nil {
				return nil, usageErr("%v", err)
			}
			cfg.Tiers = append(cfg.Tiers, tc)
		}
	}
	if *state != "" {
		cfg.StateDir = *state
	}
	if err := cfg.ValidateMount(); err != nil {
		return nil, usageErr("%v", err)
	}
	for _, p := range []*string{&cfg.Source, &cfg.Mountpoint, &cfg.StateDir} {
		if *p != "" {
			if abs, err := filepath.Abs(*p); err == nil {
				*p = abs
			}
		}
	}
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join("/var/lib/epochfs", strings.ReplaceAll(strings.Trim(cfg.Mountpoint, "/"), "/", "_"))
	}
	if *shutdownTimeout <= 0 {
		return nil, usageErr("--shutdown-timeout %s: want a positive duration", *shutdownTimeout)
	}
	return &mountArgs{cfg: cfg, foreground: *fg, rescan: *rescan, noPassthrough: *noPT, readyFD: *ready,
		shutdownTimeout: *shutdownTimeout}, nil
}

// checkPaths reports bad input before anything is created or mounted.
func checkPaths(c *config.Config) error {
	st, err := os.Stat(c.Source)
	if err != nil {
		return usageErr("source %s: %v", c.Source, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return usageErr("source %s: not a directory", c.Source)
	}
	d, err := os.Open(c.Source)
	if err == nil {
		_, err = d.Readdirnames(1)
		d.Close()
		if errors.Is(err, io.EOF) {
			err = nil
		}
	}
	if err != nil {
		return usageErr("source %s: not readable: %v", c.Source, err)
	}
	st, err = os.Stat(c.Mountpoint)
	if err != nil {
		return usageErr("mount point %s: %v", c.Mountpoint, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return usageErr("mount point %s: not a directory", c.Mountpoint)
	}
	if isMountpoint(c.Mountpoint) {
		return usageErr("mount point %s: already a mount (run 'epochfs unmount %s' first)", c.Mountpoint, c.Mountpoint)
	}
	if names, err := readNames(c.Mountpoint, 1); err != nil {
		return usageErr("mount point %s: %v", c.Mountpoint, err)
	} else if len(names) > 0 {
		return usageErr("mount point %s: not empty", c.Mountpoint)
	}
	if err := tier.CheckPaths(c.Source, c.Mountpoint); err != nil {
		return usageErr("mount point: %v", err)
	}
	for _, t := range c.Tiers {
		if err := tier.CheckPaths(c.Source, t.Path); err != nil {
			return usageErr("tier %q: %v", t.Name, err)
		}
		if err := tier.CheckPaths(c.Mountpoint, t.Path); err != nil {
			return usageErr("tier %q: %v", t.Name, err)
		}
	}
	for i, a := range c.Tiers {
		for _, b := range c.Tiers[i+1:] {
			if filepath.Clean(a.Path) == filepath.Clean(b.Path) {
				return usageErr("tiers %q and %q share the path %s", a.Name, b.Name, a.Path)
			}
		}
	}
	if err := tier.CheckPaths(c.Source, c.StateDir); err != nil {
		return usageErr("state directory: %v", err)
	}
	return nil
}

func readNames(dir string, n int) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(n)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return names, err
}

// isMountpoint reports whether dir is listed in /proc/self/mountinfo.
func isMountpoint(dir string) bool {
	_, ok := mountDev(dir)
	return ok
}

// mountDev returns the device number (MAJOR:MINOR) of the mount at dir, the
// topmost if several are stacked there, and whether there is one. A FUSE
// mount's number is its connection's and is not reused while the
// connection lives, so it tells one mount from a later one on the same
// path.
func mountDev(dir string) (string, bool) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	clean := filepath.Clean(dir)
	dev, found := "", false
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescapeMount(f[4]) == clean {
			dev, found = f[2], true
		}
	}
	return dev, found
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func runMount(args []string, stdout, stderr io.Writer) error {
	ma, err := parseMountArgs(args, stderr)
	if err != nil {
		return err
	}
	if err := checkPaths(&ma.cfg); err != nil {
		return err
	}
	if err := os.MkdirAll(ma.cfg.StateDir, 0o700); err != nil {
		return usageErr("state directory %s: %v", ma.cfg.StateDir, err)
	}
	if !ma.foreground {
		// Refuse here, with the holder's pid, rather than from a daemon
		// that would fail later on badger's own lock. The daemon takes
		// the lock again for good (serve).
		if err := checkStateFree(ma.cfg.StateDir); err != nil {
			return err
		}
		return daemonize(ma, args, stdout)
	}
	return serve(ma, stderr)
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
		return &exitError{code: c, err: errors.New(msg)}
	default:
		cmd.Wait()
		return runtimeErr("the daemon exited before the mount was ready; see %s", logPath)
	}
}

// serve runs the daemon in this process until the mount goes away.
//
// Its life, in order: take STATE/daemon.lock (before anything in the state
// directory or the tiers is touched: a daemon still draining them owns
// them), open the tiers, the catalog, the placer and the jobs manager,
// mount, write the runtime record (daemon.go), serve until the kernel
// mount is gone or a signal comes, close everything within the shutdown
// deadline (shutdown.go), remove the record, drop the lock, exit.
func serve(ma *mountArgs, stderr io.Writer) (err error) {
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
	raiseNoFile(log)

	lock, err := lockState(cfg.StateDir)
	if err != nil {
		return err
	}
	defer lock.release()
	var rec daemonRecord
	var recPath string
	defer func() {
		if recPath != "" {
			removeRecord(recPath, rec)
		}
	}()
	// What is opened from here on is closed by shutdown, last first, on
	// every way out. It runs before the record goes and the lock drops.
	var steps []shutdownStep
	defer func() {
		if serr := shutdown(log, steps, ma.shutdownTimeout); serr != nil && err == nil {
			err = serr
		}
	}()

	var tiers []*tier.Tier
	var names []string
	for _, tc := range cfg.Tiers {
		o := tier.Options{Name: tc.Name, Dir: tc.Path, Quota: tc.Quota.Bytes}
		if tc.MinFree.IsPct {
			o.MinFreePct = tc.MinFree.Pct
		} else {
			o.MinFreeBytes = tc.MinFree.Bytes
		}
		t, err := tier.Open(o)
		if err != nil {
			return usageErr("tier %q: %v", tc.Name, err)
		}
		tiers = append(tiers, t)
		names = append(names, tc.Name)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	lastLog := time.Now()
	cat, err := placement.OpenCatalog(ctx, placement.CatalogOptions{
		StateDir: cfg.StateDir, Source: cfg.Source, Tiers: names, Rescan: ma.rescan,
		Workers: 16, Logger: log,
		Progress: func(n int64) {
			if time.Since(lastLog) > 5*time.Second {
				lastLog = time.Now()
				log.Info("walking the source", zap.Int64("entries", n))
			}
		},
	})
	if err != nil {
		if errors.Is(err, placement.ErrOtherSource) {
			return usageErr("%v", err)
		}
		return runtimeErr("%v", err)
	}
	steps = append(steps, shutdownStep{what: "the catalog (sync and close)", close: cat.Close, always: true})
	src := tier.OpenSource(tier.SourceOptions{Root: cfg.Source, Bandwidth: cfg.Placement.SourceBandwidth.BytesPerSec,
		Timeout: cfg.Placement.SourceTimeoutDuration()})
	validate, err := placement.ParseValidate(cfg.Placement.Validate)
	if err != nil {
		return usageErr("%v", err)
	}
	p, err := placement.New(placement.Options{
		Catalog: cat, Source: src, Tiers: tiers, Workers: cfg.Placement.Workers,
		Validate: validate, RefreshRate: cfg.Placement.RefreshRate, Logger: log,
		BufferBytes: cfg.Sampler.Buffer.Bytes,
	})
	if err != nil {
		return runtimeErr("%v", err)
	}
	steps = append(steps, shutdownStep{what: "the placer (copies in progress, reading the source)",
		close: func() error { p.Close(); return nil }})
	jm, err := jobs.New(jobs.Options{
		Placer: p, Lookahead: cfg.Sampler.Lookahead,
		Lease: cfg.Sampler.LeaseDuration(), Logger: log,
	})
	if err != nil {
		return runtimeErr("%v", err)
	}
	steps = append(steps, shutdownStep{what: "the jobs manager (prefetches in flight, reading the source)",
		close: func() error { jm.Close(); return nil }})
	fsys, err := fs.Mount(fs.Options{
		Placer: p, Source: cfg.Source, Mountpoint: cfg.Mountpoint, Version: version,
		Logger: log, NoPassthrough: ma.noPassthrough, Jobs: jm,
		Model: func() []byte {
			return mountModelText(context.Background(), *cfg, cat.Files(), cat.Bytes())
		},
	})
	if err != nil {
		return runtimeErr("%v", err)
	}
	dev, _ := mountDev(cfg.Mountpoint)
	rec = daemonRecord{PID: os.Getpid(), Start: procStart(os.Getpid()), StateDir: cfg.StateDir,
		Mountpoint: cfg.Mountpoint, Dev: dev}
	if path, rerr := writeRecord(rec); rerr != nil {
		log.Warn("cannot write the runtime record; 'epochfs unmount' finds this daemon through its status only", zap.Error(rerr))
	} else {
		recPath = path
	}
	log.Info("mounted", zap.String("source", cfg.Source), zap.String("mountpoint", cfg.Mountpoint),
		zap.Bool("passthrough", fsys.Passthrough()), zap.Int64("files", cat.Files()), zap.Bool("walked", cat.Walked()),
		zap.Int("pid", os.Getpid()))
	if ready != nil {
		fmt.Fprintln(ready, "ok")
		ready.Close()
		ready = nil
	}
	done := make(chan struct{})
	go func() { fsys.Wait(); close(done) }()
	select {
	case <-done:
		log.Info("unmounted")
	case <-ctx.Done():
		log.Info("signal received; unmounting")
		stopMount(log, fsys, cfg.Mountpoint, dev)
		select {
		case <-done:
		case <-time.After(ma.shutdownTimeout):
			// Open files keep a detached mount alive; a signal asks this
			// daemon to go, so it goes, and their reads fail from now on.
			log.Warn("files are still open on the detached mount; exiting anyway", zap.Duration("after", ma.shutdownTimeout))
		}
	}
	return nil
}

// stopMount unmounts the daemon's own mount, lazily if files are open. It
// leaves the mount point alone when it no longer shows this mount (dev): the
// mount was detached from outside, and a later mount may sit there now.
func stopMount(log *zap.Logger, fsys *fs.FS, mnt, dev string) {
	if cur, ok := mountDev(mnt); !ok || cur != dev {
		log.Info("the mount was detached already; waiting for its open files")
		return
	}
	if err := fsys.Unmount(); err != nil {
		log.Warn("unmount failed; detaching lazily", zap.Error(err))
		if err := unmount(mnt, true); err != nil {
			log.Error("lazy unmount failed", zap.Error(err))
		}
	}
}

// raiseNoFile lifts RLIMIT_NOFILE to its hard limit: every open dataset
// file holds a tier or source descriptor.
func raiseNoFile(log *zap.Logger) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return
	}
	if r.Cur < r.Max {
		r.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
			log.Warn("cannot raise the open-file limit", zap.Error(err))
		}
	}
}
