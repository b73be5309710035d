package main

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/epochfs/epochfs/internal/config"
	"github.com/epochfs/epochfs/internal/daemon"
	"github.com/epochfs/epochfs/internal/mounts"
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

// mountFlags defines mount's flags on f and returns the function that
// turns the parsed flags and the positional arguments into a mount.
func mountFlags(f *pflag.FlagSet) func(pos []string) (*mountArgs, error) {
	cfgFile := f.String("config", "", "TOML config file")
	tiers := f.StringArray("tier", nil, "a tier NAME=PATH:QUOTA, fastest first (repeatable; replaces the config's tiers)")
	state := f.String("state", "", "state directory for the catalog and the log (default /var/lib/epochfs/<mountpoint>)")
	fg := f.Bool("foreground", false, "stay attached (for systemd); log to stderr")
	rescan := f.Bool("rescan", false, "walk the source again even if the catalog is complete")
	waitWalk := f.Bool("wait-walk", false, "return only once the source has been walked (a first mount serves while it walks)")
	noPT := f.Bool("no-passthrough", false, "serve resident files through the daemon instead of FUSE passthrough")
	ready := f.Int("ready-fd", -1, "internal: report readiness on this descriptor")
	shutdownTimeout := f.Duration("shutdown-timeout", daemon.DefaultShutdownTimeout, "internal: how long the daemon waits for its closes before it exits anyway")
	patience := f.Duration("source-patience", mounts.SourcePatience, "internal: how long the daemon waits for a source an earlier mount knew before it mounts without it")
	userRef := f.String("user-ref", "", "count ID (e.g. a Slurm job id) as a user of the mount; 'epochfs unmount --user-ref ID' unmounts after the last")
	keep := f.Bool("keep", false, "never unmount on 'epochfs unmount --user-ref' (only a plain 'epochfs unmount' does)")
	return func(pos []string) (*mountArgs, error) {
		var err error
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
		if len(*tiers) > 0 {
			cfg.Tiers = nil
			for _, t := range *tiers {
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
			shutdownTimeout: *shutdownTimeout, sourcePatience: *patience, userRef: *userRef, keep: *keep, configID: daemon.ConfigID(cfg)}, nil
	}
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
