package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/epochfs/epochfs/internal/ctlpath"
	"github.com/epochfs/epochfs/internal/sampler"
)

// Next returns the next batch of a job of world size 1 (its next file):
// dataset-relative paths, one per line, quoted by package ctlpath when they
// are not plain lines. At the end of an epoch it returns (nil, true, nil)
// once; the next call starts the next epoch. A job of several ranks has no
// batches of its own: each rank reads its own (NextRank).
func (m *Manager) Next(ctx context.Context, ref Ref) (paths []byte, endOfEpoch bool, err error) {
	j, err := m.jobOf(ref)
	if err != nil {
		return nil, false, err
	}
	if err := j.soloRank(ref.Name, "next"); err != nil {
		return nil, false, err
	}
	return m.NextRank(ctx, ref, 0)
}

// soloRank refuses a read of the job's own file (next, batch) when the
// job has ranks: each rank reads rank/R/file.
func (j *job) soloRank(name, file string) error {
	if w := j.cfg.WorldSize; w != 1 {
		return fmt.Errorf("%w: job %q has world_size=%d: each rank reads rank/R/%s (R in 0..%d)", ErrInvalid, name, w, file, w-1)
	}
	return nil
}

// NextRank returns the rank's next batch, as Next, with torch's
// DistributedSampler counts over the job's ranks (sampler.NextRank). A rank
// that ended its epoch and would run two epochs ahead of the slowest live
// rank waits here, its lease renewed, until the others move on or are lost,
// or ctx ends (the error then wraps ctx's).
func (m *Manager) NextRank(ctx context.Context, ref Ref, rank int) (paths []byte, endOfEpoch bool, err error) {
	j, err := m.jobOf(ref)
	if err != nil {
		return nil, false, err
	}
	batch, end, err := m.nextIndices(ctx, j, rank)
	if err != nil || end {
		return nil, end, err
	}
	var b bytes.Buffer
	for _, i := range batch {
		b.WriteString(ctlpath.Quote(m.fileList()[i].Path))
		b.WriteByte('\n')
	}
	return b.Bytes(), false, nil
}

// nextIndices is NextRank's batch of job j as sample indices. The
// sampler knows j by its key: once j ends, it answers ErrNoJob, whatever
// job has j's name by then.
func (m *Manager) nextIndices(ctx context.Context, j *job, rank int) (batch []int, endOfEpoch bool, err error) {
	renew := m.renewEvery()
	key := rankKey{j.key, rank}
	waiting := false
	defer func() {
		if waiting {
			m.mu.Lock()
			if m.waiting[key]--; m.waiting[key] == 0 {
				delete(m.waiting, key)
			}
			m.mu.Unlock()
		}
	}()
	for {
		m.mu.Lock()
		moved := m.moved
		m.mu.Unlock()
		m.grow() // files a refresh added join the epoch this read may begin
		batch, end, err := m.s.NextRank(j.key, rank)
		if errors.Is(err, sampler.ErrRankAhead) || errors.Is(err, sampler.ErrClaimPending) {
			if !waiting && errors.Is(err, sampler.ErrRankAhead) {
				waiting = true
				m.mu.Lock()
				m.waiting[key]++
				m.mu.Unlock()
			}
			t := time.NewTimer(renew)
			select {
			case <-moved:
			case <-t.C: // the next try renews the lease
			case <-ctx.Done():
				t.Stop()
				return nil, false, fmt.Errorf("jobs: %s rank %d waiting for the slowest rank: %w", nameOf(j.key), rank, ctx.Err())
			}
			t.Stop()
			continue
		}
		if err != nil {
			return nil, false, wrap(err)
		}
		m.mu.Lock()
		m.movedLocked()
		m.mu.Unlock()
		// Releases first: a released entry stays readable for its grace
		// period, so the reader that comes after this call still hits it.
		m.applyReleases()
		m.wakeUp()
		return batch, end, nil
	}
}

// rankKey names a rank of a job (the job by its key).
type rankKey struct {
	job  string
	rank int
}

// renewEvery is how often a waiting rank renews its lease.
func (m *Manager) renewEvery() time.Duration {
	if l := m.s.Lease(); l > 0 {
		return min(l/4, time.Second)
	}
	return time.Second
}

// Status returns the job's status file: key=value lines.
func (m *Manager) Status(ref Ref) ([]byte, error) {
	j, err := m.jobOf(ref)
	if err != nil {
		return nil, err
	}
	st, err := m.s.Status(j.key)
	if err != nil {
		return nil, wrap(err)
	}
	lost := "none"
	if len(st.Lost) > 0 {
		s := make([]string, len(st.Lost))
		for i, r := range st.Lost {
			s[i] = strconv.Itoa(r)
		}
		lost = strings.Join(s, ",")
	}
	return render(append([]kv{
		{"name", ref.Name}, {"sampler", st.Kind.String()}, {"batch_size", st.BatchSize}, {"size", st.Size},
		{"world_size", st.WorldSize}, {"drop_last", st.DropLast}, {"per_rank", st.PerRank},
		{"epoch", st.Epoch}, {"position", st.Position}, {"planned", st.Planned}, {"batches", st.Batches},
		{"resident_reads", st.ResidentReads}, {"buffer_reads", st.BufferReads}, {"source_reads", st.SourceReads},
		{"substitutions", st.Substitutions}, {"shared_draws", st.SharedDraws}, {"padded", st.Padded},
		{"skipped", st.Skipped}, {"resumed", st.Resumed}, {"ranks_live", st.RanksLive}, {"ranks_lost", lost}, {"rank_losses", st.RanksLost}, {"dropped", st.Dropped},
		{"cache_substitutions", st.CacheSubstitutions}, {"last_read", stamp(st.LastRead)},
		{"resume", m.resumedFrom(j)},
	}, append(clusterLines(st), m.viewLines(j)...)...)), nil
}

// resumedFrom is the check of the state j resumed from, or none.
func (m *Manager) resumedFrom(j *job) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j.resumed != nil {
		return j.resumed.check
	}
	return "none"
}

// RankStatus returns the status file of one rank.
func (m *Manager) RankStatus(ref Ref, rank int) ([]byte, error) {
	j, err := m.jobOf(ref)
	if err != nil {
		return nil, err
	}
	st, err := m.s.RankStatus(j.key, rank)
	if err != nil {
		return nil, wrap(err)
	}
	m.mu.Lock()
	waiting := m.waiting[rankKey{j.key, rank}] > 0
	m.mu.Unlock()
	state := "reading"
	switch {
	case st.Lost:
		state = "lost"
	case !st.PausedUntil.IsZero():
		state = "paused" // it said so (pause), for a validation pass or the like
	case waiting:
		state = "waiting" // for the slowest rank to finish its epoch
	case st.Ended:
		state = "ended"
	}
	return render([]kv{
		{"rank", st.Rank}, {"state", state}, {"epoch", st.Epoch}, {"position", st.Position}, {"quota", st.Quota},
		{"planned", st.Planned}, {"batches", st.Batches}, {"padded", st.Padded}, {"losses", st.Losses},
		{"rejoins", st.Rejoined}, {"last_read", stamp(st.LastRead)}, {"paused_until", pausedUntil(st.PausedUntil)},
	}), nil
}

// Touch renews a rank's lease, as its reads do.
func (m *Manager) Touch(ref Ref, rank int) error {
	j, err := m.jobOf(ref)
	if err != nil {
		return err
	}
	if err := m.s.Touch(j.key, rank); err != nil {
		return wrap(err)
	}
	return nil
}

// Pause says that rank reads nothing for the duration text gives (a
// validation pass, a long checkpoint): "300" (seconds) or "5m", at most
// sampler.MaxPause; "0" ends a pause. The rank's lease runs from the
// pause's end; its next read ends the pause.
func (m *Manager) Pause(ref Ref, rank int, text string) error {
	d, err := parsePause(text)
	if err != nil {
		return err
	}
	j, err := m.jobOf(ref)
	if err != nil {
		return err
	}
	if err := m.s.Pause(j.key, rank, d); err != nil {
		return wrap(err)
	}
	return nil
}

// parsePause reads a pause: whole seconds, or a Go duration.
func parsePause(text string) (time.Duration, error) {
	text = strings.TrimSpace(text)
	var d time.Duration
	if n, err := strconv.ParseUint(text, 10, 32); err == nil {
		d = time.Duration(n) * time.Second
	} else if d, err = time.ParseDuration(text); err != nil {
		return 0, fmt.Errorf("%w: pause %q: want seconds (300) or a duration (5m, 1h30m)", ErrInvalid, clip(text))
	}
	if d < 0 || d > sampler.MaxPause {
		return 0, fmt.Errorf("%w: pause %q: want 0 to %v", ErrInvalid, clip(text), sampler.MaxPause)
	}
	return d, nil
}

type kv struct {
	k string
	v any
}

func render(kvs []kv) []byte {
	var b bytes.Buffer
	for _, p := range kvs {
		fmt.Fprintf(&b, "%s=%v\n", p.k, p.v)
	}
	return b.Bytes()
}

func pausedUntil(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return stamp(t)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// clusterLines is a cluster job's part of its status file.
func clusterLines(st sampler.JobStatus) []kv {
	if !st.Cluster {
		return nil
	}
	return []kv{{"cluster", true}, {"ranks_remote", st.RanksRemote}, {"claimed", st.Claimed},
		{"claimed_away", st.ClaimedAway}, {"claim_fallbacks", st.ClaimFallbacks}, {"taken_over", st.TakenOver}}
}
