package sampler

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"time"
)

// Kind is a job's sampler kind.
type Kind uint8

const (
	// KindODS draws uniformly at random from the job's unseen samples and
	// replaces draws of samples nobody holds with samples in the shared
	// buffer that the job has not seen (Seneca's ODS); jobs whose subsets
	// overlap only partly draw through DSA (Joader). The default.
	KindODS Kind = iota
	// KindRandom is an independent uniformly random permutation per epoch,
	// with no substitution (PyTorch's RandomSampler).
	KindRandom
	// KindSequential is the subset in index (catalog) order every epoch;
	// with several ranks, rank r gets the subset's samples r, r+W, r+2W…
	// (torch's DistributedSampler with shuffle=False).
	KindSequential
	kinds // the number of kinds
)

func (k Kind) String() string {
	switch k {
	case KindODS:
		return "ods"
	case KindRandom:
		return "random"
	case KindSequential:
		return "sequential"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Kinds lists the sampler kinds.
func Kinds() []Kind { return []Kind{KindODS, KindRandom, KindSequential} }

// MaxBatchSize bounds a batch (one Next).
const MaxBatchSize = 1 << 20

// MaxWorldSize bounds the ranks of a job.
const MaxWorldSize = 4096

// JobConfig is one job's configuration.
type JobConfig struct {
	// BatchSize is the number of samples per Next (the last batch of an
	// epoch may be shorter). 1..MaxBatchSize.
	BatchSize int
	// Seed seeds the job's draws; with the job name and the epoch number it
	// fixes the order of a random or sequential job, and of an ODS job
	// running alone.
	Seed uint64
	// Kind is the sampler kind (KindODS by default).
	Kind Kind
	// Subset is the job's samples as indices 0..N-1, in any order; duplicates
	// are ignored. Nil means every sample. RegisterJob rejects an empty,
	// non-nil Subset and indices out of range.
	Subset []int
	// WorldSize is the number of ranks that share the job's epochs
	// (data-parallel training); 0 means 1. 1..MaxWorldSize.
	WorldSize int
	// DropLast: each rank gets floor(M/W) samples per epoch and the rest
	// of the subset's M samples are left out of that epoch (a different
	// remainder each epoch); otherwise ceil(M/W), the shortfall padded with
	// samples already handed out that epoch. Either way every rank gets the
	// same number, as torch's DistributedSampler.
	DropLast bool
	// Fixed: the job's subset does not grow with the dataset (Grow): a
	// job over the whole dataset keeps the samples it had.
	Fixed bool
	// Views: the job reads preprocessed views; ODS substitutes from
	// Options.Caches first (caches.go).
	Views bool
	// Claimer, if set, makes the job's epochs cluster-wide: its ranks may
	// read on several nodes, and every draw is a claim (claims.go). Nil:
	// the job's epochs are this node's alone.
	Claimer Claimer
	// SeedName, if set, is the name that seeds the job's draws in place
	// of the name it is registered under: a caller that registers each
	// run of a job under a name of its own (package jobs) keeps the
	// job's order the same on every node and mount.
	SeedName string
}

// job is one registered job: its ranks and the epochs they are in.
//
// Epochs are job-wide: the ranks of a job draw from one seen set per
// epoch, so no sample goes to two ranks in an epoch. A rank starts the
// next epoch when it reads after its epoch's end; at most two epochs are
// in flight (a rank may be one epoch ahead of the slowest live rank, not
// two: Next answers ErrRankAhead instead).
type job struct {
	name   string
	slot   int
	cfg    JobConfig
	subset []int32 // sorted, unique; nil = all samples
	size   int     // M: samples in the subset
	share  int     // samples per rank per epoch with every rank live
	// joining are samples added to the dataset (Grow) that join the
	// subset from the job's next epoch, sorted.
	joining []int32
	ranks   []*rank
	// eps are the epochs in flight, oldest first: created and not yet
	// complete (some rank has not been served its quota). 0 to 2 entries.
	eps    []*epoch
	latest *epoch
	spare  *drawSet // the set of the last complete epoch, for the next
	// minLast bounds the oldest lease renewal among live ranks from below
	// (reap scans the ranks only when it may have expired).
	minLast time.Time
	drawFor *rank // the rank a DSA round draws for (dsa.go)
	// resume are the epochs of an interrupted run this job continues,
	// not created yet (resume.go).
	resume []ResumeEpoch
	st     JobStatus // counters; the rest is filled by Status
}

// epoch is one epoch of a job, shared by its ranks.
type epoch struct {
	num   int
	set   *drawSet // taken = handed out or planned this epoch, by any rank
	rng   *rand.Rand
	quota []int // per rank: samples it gets this epoch
	got   []int // per rank: samples handed out so far
	// planned maps the samples in the ranks' plans to their rank.
	planned  map[int32]int32
	distinct int     // samples handed out this epoch, padding excluded
	skipped  int     // samples drawn and not handed out: gone from the dataset
	excluded int     // samples gone from the dataset when the epoch began (taken, never drawn)
	resumed  int     // samples an interrupted run handed out (taken, never drawn: resume.go)
	share    int     // each live rank's quota when the epoch began
	first    []int32 // per rank: the first sample it was handed (-1: none); padding source
	padFrom  int     // next index into first for padding (round robin)
	dropped  int     // quota of lost ranks no live rank could take over
	lossy    bool    // a rank was lost in it, or when it was created
	next     *epoch
	// Cluster jobs (claims.go): pending are samples taken in set while a
	// claim proposing them is out; away are samples taken in set that
	// this node neither handed out nor plans (ranks elsewhere have them);
	// fallback: a claim failed, the rest of the epoch is drawn locally.
	pending  int
	away     int
	fallback bool
	// here marks the samples handed out on this node (local indices);
	// final, per rank, that its count is final: it probed the cluster at
	// its quota and got nothing more (claims.go); losses, the ranks the
	// cluster has lost in the epoch as last seen; reopen: losses grew and
	// the samples taken for had elsewhere are to be proposed again.
	here   []uint64
	pads   []int // per rank: padding handed out on this node
	final  []bool
	losses int
	reopen bool
}

// rank is one rank of a job.
type rank struct {
	id      int
	ep      *epoch // the epoch it is in (epoch 1 from registration)
	started bool   // it has read
	ended   bool   // the end of ep was reported; its next read starts ep+1
	plan    []int32
	last    time.Time
	lost    bool
	// claiming: a claim for it is out (the sampler's lock is not held
	// meanwhile); another read of the rank does not claim too.
	claiming bool
	// capped is the epoch in which the claimer examined nothing: the
	// rank's count in the cluster is at its quota (it read elsewhere
	// too); the rest of its quota here is padding.
	capped *epoch
	// pauseUntil: the rank said it reads nothing until then (Pause); its
	// lease runs from then.
	pauseUntil time.Time
	st         RankStatus
}

// seededRNG is the draw generator of epoch num: fixed by (seed, name, num).
func (j *job) seededRNG(num int) *rand.Rand {
	h := fnv.New64a()
	if j.cfg.SeedName != "" {
		h.Write([]byte(j.cfg.SeedName))
	} else {
		h.Write([]byte(j.name))
	}
	return rand.New(rand.NewPCG(j.cfg.Seed^h.Sum64(), uint64(num)*0x9e3779b97f4a7c15+1))
}

// in maps a sample to its local index in epoch ep's set: false when the
// sample is not in the job's subset, or joined it after ep began (Grow).
func (j *job) in(ep *epoch, e int32) (int, bool) {
	l, ok := j.local(e)
	return l, ok && l < ep.set.n
}

// local maps a sample to the job's local index.
func (j *job) local(e int32) (int, bool) {
	if j.subset == nil {
		return int(e), true
	}
	i := sort.Search(len(j.subset), func(k int) bool { return j.subset[k] >= e })
	return i, i < len(j.subset) && j.subset[i] == e
}

func (j *job) global(l int) int32 {
	if j.subset == nil {
		return int32(l)
	}
	return j.subset[l]
}

// wants reports whether some epoch of the job in flight has not handed e
// out yet (planned counts as not handed out): the buffer's reference count
// counts the jobs that want a sample.
func (j *job) wants(e int32) bool {
	l, ok := j.local(e)
	if !ok {
		return false
	}
	for _, ep := range j.eps {
		if l >= ep.set.n {
			continue // joined after ep began
		}
		if !ep.set.has(l) {
			return true
		}
		if _, p := ep.planned[e]; p {
			return true
		}
	}
	return false
}

// free reports whether e is in the job's subset and neither handed out nor
// planned in ep.
func (j *job) free(ep *epoch, e int32) bool {
	l, ok := j.in(ep, e)
	return ok && !ep.set.has(l)
}

// leased is when r's lease began: its last read or touch, or the end of
// its pause.
func (r *rank) leased() time.Time {
	if r.pauseUntil.After(r.last) {
		return r.pauseUntil
	}
	return r.last
}

// need is how many more samples r must be drawn in its epoch.
func (r *rank) need() int { return r.ep.quota[r.id] - r.ep.got[r.id] - len(r.plan) }

// done reports whether r has been handed its whole quota of its epoch.
func (r *rank) done() bool { return r.ep.got[r.id] >= r.ep.quota[r.id] }

// drawing reports whether r may be drawn for now (its plan filled).
func (r *rank) drawing() bool { return !r.lost && !r.ended && r.need() > 0 }

// complete reports whether every rank got its quota of ep (and, in a
// cluster job, knows its quota is final).
func (ep *epoch) complete() bool {
	for i, q := range ep.quota {
		if ep.got[i] < q || ep.final != nil && q > 0 && !ep.final[i] {
			return false
		}
	}
	return true
}

// inFlight reports whether ep is one of the job's epochs in flight.
func (j *job) inFlight(ep *epoch) bool {
	for _, e := range j.eps {
		if e == ep {
			return true
		}
	}
	return false
}

// perRank is the share of each rank per epoch: ceil(M/W), or floor(M/W)
// with drop_last.
func perRank(m, w int, dropLast bool) int {
	if dropLast {
		return m / w
	}
	return (m + w - 1) / w
}
