package fs

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/status"
	"go.uber.org/zap"
)

// Prewarm: the copies a former mount left in the tiers, registered with
// the kernel before their first open.
//
// A passthrough open of a resident file needs the copy opened and
// registered as a backing file (file.go); a mount keeps both for later
// opens, but a new mount (the next job's) starts with none. Right after a
// passthrough mount, one goroutine walks the catalog's resident files
// (placement.Placer.Prewarm), keeps each copy and attaches its
// registration, as a first open would, within the kept-copies budget and
// without releasing any copy a reader keeps. A reader that opens a file
// first does the work itself, as without prewarm; one that comes after
// finds the registration. The goroutine ends at unmount.

// prewarm is the state of a mount's prewarm.
type prewarm struct {
	state  atomic.Int32 // prewarmOff, prewarmRunning, prewarmDone
	cancel context.CancelFunc
	done   chan struct{}
	took   atomic.Int64 // nanoseconds, once done
	once   sync.Once
}

const (
	prewarmOff int32 = iota
	prewarmRunning
	prewarmDone
)

// startPrewarm starts the mount's prewarm (passthrough is on).
func (fsys *FS) startPrewarm() {
	ctx, cancel := context.WithCancel(context.Background())
	pw := &fsys.prewarm
	pw.cancel, pw.done = cancel, make(chan struct{})
	pw.state.Store(prewarmRunning)
	go func() {
		defer close(pw.done)
		t0 := time.Now()
		st := fsys.p.Prewarm(ctx, fsys.passthroughTier, func(e *catalog.Entry, c *placement.Resident) error {
			_, err := fsys.attach(fileIno(e.ID(), e.Version()), c)
			if err != nil {
				fsys.refused("prewarm stopped", e.Path(), err)
			}
			return err
		})
		pw.took.Store(int64(time.Since(t0)))
		pw.state.Store(prewarmDone)
		fields := []zap.Field{zap.Int("copies", st.Kept), zap.Int("left", st.Left), zap.Duration("took", time.Since(t0))}
		if st.Stopped != nil {
			fields = append(fields, zap.NamedError("stopped", st.Stopped))
		}
		fsys.log.Info("prewarm done", fields...)
	}()
}

// stopPrewarm ends the prewarm and waits for it (unmount).
func (fsys *FS) stopPrewarm() {
	pw := &fsys.prewarm
	if pw.cancel == nil {
		return
	}
	pw.once.Do(func() {
		pw.cancel()
		<-pw.done
	})
}

// prewarmStatus is the status of the prewarm.
func (fsys *FS) prewarmStatus(d *status.Doc) {
	state := "off"
	switch fsys.prewarm.state.Load() {
	case prewarmRunning:
		state = "running"
	case prewarmDone:
		state = "done"
	}
	d.Text("prewarm", state)
	d.Int("prewarm_copies", fsys.p.ResidentStats().Prewarmed)
	d.Float("prewarm_s", time.Duration(fsys.prewarm.took.Load()).Seconds(), 3)
}
