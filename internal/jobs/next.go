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
	"github.com/epochfs/epochfs/internal/status"
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
		b.WriteString(ctlpath.Quote(m.fileList().At(i).Path()))
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

// Status returns the job's status file (docs/ctl.md).
func (m *Manager) Status(ref Ref) (*status.Doc, error) {
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
	d := status.New()
	d.Text("name", ref.Name)
	d.Text("sampler", st.Kind.String())
	ints(d, "batch_size size world_size", st.BatchSize, st.Size, st.WorldSize)
	d.Flag("drop_last", st.DropLast, status.TrueFalse)
	ints(d, "per_rank epoch position planned batches", st.PerRank, st.Epoch, st.Position, st.Planned, st.Batches)
	ints(d, "resident_reads buffer_reads source_reads peer_reads", st.ResidentReads, st.BufferReads, st.SourceReads, st.PeerReads)
	for _, er := range st.EpochReads {
		p := "epoch." + strconv.Itoa(er.Epoch) + "."
		ints(d, p+"reads_local "+p+"reads_peer "+p+"reads_source", er.Local, er.Peer, er.Source)
	}
	ints(d, "substitutions shared_draws padded skipped resumed ranks_live",
		st.Substitutions, st.SharedDraws, st.Padded, st.Skipped, st.Resumed, st.RanksLive)
	d.Text("ranks_lost", lost)
	ints(d, "rank_losses dropped cache_substitutions", st.RanksLost, st.Dropped, st.CacheSubstitutions)
	d.Time("last_read", st.LastRead, time.RFC3339Nano, "never")
	d.Text("resume", m.resumedFrom(j))
	if st.Cluster {
		d.Flag("cluster", true, status.TrueFalse)
		ints(d, "ranks_remote claimed claimed_away claim_fallbacks taken_over",
			st.RanksRemote, st.Claimed, st.ClaimedAway, st.ClaimFallbacks, st.TakenOver)
	}
	m.viewStatus(j, d)
	return d, nil
}

// ints adds integer fields to d: the i-th of the space-separated keys
// is vals[i].
func ints(d *status.Doc, keys string, vals ...int) {
	names := strings.Fields(keys)
	if len(names) != len(vals) {
		panic(fmt.Sprintf("jobs: status: %d keys, %d values", len(names), len(vals)))
	}
	for i, k := range names {
		d.Int(k, int64(vals[i]))
	}
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
func (m *Manager) RankStatus(ref Ref, rank int) (*status.Doc, error) {
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
	d := status.New()
	d.Int("rank", int64(st.Rank))
	d.Text("state", state)
	ints(d, "epoch position quota planned batches padded losses rejoins",
		st.Epoch, st.Position, st.Quota, st.Planned, st.Batches, st.Padded, st.Losses, st.Rejoined)
	d.Time("last_read", st.LastRead, time.RFC3339Nano, "never")
	d.Time("paused_until", st.PausedUntil, time.RFC3339Nano, "none")
	return d, nil
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
