package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/internal/config"
	"github.com/epochfs/epochfs/internal/daemon"
	"github.com/epochfs/epochfs/internal/mounts"
	"github.com/epochfs/epochfs/internal/tier"
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
	// (internal/daemon/shutdown.go).
	shutdownTimeout time.Duration
	// sourcePatience is how long the daemon waits for a source an
	// earlier mount knew before it mounts without it (internal: the
	// command that found the source sick passes a short one).
	sourcePatience time.Duration
	// userRef is the user (a job) this mount is for (internal/mounts/users.go); keep
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
	patience := f.Duration("source-patience", sourcePatience, "internal: how long the daemon waits for a source an earlier mount knew before it mounts without it")
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
		shutdownTimeout: *shutdownTimeout, sourcePatience: *patience, userRef: *userRef, keep: *keep, configID: configID(cfg)}, nil
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

// checkPaths reports bad input before anything is created or mounted;
// sick, if set, is why the source cannot be checked now (it hangs or
// fails, and an earlier mount with this state directory knew it: the
// mount serves what that mount left).
func checkPaths(c *config.Config) (sick error, err error) {
	src, sick, err := checkSource(c)
	if err != nil {
		return nil, err
	}
	return sick, checkOtherPaths(c, src)
}

// sourcePatience is how long a mount waits for the source's first answer
// before it mounts from an earlier mount's catalog.
const sourcePatience = time.Second

// checkSource checks that the source is a readable directory and returns
// its path with symlinks resolved. A source that fails or does not answer
// within sourcePatience, when an earlier mount with this state directory
// knew it, is sick (not an error); otherwise its failure is the error,
// and a source that does not answer within source_timeout fails the
// mount (nothing of it hangs past that).
func checkSource(c *config.Config) (resolved string, sick, err error) {
	type answer struct {
		resolved string
		err      error
	}
	ch := make(chan answer, 1) // the goroutine of an unanswered check is left behind
	go func() {
		r, err := lookAtSource(c.Source)
		ch <- answer{r, err}
	}()
	_, known := daemon.LastSourceID(c.StateDir, c.Source)
	wait := c.Placement.SourceTimeoutDuration()
	if known {
		wait = min(wait, sourcePatience)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case a := <-ch:
		if a.err == nil {
			return a.resolved, nil, nil
		}
		if known {
			return filepath.Clean(c.Source), a.err, nil
		}
		return "", nil, a.err
	case <-t.C:
		if known {
			return filepath.Clean(c.Source), fmt.Errorf("source %s: no answer within %v", c.Source, wait), nil
		}
		return "", nil, runtimeErr("source %s: no answer within source_timeout (%v): its file system hangs? nothing is mounted", c.Source, wait)
	}
}

// lookAtSource checks that src is a readable directory; it returns src
// with its symlinks resolved.
func lookAtSource(src string) (string, error) {
	st, err := os.Stat(src)
	if err != nil {
		return "", usageErr("source %s: %v", src, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return "", usageErr("source %s: not a directory", src)
	}
	d, err := os.Open(src)
	if err == nil {
		_, err = d.Readdirnames(1)
		d.Close()
		if errors.Is(err, io.EOF) {
			err = nil
		}
	}
	if err != nil {
		return "", usageErr("source %s: not readable: %v", src, err)
	}
	r, err := filepath.EvalSymlinks(src)
	if err != nil {
		r = filepath.Clean(src)
	}
	return r, nil
}

// checkOtherPaths checks the mount point, the tiers and the state
// directory, and that none lies in the source (src, resolved) or the
// source in them.
func checkOtherPaths(c *config.Config, src string) error {
	st, err := os.Stat(c.Mountpoint)
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
	if err := tier.CheckPathsResolved(src, c.Mountpoint, c.Source); err != nil {
		return usageErr("mount point: %v", err)
	}
	if os.Geteuid() != 0 {
		if err := checkUnprivileged(c.Mountpoint); err != nil {
			return err
		}
	}
	for _, t := range c.Tiers {
		if err := tier.CheckPathsResolved(src, t.Path, c.Source); err != nil {
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
	if err := tier.CheckPathsResolved(src, c.StateDir, c.Source); err != nil {
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
	_, ok := mounts.FindMount(dir)
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
