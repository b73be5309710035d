package fs

import (
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
	files, bytes := fsys.p.Scrubber().Dropped()
	d := status.New()
	d.Int("dropped", files)
	d.Int("bytes_dropped", bytes)
	d.Int("pending", fsys.dropsPending.Load())
	return d.Bytes()
}

// warmupText is warmup's progress as who sees it: only the files who
// could open count (placement.Warmups.Progress).
func (fsys *FS) warmupText(who *catalog.Cred) []byte {
	w := fsys.p.Warmups().Progress(who)
	d := status.New()
	d.Int("queued", w.Files)
	d.Int("done", w.Done)
	d.Int("skipped", w.Skipped)
	d.Int("bytes_done", w.BytesDone)
	d.Int("bytes_total", w.BytesTotal)
	d.Float("pct", w.Pct, 2)
	return d.Bytes()
}

// scrubText is the refresh's (or verify's) progress.
func (fsys *FS) scrubText() []byte {
	s := fsys.p.Scrubber().Status()
	d := status.New()
	running := int64(0)
	if s.Running {
		running = 1
	}
	d.Int("running", running)
	d.Int("pending", int64(s.Pending))
	d.Int("finished", s.Finished)
	d.Text("kind", s.Kind.String())
	for _, f := range []struct {
		k string
		v int64
	}{{"checked", s.Checked}, {"changed", s.Changed}, {"added", s.Added}, {"removed", s.Removed},
		{"dropped", s.Dropped}, {"held", s.Held}, {"errors", s.Errors}} {
		d.Int(f.k, f.v)
	}
	d.Float("took_s", s.Took.Seconds(), 3)
	d.Text("last_error", s.LastErr)
	return d.Bytes()
}
