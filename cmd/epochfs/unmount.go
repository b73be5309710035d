package main

// `epochfs unmount` succeeds only once the daemon that served the mount has
// exited: until then it holds the state directory (its lock and the
// catalog), and a mount of the same state directory would fail. The daemon
// is found without asking it (daemon.go). A mount whose daemon is dead has
// no daemon to wait for.
//
// With --user-ref ID it first drops ID from the mount's users (internal/mounts/users.go)
// and unmounts only if no user is left and the mount is not kept. Nothing
// mounted is success with a note (an epilog after a job that did not
// mount), unless --strict. Whatever the flags, a mount at MOUNTPOINT that
// is not epochfs's (a tmpfs, a bind mount, another FUSE file system) is
// refused with exit 2 before anything is touched: a wrong EPOCHFS_MOUNT in
// an epilog must not unmount the node's scratch disk.

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/epochfs/epochfs/internal/mounts"
)

const unmountSynopsis = "unmount [--lazy] [--timeout DURATION] [--user-ref ID] [--strict] {MOUNTPOINT | --config FILE}"

// defaultUnmountTimeout is how long unmount waits for the daemon to exit.
// It is longer than the daemon's own bounded shutdown (twice
// daemon.DefaultShutdownTimeout), so only a daemon that still serves open
// files of a lazily detached mount outlasts it.
const defaultUnmountTimeout = 30 * time.Second

// Long: the refusals before an unmount (what is mounted there, whose, its users, the flags) in the order they apply, then the unmount.
func unmountFlags(f *pflag.FlagSet) runFunc {
	lazy := f.Bool("lazy", false, "detach now even if files are open or the daemon is dead")
	timeout := f.Duration("timeout", defaultUnmountTimeout, "how long to wait for the daemon to exit")
	userRef := f.String("user-ref", "", "drop ID from the mount's users; unmount only if it was the last and the mount is not kept")
	strict := f.Bool("strict", false, "exit 2 when MOUNTPOINT is not mounted (default: exit 0 with a note)")
	cfgFile := f.String("config", "", "unmount the mountpoint of this config file")
	return func(pos []string, stdout, stderr io.Writer) error {
		var err error
		if *cfgFile != "" {
			cfg, err := loadMountConfig(*cfgFile)
			if err != nil {
				return err
			}
			if len(pos) == 1 {
				if abs, _ := filepath.Abs(pos[0]); abs != cfg.Mountpoint {
					return usageErr("%s is not the mountpoint of %s (%s)", pos[0], *cfgFile, cfg.Mountpoint)
				}
			}
			pos = []string{cfg.Mountpoint}
		}
		if len(pos) != 1 {
			return usageErr("want one MOUNTPOINT, or --config FILE")
		}
		if *timeout <= 0 {
			return usageErr("--timeout %s: want a positive duration", *timeout)
		}
		if err := checkUserRef(*userRef); err != nil {
			return err
		}
		mnt, _ := filepath.Abs(pos[0])
		if m, ok := mounts.FindMount(mnt); ok {
			if err := mounts.RefuseForeign(mnt, m); err != nil {
				return exitFor(err)
			}
		}
		lk, err := lockMountpoint(mnt, stderr)
		if err != nil {
			return err
		}
		defer mounts.ReleaseMountpoint(lk, mnt)
		users := mounts.LoadUsers(mnt)
		if *userRef != "" {
			if !slices.Contains(users.Users, *userRef) {
				// Not this user's mount (mounted for other jobs, by hand or
				// by systemd, or this job's mount failed): never its to end.
				fmt.Fprintf(stdout, "epochfs: %s is not used by %s; left as it is\n", mnt, *userRef)
				return nil
			}
			users.Users = slices.DeleteFunc(users.Users, func(s string) bool { return s == *userRef })
			if err := mounts.SaveUsers(mnt, users); err != nil {
				return runtimeErr("users of %s: %v", mnt, err)
			}
			if n := len(users.Users); n > 0 {
				fmt.Fprintf(stdout, "epochfs: %s is still used by %d other user(s) (%s); left mounted\n", mnt, n, strings.Join(users.Users, " "))
				return nil
			}
			if users.Keep {
				fmt.Fprintf(stdout, "epochfs: %s is kept (mounted with --keep); left mounted\n", mnt)
				return nil
			}
		}
		d := mounts.FindDaemon(mnt, warn)
		entry, mounted := mounts.FindMount(mnt)
		detached := *lazy
		switch {
		case mounted:
			if err := mounts.RefuseForeign(mnt, entry); err != nil {
				return exitFor(err) // mounted since the first look
			}
			if err := mounts.CheckMayUnmount(mnt, entry); err != nil {
				return exitFor(err)
			}
			if err := mounts.UnmountExplained(mnt, *lazy); err != nil {
				return exitFor(err)
			}
			// The mount is gone from the mount point: so are its users and
			// its keep, even while its daemon drains (the next mount there
			// starts afresh).
			if err := mounts.SaveUsers(mnt, mounts.Users{}); err != nil {
				fmt.Fprintf(stderr, "epochfs unmount: warning: users of %s: %v\n", mnt, err)
			}
		case d.PID > 0:
			// Detached earlier and still draining: wait for it as after an
			// unmount, so that a retry tells when it is gone.
			detached = true
		default:
			mounts.SaveUsers(mnt, mounts.Users{})
			if *strict {
				return usageErr("%s is not mounted", mnt)
			}
			fmt.Fprintf(stdout, "epochfs: %s is not mounted; nothing to do\n", mnt)
			return nil
		}
		if d.PID == 0 && mounted {
			// Not found before the unmount: look again (a daemon that did not
			// answer status is in the process table), so that "unmounted" is
			// never printed over a daemon still running.
			d = mounts.DaemonByCmdline(mnt, entry.UserID)
		}
		if d.PID > 0 && !mounts.WaitExit(d, *timeout) {
			dev := entry.Dev
			if !mounted {
				dev = d.Dev
			}
			if hs := mounts.Holders(dev); dev != "" && len(hs) > 0 {
				return runtimeErr("%s is unmounted here, but another mount namespace still holds it: %s; its daemon (pid %d) serves it there until it is unmounted there (nsenter -t %d -m umount %s) or those processes exit (see %s)",
					mnt, mounts.HoldersText(hs), d.PID, hs[0].PID, hs[0].Dir, d.LogPath())
			}
			if detached {
				return runtimeErr("%s is detached but its daemon (pid %d) is still running: files are still open on it or the source does not answer; it exits when they are closed (see %s)", mnt, d.PID, d.LogPath())
			}
			return runtimeErr("%s is unmounted but its daemon (pid %d) is still running: it is still closing (the source does not answer?) (see %s)", mnt, d.PID, d.LogPath())
		}
		if err := mounts.SaveUsers(mnt, mounts.Users{}); err != nil {
			fmt.Fprintf(stderr, "epochfs unmount: warning: users of %s: %v\n", mnt, err)
		}
		if d.PID > 0 && mounts.ProcExitingStuck(d.PID, d.Start) {
			fmt.Fprintf(stderr, "epochfs unmount: note: its daemon (pid %d) has exited, but the kernel holds it until the source answers: it was closing a file of the source, which does not answer; the next mount of its state directory takes its lock over\n", d.PID)
		}
		fmt.Fprintf(stdout, "epochfs: unmounted %s\n", mnt)
		return nil
	}
}
