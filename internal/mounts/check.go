package mounts

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/internal/tier"
)

// A UsageError is a mount or unmount refused for what its caller gave: a
// path that cannot serve, a mount point in use by something else. The
// command line exits 2 for it, and 1 for any other error.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// usagef is a UsageError from a format.
func usagef(format string, a ...any) error {
	return &UsageError{Err: fmt.Errorf(format, a...)}
}

// Paths are what a mount is given: the source, the mount point, the state
// directory and the tiers' directories.
type Paths struct {
	Source, Mountpoint, StateDir string
	Tiers                        []TierPath
	// SourceTimeout bounds the wait for the source's first answer.
	SourceTimeout time.Duration
	// Known: an earlier mount with this state directory knew the source,
	// so that the mount can serve what it left while the source is sick.
	Known bool
}

// TierPath is a tier's name and directory.
type TierPath struct{ Name, Path string }

// SourcePatience is how long a mount waits for the source's first answer
// before it mounts from an earlier mount's catalog.
const SourcePatience = time.Second

// CheckPaths reports bad input before anything is created or mounted;
// sick, if set, is why the source cannot be checked now (it hangs or
// fails, and an earlier mount with this state directory knew it: the
// mount serves what that mount left).
func CheckPaths(p Paths) (sick error, err error) {
	src, sick, err := checkSource(p)
	if err != nil {
		return nil, err
	}
	return sick, checkOtherPaths(p, src)
}

// checkSource checks that the source is a readable directory and returns
// its path with symlinks resolved. A source that fails or does not answer
// within SourcePatience, when an earlier mount knew it, is sick (not an
// error); otherwise its failure is the error, and a source that does not
// answer within the source timeout fails the mount (nothing of it hangs
// past that).
func checkSource(p Paths) (resolved string, sick, err error) {
	type answer struct {
		resolved string
		err      error
	}
	ch := make(chan answer, 1) // the goroutine of an unanswered check is left behind
	go func() {
		r, err := lookAtSource(p.Source)
		ch <- answer{r, err}
	}()
	wait := p.SourceTimeout
	if p.Known {
		wait = min(wait, SourcePatience)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case a := <-ch:
		if a.err == nil {
			return a.resolved, nil, nil
		}
		if p.Known {
			return filepath.Clean(p.Source), a.err, nil
		}
		return "", nil, a.err
	case <-t.C:
		if p.Known {
			return filepath.Clean(p.Source), fmt.Errorf("source %s: no answer within %v", p.Source, wait), nil
		}
		return "", nil, fmt.Errorf("source %s: no answer within source_timeout (%v): its file system hangs? nothing is mounted", p.Source, wait)
	}
}

// lookAtSource checks that src is a readable directory; it returns src
// with its symlinks resolved.
func lookAtSource(src string) (string, error) {
	st, err := os.Stat(src)
	if err != nil {
		return "", usagef("source %s: %v", src, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return "", usagef("source %s: not a directory", src)
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
		return "", usagef("source %s: not readable: %v", src, err)
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
func checkOtherPaths(p Paths, src string) error {
	st, err := os.Stat(p.Mountpoint)
	if err != nil {
		return usagef("mount point %s: %v", p.Mountpoint, errors.Unwrap(err))
	}
	if !st.IsDir() {
		return usagef("mount point %s: not a directory", p.Mountpoint)
	}
	if _, ok := FindMount(p.Mountpoint); ok {
		return usagef("mount point %s: already a mount (run 'epochfs unmount %s' first)", p.Mountpoint, p.Mountpoint)
	}
	if empty, err := isEmptyDir(p.Mountpoint); err != nil {
		return usagef("mount point %s: %v", p.Mountpoint, err)
	} else if !empty {
		return usagef("mount point %s: not empty", p.Mountpoint)
	}
	if err := tier.CheckPathsResolved(src, p.Mountpoint, p.Source); err != nil {
		return usagef("mount point: %v", err)
	}
	if os.Geteuid() != 0 {
		if err := checkUnprivileged(p.Mountpoint); err != nil {
			return err
		}
	}
	for _, t := range p.Tiers {
		if err := tier.CheckPathsResolved(src, t.Path, p.Source); err != nil {
			return usagef("tier %q: %v", t.Name, err)
		}
		if err := tier.CheckPaths(p.Mountpoint, t.Path); err != nil {
			return usagef("tier %q: %v", t.Name, err)
		}
	}
	for i, a := range p.Tiers {
		for _, b := range p.Tiers[i+1:] {
			if filepath.Clean(a.Path) == filepath.Clean(b.Path) {
				return usagef("tiers %q and %q share the path %s", a.Name, b.Name, a.Path)
			}
		}
	}
	if err := tier.CheckPathsResolved(src, p.StateDir, p.Source); err != nil {
		return usagef("state directory: %v", err)
	}
	return nil
}

// isEmptyDir reports whether dir has no entries.
func isEmptyDir(dir string) (bool, error) {
	d, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer d.Close()
	names, err := d.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return len(names) == 0, err
}

// checkUnprivileged reports, before anything is started, what would make
// fusermount3 refuse the mount of a user who is not root; fusermount3's
// own refusal reaches only the daemon's log.
func checkUnprivileged(mnt string) error {
	if _, err := exec.LookPath("fusermount3"); err != nil {
		if _, err2 := exec.LookPath("fusermount"); err2 != nil {
			return usagef("mounting as a user other than root needs fusermount3, which is not installed: install Debian's fuse3, or mount as root")
		}
	}
	if err := syscall.Access(mnt, 2|1); err != nil { // W_OK|X_OK
		return usagef("mount point %s: not writable by uid %d (fusermount3 mounts only on directories the user may write): use a directory of your own, or mount as root", mnt, os.Geteuid())
	}
	return nil
}
