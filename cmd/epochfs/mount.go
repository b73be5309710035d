package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/config"
	"github.com/epochfs/epochfs/daemon"
	"github.com/epochfs/epochfs/tier"
)

const mountSynopsis = "mount [--config FILE] [--tier NAME=PATH:QUOTA]... [--state DIR] [--user-ref ID] [--keep] [--foreground] [--rescan] [--wait-walk] [--no-passthrough] SOURCE MOUNTPOINT"

type mountArgs struct {
	cfg        config.Config
	foreground bool
	rescan     bool
	// waitWalk returns only once a first mount's walk of the source has
	// ended (the mount serves before).
	waitWalk      bool
	noPassthrough bool
	readyFD       int
	// shutdownTimeout bounds the daemon's closes on its way out
	// (daemon/shutdown.go).
	shutdownTimeout time.Duration
	// userRef is the user (a job) this mount is for (users.go); keep
	// marks the mount as never unmounted by a user's unmount.
	userRef string
	keep    bool
	// configID identifies cfg in the runtime record: a later mount of the
	// same source with another configuration is told so.
	configID string
}

func parseMountArgs(args []string, stderr io.Writer) (*mountArgs, error) {
	f := newFlagSet("mount", mountSynopsis, stderr)
	cfgFile := f.String("config", "", "TOML config file")
	var tiers stringList
	f.Var(&tiers, "tier", "a tier NAME=PATH:QUOTA, fastest first (repeatable; replaces the config's tiers)")
	state := f.String("state", "", "state directory for the catalog and the log (default /var/lib/epochfs/<mountpoint>)")
	fg := f.Bool("foreground", false, "stay attached (for systemd); log to stderr")
	rescan := f.Bool("rescan", false, "walk the source again even if the catalog is complete")
	waitWalk := f.Bool("wait-walk", false, "return only once the source has been walked (a first mount serves while it walks)")
	noPT := f.Bool("no-passthrough", false, "serve resident files through the daemon instead of FUSE passthrough")
	ready := f.Int("ready-fd", -1, "internal: report readiness on this descriptor")
	shutdownTimeout := f.Duration("shutdown-timeout", daemon.DefaultShutdownTimeout, "internal: how long the daemon waits for its closes before it exits anyway")
	userRef := f.String("user-ref", "", "count ID (e.g. a Slurm job id) as a user of the mount; 'epochfs unmount --user-ref ID' unmounts after the last")
	keep := f.Bool("keep", false, "never unmount on 'epochfs unmount --user-ref' (only a plain 'epochfs unmount' does)")
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
	resolvePaths(&cfg)
	if *shutdownTimeout <= 0 {
		return nil, usageErr("--shutdown-timeout %s: want a positive duration", *shutdownTimeout)
	}
	if err := checkUserRef(*userRef); err != nil {
		return nil, err
	}
	return &mountArgs{cfg: cfg, foreground: *fg, rescan: *rescan, waitWalk: *waitWalk, noPassthrough: *noPT, readyFD: *ready,
		shutdownTimeout: *shutdownTimeout, userRef: *userRef, keep: *keep, configID: configID(cfg)}, nil
}

// resolvePaths makes the config's paths absolute and fills in the default
// state directory, as a mount sees them.
func resolvePaths(cfg *config.Config) {
	for _, p := range []*string{&cfg.Source, &cfg.Mountpoint, &cfg.StateDir} {
		if *p != "" {
			if abs, err := filepath.Abs(*p); err == nil {
				*p = abs
			}
		}
	}
	if cfg.StateDir == "" && cfg.Mountpoint != "" {
		cfg.StateDir = filepath.Join("/var/lib/epochfs", strings.ReplaceAll(strings.Trim(cfg.Mountpoint, "/"), "/", "_"))
	}
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
	if os.Geteuid() != 0 {
		if err := checkUnprivileged(c.Mountpoint); err != nil {
			return err
		}
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

// isMountpoint reports whether dir is a mount point.
func isMountpoint(dir string) bool {
	_, ok := daemon.FindMount(dir)
	return ok
}

// checkUnprivileged reports, before anything is started, what would make
// fusermount3 refuse the mount of a user who is not root; fusermount3's
// own refusal reaches only the daemon's log.
func checkUnprivileged(mnt string) error {
	if _, err := exec.LookPath("fusermount3"); err != nil {
		if _, err2 := exec.LookPath("fusermount"); err2 != nil {
			return usageErr("mounting as a user other than root needs fusermount3, which is not installed: install Debian's fuse3, or mount as root")
		}
	}
	if err := syscall.Access(mnt, 2|1); err != nil { // W_OK|X_OK
		return usageErr("mount point %s: not writable by uid %d (fusermount3 mounts only on directories the user may write): use a directory of your own, or mount as root", mnt, os.Geteuid())
	}
	return nil
}
