package fs

import (
	"bytes"
	"fmt"
	"os"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/status"
)

// status is the mount's status (docs/ctl.md): the mount's identity and
// transport, then each subsystem's section as its owner fills it (the
// placer's with the source's and the catalog's, the jobs', the views'),
// the open path's and the prewarm's, the cluster's, and each tier's.
func (fsys *FS) status() *status.Doc {
	d := status.New()
	d.Text("version", fsys.o.Version)
	d.Text("source", fsys.o.Source)
	d.Text("mountpoint", fsys.o.Mountpoint)
	d.Int("pid", int64(os.Getpid()))
	d.Flag("passthrough", fsys.passthrough.Load(), status.OnOff)
	fsys.transportStatus(d)
	fsys.p.Status(d)
	if fsys.o.Jobs != nil {
		fsys.o.Jobs.MountStatus(d)
	} else {
		d.Int("jobs", 0)
	}
	if v := fsys.o.Views; v != nil {
		v.Engine().Status(d)
	}
	fsys.openStatus(d)
	fsys.prewarmStatus(d)
	if more := fsys.o.MoreStatus; more != nil {
		more(d)
	}
	for i, t := range fsys.p.Tiers() {
		sec := d.Under("tier." + t.Name() + ".")
		t.Status(sec)
		sec.Flag("passthrough", fsys.passthroughTier(i), status.OnOff)
	}
	return d
}

// docBytes is a status document's key=value form.
func docBytes(d *status.Doc, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	return d.Bytes(), nil
}

// dropText is what drop removed since the mount.
func (fsys *FS) dropText() []byte {
	files, bytes := fsys.p.Dropped()
	return []byte(fmt.Sprintf("dropped=%d\nbytes_dropped=%d\npending=%d\n", files, bytes, fsys.dropsPending.Load()))
}

// warmupText is warmup's progress as who sees it: only the files who
// could open count (placement.WarmupProgressAs).
func (fsys *FS) warmupText(who *catalog.Cred) []byte {
	w := fsys.p.WarmupProgressAs(who)
	return []byte(fmt.Sprintf("queued=%d\ndone=%d\nskipped=%d\nbytes_done=%d\nbytes_total=%d\npct=%.2f\n",
		w.Files, w.Done, w.Skipped, w.BytesDone, w.BytesTotal, w.Pct))
}

func (fsys *FS) scrubText() []byte {
	s := fsys.p.ScrubStatus()
	running := 0
	if s.Running {
		running = 1
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "running=%d\npending=%d\nfinished=%d\nkind=%s\n", running, s.Pending, s.Finished, s.Kind)
	fmt.Fprintf(&b, "checked=%d\nchanged=%d\nadded=%d\nremoved=%d\ndropped=%d\nheld=%d\nerrors=%d\n",
		s.Checked, s.Changed, s.Added, s.Removed, s.Dropped, s.Held, s.Errors)
	fmt.Fprintf(&b, "took_s=%.3f\nlast_error=%s\n", s.Took.Seconds(), s.LastErr)
	return b.Bytes()
}
