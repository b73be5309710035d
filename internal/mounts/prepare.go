package mounts

import (
	"errors"
	"fmt"
)

// Found is what a mount found at its mount point before it mounts.
type Found struct {
	// Served: a live epochfs of the same source serves the mount point
	// (PID); nothing is to be done. OtherConfig: it was started with
	// another configuration than this mount's.
	Served      bool
	PID         int
	Source      string
	OtherConfig bool
	// Cleared: a dead epochfs mount (its daemon gone) was detached.
	Cleared bool
}

// PrepareMountpoint looks at what is mounted at mnt already: a live
// epochfs of source (Found.Served), of another source (a UsageError), a
// dead epochfs mount, which it detaches (Found.Cleared), or nothing of
// epochfs's (CheckPaths names any other mount). configID is the
// configuration of the mount to be made; warn hears about records that
// cannot be trusted.
func PrepareMountpoint(mnt, source, configID string, warn func(string)) (Found, error) {
	entry, mounted := FindMount(mnt)
	if !mounted || !entry.Epochfs() {
		return Found{}, nil
	}
	if d := FindDaemon(mnt, warn); d.PID > 0 {
		st, err := StatusWithin(mnt, StatusTimeout)
		if err != nil {
			return Found{}, fmt.Errorf("%s is mounted but its daemon (pid %d) does not answer (%v): see %s; 'epochfs unmount --lazy %s' detaches it", mnt, d.PID, err, d.LogPath(), mnt)
		}
		src := st["source"]
		if src != source {
			return Found{}, usagef("%s is already mounted from %s (epochfs pid %d), not from %s: unmount it first ('epochfs unmount %s') or use another mount point", mnt, src, d.PID, source, mnt)
		}
		return Found{Served: true, PID: d.PID, Source: src, OtherConfig: d.Config != "" && d.Config != configID}, nil
	}
	// The kernel still has the mount but nobody serves it.
	if err := Unmount(mnt, true); err != nil {
		return Found{}, fmt.Errorf("%s is a dead epochfs mount (its daemon is gone) and cannot be cleared: %v", mnt, err)
	}
	return Found{Cleared: true}, nil
}

// CheckStateFreeFor fails when a live daemon holds the state directory
// dir that a mount at mnt is to use: a UsageError if it serves another
// mount point (two catalogs cannot share it), else an error matching
// ErrStateInUse (a daemon of this mount point still draining, or one
// whose mount another namespace holds).
func CheckStateFreeFor(dir, mnt string) error {
	err := CheckStateFree(dir)
	if err == nil || !errors.Is(err, ErrStateInUse) {
		return err
	}
	r, ok := RecordOfState(dir)
	if !ok {
		return err
	}
	// A daemon that still serves its mount elsewhere is a configuration
	// error; one draining a detached mount goes away.
	if r.Mountpoint != mnt && servesMount(r) {
		what := "epochfs"
		if r.Source != "" {
			what = "epochfs mount of " + r.Source
		}
		return usagef("state directory %s is in use by the %s at %s (pid %d): give this mount its own --state", dir, what, r.Mountpoint, r.PID)
	}
	if r.Dev != "" {
		if hs := Holders(r.Dev); len(hs) > 0 {
			return fmt.Errorf("%w: its mount is still held by another mount namespace: %s; it ends when it is unmounted there (nsenter -t %d -m umount %s) or those processes exit",
				err, HoldersText(hs), hs[0].PID, hs[0].Dir)
		}
	}
	return err
}

// servesMount reports whether r's mount is still at its mount point.
func servesMount(r Record) bool {
	dev, ok := MountDev(r.Mountpoint)
	return ok && dev == r.Dev
}
