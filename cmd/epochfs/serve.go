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
// The checks are internal/mounts/check.go's and prepare.go's, the start
// in the background internal/mounts/daemonize.go's; the daemon process is
// daemon.Serve, with its options from daemon.FromConfig.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/epochfs/epochfs/internal/daemon"
	"github.com/epochfs/epochfs/internal/mounts"
)

func mountCmdFlags(f *pflag.FlagSet) runFunc {
	parse := mountFlags(f)
	return func(pos []string, stdout, stderr io.Writer) error {
		ma, err := parse(pos)
		if err != nil {
			return err
		}
		return runMount(ma, flagArgs(f, pos), stdout, stderr)
	}
}

// flagArgs writes the flags set on f and the positional arguments back as
// arguments (for the daemon mount starts).
func flagArgs(f *pflag.FlagSet, pos []string) []string {
	var out []string
	f.Visit(func(fl *pflag.Flag) {
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				out = append(out, "--"+fl.Name+"="+v)
			}
			return
		}
		out = append(out, "--"+fl.Name+"="+fl.Value.String())
	})
	return append(append(out, "--"), pos...)
}

// runMount mounts ma; args are its arguments, for the daemon it starts.
func runMount(ma *mountArgs, args []string, stdout, stderr io.Writer) error {
	if ma.readyFD >= 0 {
		// The daemon started by mounts.Daemonize: its parent holds the locks
		// and has done the checks. Unmounted by umount(8) rather than
		// `epochfs unmount`, it removes the mount point's lock file itself.
		err := serve(ma, stderr, nil)
		mounts.TidyMountpoint(ma.cfg.Mountpoint)
		return err
	}
	mnt := ma.cfg.Mountpoint
	lk, err := lockMountpoint(mnt, stderr)
	if err != nil {
		return err
	}
	defer mounts.ReleaseMountpoint(lk, mnt)
	found, err := mounts.PrepareMountpoint(mnt, ma.cfg.Source, ma.configID, warn)
	if err != nil {
		return exitFor(err)
	}
	switch {
	case found.Served:
		if found.OtherConfig {
			fmt.Fprintf(stderr, "epochfs mount: warning: %s is mounted with another configuration (pid %d); keeping it: unmount it and mount again to apply this one\n", mnt, found.PID)
		}
		fmt.Fprintf(stdout, "epochfs: %s is already mounted at %s (pid %d); nothing to do\n", found.Source, mnt, found.PID)
		return addUser(mnt, ma.userRef, ma.keep)
	case found.Cleared:
		fmt.Fprintf(stdout, "epochfs: cleared the dead epochfs mount at %s (its daemon is gone)\n", mnt)
	}
	sick, err := mounts.CheckPaths(mountPaths(ma))
	if err != nil {
		return exitFor(err)
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
	if err := mounts.CheckStateFreeFor(ma.cfg.StateDir, mnt); err != nil {
		return exitFor(err)
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
	logPath := filepath.Join(ma.cfg.StateDir, "epochfs.log")
	pid, err := mounts.Daemonize(append([]string{"mount", "--foreground", fmt.Sprintf("--ready-fd=%d", mounts.ReadyFD)}, args...), mnt, logPath)
	if err != nil {
		var de *mounts.DaemonError
		if errors.As(err, &de) && de.Code != 0 {
			return &exitError{code: de.Code, err: err}
		}
		return runtimeErr("%v", err)
	}
	fmt.Fprintf(stdout, "epochfs: %s mounted at %s (pid %d, log %s)\n", ma.cfg.Source, mnt, pid, logPath)
	if err := addUser(mnt, ma.userRef, keep); err != nil {
		return err
	}
	if ma.waitWalk {
		return waitWalk(mnt, stderr)
	}
	noteWalk(mnt, stderr)
	return nil
}

// mountPaths are the paths a mount checks before it starts its daemon.
func mountPaths(ma *mountArgs) mounts.Paths {
	c := ma.cfg
	_, known := daemon.LastSourceID(c.StateDir, c.Source)
	p := mounts.Paths{Source: c.Source, Mountpoint: c.Mountpoint, StateDir: c.StateDir,
		SourceTimeout: c.Placement.SourceTimeoutDuration(), Known: known}
	for _, t := range c.Tiers {
		p.Tiers = append(p.Tiers, mounts.TierPath{Name: t.Name, Path: t.Path})
	}
	return p
}

// exitFor is err with the exit code of its kind: 2 for what the caller
// gave (mounts.UsageError), 1 for the rest.
func exitFor(err error) error {
	var ue *mounts.UsageError
	if errors.As(err, &ue) {
		return &exitError{code: exitUsage, err: err}
	}
	return &exitError{code: exitRuntime, err: err}
}

// serve runs the daemon in this process until the mount goes away or a
// signal comes. onReady, if set, runs once the mount answers. A daemon
// started by mounts.Daemonize reports its failure, with its exit code, to the
// command that waits for it.
func serve(ma *mountArgs, stderr io.Writer, onReady func() error) error {
	ready := mounts.OpenReadiness(ma.readyFD)
	err := serveWith(ma, stderr, ready, onReady)
	if err != nil {
		code := exitRuntime
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		ready.Fail(code, err)
	}
	return err
}

func serveWith(ma *mountArgs, stderr io.Writer, ready *mounts.Readiness, onReady func() error) error {
	cfg := ma.cfg
	log := daemon.NewLogger(cfg.Log, stderr)
	defer log.Sync()
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	o, err := daemon.FromConfig(cfg)
	if err != nil {
		return usageErr("%v", err)
	}
	o.Rescan = ma.rescan
	// With a parent (mounts.Daemonize) the parent waits for the walk; in the
	// foreground the daemon does.
	o.WaitWalk = ma.waitWalk && ma.readyFD < 0
	o.SourceOptions.Patience = ma.sourcePatience
	o.FUSE.NoPassthrough, o.FUSE.Version = ma.noPassthrough, version
	o.ShutdownTimeout = ma.shutdownTimeout
	o.RuntimeDir, o.ConfigID = mounts.RuntimeDir(), ma.configID
	o.Logger = log
	err = daemon.Serve(ctx, o, ready, onReady)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, daemon.ErrConfig):
		return usageErr("%v", err)
	case errors.Is(err, daemon.ErrStateInUse):
		return &exitError{code: exitRuntime, err: err}
	case errors.Is(err, daemon.ErrMount) && os.Geteuid() != 0 && ready == nil:
		return runtimeErr("cannot mount %s as uid %d: %v (fusermount3's reason is printed above): mount as root, or fix what it says", cfg.Mountpoint, os.Geteuid(), err)
	}
	return runtimeErr("%v", err)
}
