package source

import (
	"context"
	"sync"
	"time"

	"github.com/epochfs/epochfs/internal/status"
	"go.uber.org/zap"
)

// The source's health, kept by a prober and read from memory: what the
// daemon answers about the source (status, metrics, the doctor) never
// waits on it. The prober checks the root's identity every ProbeInterval
// (checkIdentity, under the source's deadline); while a check has not
// answered for HungAfter the source is "unresponsive" (a hung PFS), and
// no other check is started meanwhile (a stuck check holds one stuck
// call, not one per interval).

// Source states, as Health reports them.
const (
	SourceAvailable    = "available"
	SourceUnavailable  = "unavailable"  // its root is not the mount's file system (source.go)
	SourceUnresponsive = "unresponsive" // a check has not answered for HungAfter
)

// Health is what the source's checks last learnt.
type Health struct {
	State string
	// Since is when the source became unavailable or unresponsive (zero
	// while available).
	Since time.Time
	// LastAnswer is when a check of the source last answered.
	LastAnswer time.Time
}

// Health reports the source's health from memory.
func (s *Source) Health() Health {
	h := Health{State: SourceAvailable}
	if t := s.lastAnswer.Load(); t != 0 {
		h.LastAnswer = time.Unix(0, t)
	}
	if t := s.unavailableSince.Load(); t != 0 {
		h.State, h.Since = SourceUnavailable, time.Unix(0, t)
		return h
	}
	if t := s.checkStarted.Load(); t != 0 && time.Since(time.Unix(0, t)) > s.o.HungAfter {
		h.State, h.Since = SourceUnresponsive, time.Unix(0, t)
	}
	return h
}

// prober checks the source every ProbeInterval until stop is closed.
type prober struct {
	stop chan struct{}
	once sync.Once
	done chan struct{}
}

func (s *Source) startProber() {
	p := &prober{stop: make(chan struct{}), done: make(chan struct{})}
	s.probe = p
	go func() {
		defer close(p.done)
		t := time.NewTicker(s.o.ProbeInterval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			if s.checkStarted.Load() != 0 {
				continue // the last check is still stuck in the source
			}
			s.checkIdentity(context.Background())
		}
	}()
}

// stopProber ends the prober; a check it runs ends within the source's
// deadline.
func (s *Source) stopProber() {
	if p := s.probe; p != nil {
		p.once.Do(func() { close(p.stop) })
		<-p.done
	}
}

// newMount records that the source's root is now another mount of the
// same source, id (checkMu held): a new source, whose files may differ
// from what the old mount had. OnNewMount revalidates them.
func (s *Source) newMount(id rootID) {
	s.id = id
	s.mounts.Add(1)
	s.mountedAt.Store(time.Now().UnixNano())
	s.log.Warn("the source was mounted again: reading the new mount, and checking every file against it",
		zap.String("source", s.o.Root), zap.Uint64("mount_id", id.mnt))
	if s.o.OnNewMount != nil {
		go s.o.OnNewMount()
	}
}

// Mounts reports how many times the source was found mounted anew since
// Open, and when last.
func (s *Source) Mounts() (n int64, last time.Time) {
	if n = s.mounts.Load(); n > 0 {
		last = time.Unix(0, s.mountedAt.Load())
	}
	return n, last
}

// Available reports whether the source root has its identity of the mount
// (checking it if the last check is older than RecheckInterval), and
// since when it has not.
func (s *Source) Available(ctx context.Context) (ok bool, since time.Time) {
	if time.Now().UnixNano()-s.lastCheck.Load() > int64(s.o.RecheckInterval) {
		s.checkIdentity(ctx)
	}
	if t := s.unavailableSince.Load(); t != 0 {
		return false, time.Unix(0, t)
	}
	return true, time.Time{}
}

// Status fills the source's section of the mount's status (docs/ctl.md):
// its traffic, and its health as the prober last found it (status never
// waits on the source).
func (s *Source) Status(d *status.Doc) {
	st := s.Stats()
	d.Int("source_opens", st.Opens)
	d.Int("source_reads", st.Reads)
	d.Int("source_bytes", st.Bytes)
	d.Int("source_stats", st.Stats)
	d.Int("source_errors", st.Errors)
	d.Int("source_timeouts", st.Timeouts)
	d.Int("source_stuck", st.Stuck)
	h := s.Health()
	d.Text("source_state", h.State)
	d.Time("source_unavailable_since", h.Since, time.RFC3339, "")
	d.Time("source_last_answer", h.LastAnswer, time.RFC3339, "")
	// A source mounted again under the live mount is a new source.
	n, at := s.Mounts()
	d.Int("source_mounts", n)
	d.Time("source_mounted_at", at, time.RFC3339, "")
}
