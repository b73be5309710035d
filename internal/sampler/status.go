package sampler

import (
	"slices"
	"time"
)

// JobStatus is a job's progress and counters.
type JobStatus struct {
	Name      string
	Kind      Kind
	BatchSize int
	Size      int // samples in the subset
	WorldSize int
	DropLast  bool
	PerRank   int // samples per rank per epoch (with every rank live)
	Epoch     int // the epoch of the slowest live rank; 0 before any rank read
	Position  int // samples handed out in that epoch, all ranks
	Planned   int // samples drawn ahead, all ranks
	Batches   int // batches handed out, all ranks, all epochs
	// Samples handed out, all epochs, by where they were then.
	ResidentReads int // in a tier
	BufferReads   int // in the shared buffer or being fetched into it
	PeerReads     int // kept by another node of a peers cluster (PeerResidency)
	SourceReads   int // none of those: the reader fetches from the source
	// EpochReads are the samples handed out in each of the last
	// MaxEpochReads epochs, by where their bytes were kept then (a
	// buffered sample counts where it was fetched from).
	EpochReads    []EpochReads
	Substitutions int // draws replaced by buffered or cached samples (ODS)
	// CacheSubstitutions: of them, by samples the views' caches hold.
	CacheSubstitutions int
	SharedDraws        int // draws shared with another job by DSA
	Padded             int // padding handed out (ceil(M/W)·W − M per epoch, and one per sample gone)
	Skipped            int // samples drawn but not handed out: removed from the dataset (Options.Gone)
	// Resumed counts samples an interrupted run had handed out in the
	// epochs this job continued (Resume): taken without being drawn.
	Resumed   int
	RanksLive int // ranks not lost (and, in a cluster job, that read here)
	Lost      []int
	// Cluster jobs (JobConfig.Claimer): ranks that never read here
	// (remote), samples claimed for this node's ranks, samples proposed
	// that ranks elsewhere had, and epochs drawn locally after a claim
	// failed.
	Cluster        bool
	RanksRemote    int
	Claimed        int
	ClaimedAway    int
	ClaimFallbacks int
	// TakenOver counts samples this node's ranks took over from ranks
	// lost on any node (their quotas grew by it).
	TakenOver int
	RanksLost int // rank losses, total
	// Dropped counts samples of epochs that a lost rank left and no live
	// rank could take over (they had all reported that epoch's end).
	Dropped  int
	LastRead time.Time
}

// EpochReads counts one epoch's samples by where their bytes were kept
// when handed out: in this node's tiers, on a peer, or only on the
// source.
type EpochReads struct {
	Epoch               int
	Local, Peer, Source int
}

// MaxEpochReads bounds JobStatus.EpochReads.
const MaxEpochReads = 8

// RankStatus is one rank's progress.
type RankStatus struct {
	Rank     int
	Epoch    int // 0 before its first read
	Position int // samples handed out this epoch (padding included)
	Quota    int // samples it gets this epoch
	Planned  int
	Ended    bool // the end of its epoch was reported; it has not read since
	Lost     bool // it did not read for the lease
	// PausedUntil: the rank paused (Pause) until then; zero: not paused.
	PausedUntil time.Time
	Batches     int
	Padded      int
	Losses      int // times lost
	Rejoined    int // times it read again after being lost
	LastRead    time.Time
}

// Status returns the job's status. It does not renew any lease.
func (s *Sampler) Status(name string) (JobStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reap(s.opt.Now())
	j, err := s.lookup(name)
	if err != nil {
		return JobStatus{}, err
	}
	st := j.st
	st.EpochReads = slices.Clone(j.st.EpochReads)
	var slow *epoch
	started := false
	st.Cluster = j.cfg.Claimer != nil
	for _, r := range j.ranks {
		st.Planned += len(r.plan)
		started = started || r.started
		if j.remote(r) {
			st.RanksRemote++
			continue
		}
		if r.lost {
			st.Lost = append(st.Lost, r.id)
			continue
		}
		st.RanksLive++
		if r.st.LastRead.After(st.LastRead) {
			st.LastRead = r.st.LastRead
		}
		if slow == nil || r.ep.num < slow.num {
			slow = r.ep
		}
	}
	if slow != nil && started {
		st.Epoch = slow.num
		for _, g := range slow.got {
			st.Position += g
		}
	}
	return st, nil
}

// RankStatus returns one rank's status. It does not renew its lease.
func (s *Sampler) RankStatus(name string, rank int) (RankStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reap(s.opt.Now())
	_, r, err := s.lookupRank(name, rank)
	if err != nil {
		return RankStatus{}, err
	}
	st := r.st
	st.Rank, st.Ended, st.Lost, st.Planned = r.id, r.ended, r.lost, len(r.plan)
	if r.pauseUntil.After(s.opt.Now()) && !r.lost {
		st.PausedUntil = r.pauseUntil
	}
	if r.started {
		st.Epoch = r.ep.num
	}
	st.Position, st.Quota = r.ep.got[r.id], r.ep.quota[r.id]
	return st, nil
}
