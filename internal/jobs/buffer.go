package jobs

import (
	"time"

	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// The shared buffer, run for the sampler. The placer holds the bytes and
// decides the budget's split (placement.Buffer.Slots); the sampler
// holds the index. A loop, every Options.Interval and whenever a batch is
// handed out, reaps expired leases, applies the sampler's releases to the
// buffer, and asks the sampler what to prefetch (up to Options.Fetchers
// fetches in flight): the placer reads those files whole into the buffer,
// and each is reported Installed or Failed. A released entry is not
// dropped at once: the rank that was handed it last reads it right after
// its next call, so the buffer keeps it until its room is needed or its
// grace period ends (placement.Buffer.Release). A demand read of a file
// that fits no tier is offered to the sampler through placement's
// DemandHook.

func (m *Manager) wakeUp() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *Manager) loop() {
	defer close(m.done)
	t := time.NewTicker(m.o.Interval)
	defer t.Stop()
	ticking := true
	lost := 0
	for {
		var tick <-chan time.Time
		if ticking {
			tick = t.C
		}
		select {
		case <-m.ctx.Done():
			return
		case <-tick:
			// Reaping loses ranks (the ranks waiting for them may go
			// on) and drops jobs.
			dropped := m.s.Reap()
			if l := m.s.Stats().RanksLost; l != lost || len(dropped) > 0 {
				lost = l
				m.mu.Lock()
				m.syncLocked()
				m.movedLocked()
				m.mu.Unlock()
			}
			m.p.Buffer().Sweep()
		case <-m.wake:
		}
		m.grow()
		m.applyReleases()
		m.prefetch()
		m.produce()
		// With no job, no fetch in flight and an empty buffer there is
		// nothing to reap, sweep or prefetch: the loop sleeps until
		// Register (or a fetch, a release) wakes it, instead of waking
		// the idle daemon Interval after Interval.
		if idle := m.idle(); idle && ticking {
			t.Stop()
			ticking = false
		} else if !idle && !ticking {
			t.Reset(m.o.Interval)
			ticking = true
		}
	}
}

// idle reports that the loop has nothing to do on its ticks.
func (m *Manager) idle() bool {
	m.mu.Lock()
	n := len(m.jobs)
	m.mu.Unlock()
	return n == 0 && len(m.inflight) == 0 && m.p.Buffer().Stats().Entries == 0
}

func (m *Manager) applyReleases() {
	for _, i := range m.s.Releases(nil) {
		m.p.Buffer().Release(m.fileList().At(i))
	}
}

// prefetch starts as many fetches as there are free slots.
func (m *Manager) prefetch() {
	free := cap(m.inflight) - len(m.inflight)
	if free <= 0 {
		return
	}
	for _, i := range m.s.Prefetch(free) {
		m.inflight <- struct{}{}
		m.fetchWG.Add(1)
		e := m.fileList().At(i)
		m.p.Buffer().Fetch(e, func(err error) {
			defer m.fetchWG.Done()
			if err != nil {
				m.s.Failed(i)
			} else if !m.s.Installed(i) {
				// Every job was handed it while it was being fetched:
				// their readers are on their way.
				m.p.Buffer().Release(e)
			}
			<-m.inflight
			m.wakeUp()
		})
	}
}

// wanted is placement's question before a demand read of a file that fits
// no tier: only when a live job still wants e this epoch does the read go
// through the buffer.
func (m *Manager) wanted(e *catalog.Entry) bool {
	return m.built.Load() && e.Index >= 0 && int(e.Index) < m.fileList().Len() && m.s.Wanted(int(e.Index))
}

// onFetched is placement's hook once a demand read buffered a file.
func (m *Manager) onFetched(e *catalog.Entry) bool {
	if !m.built.Load() || e.Index < 0 || int(e.Index) >= m.fileList().Len() {
		return false
	}
	return m.s.Installed(int(e.Index))
}

// Hooks are the manager's functions for the placer and the views' engine,
// which the daemon installs (daemon.New installs every hook): demand tells
// the placer which demand reads the shared buffer should keep (nil without
// a buffer); finished wakes the producer of the views' prefetches when a
// production ends, so that it refills the pool at once (nil without
// views). Both may be called before the manager has started (the catalog
// still walked): they do nothing then.
func (m *Manager) Hooks() (demand *placement.DemandHook, finished func()) {
	if m.p.Buffer().Slots() > 0 {
		demand = &placement.DemandHook{Wanted: m.wanted, Keep: m.onFetched}
	}
	if m.vs != nil {
		finished = m.wakeUp
	}
	return demand, finished
}
