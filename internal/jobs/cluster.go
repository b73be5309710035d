package jobs

// Cluster-wide jobs (config cluster=true): a DDP job whose ranks read on
// several nodes. Every node mounts the dataset with the same [cluster]
// section, creates the job with the same config and reads only its own
// ranks; the job's epochs are then one seen set per epoch in the Redis
// Cluster, claimed by the sampler through a claimer (internal/sampler/claims.go),
// so every sample goes to exactly one rank per epoch across the nodes.
//
// The claimer joins the job in the cluster when the config is written
// (the config's text and the subset's size are its shape: a node whose
// config differs is refused with EINVAL) and leaves it when the job ends
// or is reconfigured. A join that fails because the cluster is down is
// tried again at the next claim; a claim that fails makes the sampler draw
// the rest of that epoch locally (counted). A claim refused because a rank
// on some node is two epochs behind makes the read wait (ErrRankAhead), at
// most a lease per epoch and rank: past that the rank is taken for dead and
// the claim is made without the check (counted in AheadTimeouts).

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/epochfs/epochfs/internal/sampler"
	"go.uber.org/zap"
)

// ClusterJobs is the cluster-wide epoch state of cluster jobs; the daemon
// adapts package cluster's *Cluster to it. Every call is bounded by the
// cluster's operation timeout.
type ClusterJobs interface {
	// Usable reports whether the cluster should be tried now.
	Usable() bool
	// Join joins this node to job name with shape (its config: every node
	// must give the same) and returns the run its claims use. Other
	// nodes running it with another shape: an error wrapping ErrInvalid.
	Join(ctx context.Context, name, shape string) (run string, err error)
	// Leave takes this node out of the job.
	Leave(ctx context.Context, name string) error
	// Claim is sampler.Claimer's Claim in run, for a job of world ranks;
	// with checkAhead it fails with an error wrapping ErrAhead while some
	// rank of 0..world-1 has not ended epoch q.Epoch-2.
	Claim(ctx context.Context, name, run string, world int, checkAhead bool, q sampler.ClaimRequest) (sampler.ClaimAnswer, error)
	// EndEpoch records that rank read the end of epoch ep of run.
	EndEpoch(ctx context.Context, name, run string, ep, rank int) error
	// LoseRank is sampler.Claimer's Lost in run.
	LoseRank(ctx context.Context, name, run string, ep, rank int, returned []int32) error
	// Seen returns epoch ep's seen set of run: bit i (the most
	// significant bit of byte i/8 first) is subset-local sample i.
	Seen(ctx context.Context, name, run string, ep int) ([]byte, error)
	// Seed marks the samples set in bitmap (Seen's layout) as had in epoch
	// ep of run, and ranks 0..world-1 as having ended epoch ep-1.
	Seed(ctx context.Context, name, run string, ep, world int, bitmap []byte) error
}

// ErrAhead: a cluster job's claim was refused because a rank is two
// epochs behind (ClusterJobs.Claim).
var ErrAhead = errors.New("jobs: a rank of the cluster job is two epochs behind")

// errClusterDown: the cluster is known to fail; the claim was not tried.
var errClusterDown = errors.New("jobs: the cluster is unavailable")

// claimer is a cluster job's sampler.Claimer.
type claimer struct {
	cl    ClusterJobs
	name  string
	shape string
	world int
	wait  time.Duration // bound of a wait for a rank two epochs behind
	now   func() time.Time
	log   *zap.Logger
	st    *clusterCounters

	mu    sync.Mutex
	run   string
	ahead map[[2]int]time.Time // (epoch, rank) → first refusal
}

// clusterCounters are the manager's cluster job figures.
type clusterCounters struct {
	aheadTimeouts atomic.Int64
	endErrors     atomic.Int64
	lostErrors    atomic.Int64
}

// newClaimer joins job name in the cluster. A refused shape is an error
// (wrapping ErrInvalid); a cluster that fails is not: the join is tried
// again at the next claim.
func (m *Manager) newClaimer(name string, cfg Config, size int) (*claimer, error) {
	wait := m.s.Lease()
	if wait <= 0 {
		wait = sampler.DefaultLease
	}
	now := m.o.Now
	if now == nil {
		now = time.Now
	}
	k := &claimer{cl: m.o.Cluster, name: name, world: cfg.WorldSize, wait: wait, now: now,
		log: m.log, st: &m.cst, ahead: map[[2]int]time.Time{},
		shape: string(cfg.Format()) + "size=" + strconv.Itoa(size) + "\n"}
	if _, err := k.runID(); err != nil {
		if errors.Is(err, ErrInvalid) {
			return nil, err
		}
		m.log.Warn("cluster job: cannot join it in the cluster now; its epochs are drawn locally until it can",
			zap.String("job", name), zap.Error(err))
	}
	return k, nil
}

// runID is the job's run in the cluster, joining it if need be.
func (k *claimer) runID() (string, error) {
	k.mu.Lock()
	run := k.run
	k.mu.Unlock()
	if run != "" {
		return run, nil
	}
	if !k.cl.Usable() {
		return "", errClusterDown
	}
	run, err := k.cl.Join(context.Background(), k.name, k.shape)
	if err != nil {
		return "", err
	}
	k.mu.Lock()
	if k.run == "" {
		k.run = run
	}
	run = k.run
	k.mu.Unlock()
	return run, nil
}

// Claim implements sampler.Claimer.
func (k *claimer) Claim(q sampler.ClaimRequest) (sampler.ClaimAnswer, error) {
	run, err := k.runID()
	if err != nil {
		return sampler.ClaimAnswer{}, err
	}
	if !k.cl.Usable() {
		return sampler.ClaimAnswer{}, errClusterDown
	}
	key := [2]int{q.Epoch, q.Rank}
	k.mu.Lock()
	since, refused := k.ahead[key]
	k.mu.Unlock()
	now := k.now()
	check := !refused || now.Sub(since) < k.wait // past the wait the rank behind is taken for dead
	ans, err := k.cl.Claim(context.Background(), k.name, run, k.world, check, q)
	if errors.Is(err, ErrAhead) {
		if !refused {
			k.mu.Lock()
			k.ahead[key] = now
			k.mu.Unlock()
		}
		return sampler.ClaimAnswer{}, fmt.Errorf("%w (%w)", sampler.ErrRankAhead, err)
	}
	if refused && err == nil {
		k.mu.Lock()
		delete(k.ahead, key)
		k.mu.Unlock()
		if !check {
			k.st.aheadTimeouts.Add(1)
			k.log.Warn("cluster job: a rank stayed two epochs behind for the lease; claiming without it",
				zap.String("job", k.name), zap.Int("rank", q.Rank), zap.Int("epoch", q.Epoch))
		}
	}
	return ans, err
}

// Lost implements sampler.Claimer.
func (k *claimer) Lost(ep, rank int, returned []int32) {
	run, err := k.runID()
	if err == nil {
		err = k.cl.LoseRank(context.Background(), k.name, run, ep, rank, returned)
	}
	if err != nil {
		k.st.lostErrors.Add(1)
		k.log.Warn("cluster job: a lost rank's share could not be handed to the other nodes' ranks",
			zap.String("job", k.name), zap.Int("rank", rank), zap.Int("epoch", ep), zap.Error(err))
		return
	}
	k.log.Info("cluster job: rank lost; the live ranks of every node take over its share",
		zap.String("job", k.name), zap.Int("rank", rank), zap.Int("epoch", ep), zap.Int("returned", len(returned)))
}

// Ended implements sampler.Claimer.
func (k *claimer) Ended(ep, rank int) {
	run, err := k.runID()
	if err == nil {
		err = k.cl.EndEpoch(context.Background(), k.name, run, ep, rank)
	}
	if err != nil {
		k.st.endErrors.Add(1)
		k.log.Debug("cluster job: end of epoch not recorded", zap.String("job", k.name), zap.Int("rank", rank),
			zap.Int("epoch", ep), zap.Error(err))
	}
}

// seen returns the cluster's seen set of epoch ep as a bit set over n
// subset-local samples.
func (k *claimer) seen(ep, n int) ([]uint64, error) {
	run, err := k.runID()
	if err != nil {
		return nil, err
	}
	b, err := k.cl.Seen(context.Background(), k.name, run, ep)
	if err != nil {
		return nil, err
	}
	words := make([]uint64, (n+63)/64)
	for i, c := range b {
		for c != 0 {
			bit := bits.LeadingZeros8(c)
			c &^= 0x80 >> bit
			if l := i*8 + bit; l < n {
				words[l>>6] |= 1 << uint(l&63)
			}
		}
	}
	return words, nil
}

// seed marks handed (a bit set over subset-local samples) as had in the
// cluster's epoch ep.
func (k *claimer) seed(ep int, handed []uint64) error {
	run, err := k.runID()
	if err != nil {
		return err
	}
	b := make([]byte, len(handed)*8)
	eachBit(handed, func(l int) { b[l>>3] |= 0x80 >> uint(l&7) })
	return k.cl.Seed(context.Background(), k.name, run, ep, k.world, b)
}

// leave takes the node out of the job in the cluster (if it joined).
func (k *claimer) leave() {
	k.mu.Lock()
	run := k.run
	k.mu.Unlock()
	if run == "" {
		return
	}
	if err := k.cl.Leave(context.Background(), k.name); err != nil {
		k.log.Debug("cluster job: leave failed (its keys expire)", zap.String("job", k.name), zap.Error(err))
	}
}

// leaveLater leaves in the background (the caller holds Manager.mu).
func (m *Manager) leaveLater(k *claimer) {
	if k == nil {
		return
	}
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		k.leave()
	}()
}
