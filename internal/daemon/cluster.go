package daemon

// The cluster (package cluster) as the mount uses it: the placer's Remote
// (local tiers, then the cluster tier, then the source), the epochs of
// cluster jobs (jobs.ClusterJobs) and the cluster.* status keys. It is opened before anything else that could read the
// source, so a cluster the mount cannot use fails the mount at once with
// one line (exit 2) and nothing mounted.

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/epochfs/epochfs/internal/cluster"
	"github.com/epochfs/epochfs/internal/jobs"
	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/sampler"
	"github.com/epochfs/epochfs/internal/status"
)

// openCluster opens the cluster of o.Cluster; nil without one.
func (m *Mount) openCluster(ctx context.Context) error {
	if m.o.Cluster == nil {
		return nil
	}
	co := *m.o.Cluster
	co.Logger = m.log.Named("cluster")
	cl, err := cluster.Open(ctx, co)
	if err != nil {
		return &configError{fmt.Errorf("daemon: %w", err)}
	}
	m.cl = cl
	m.steps = append(m.steps, step{what: "the cluster connections", close: cl.Close, always: true})
	return nil
}

// clusterRemote adapts the cluster to placement.RangeRemote.
type clusterRemote struct{ c *cluster.Cluster }

func (r clusterRemote) Copy(ctx context.Context, k placement.RemoteKey, w io.Writer, progress func(int64), source placement.SourceCopy) (int64, error) {
	return r.c.Copy(ctx, cluster.FileKey{Path: k.Path, Size: k.Size, Mtime: k.Mtime}, w, progress, source)
}

// Stored serves parts of a stored copy (placement.RangeRemote).
func (r clusterRemote) Stored(ctx context.Context, k placement.RemoteKey) (placement.RemoteFile, bool) {
	cp, err := r.c.Lookup(ctx, cluster.FileKey{Path: k.Path, Size: k.Size, Mtime: k.Mtime})
	if err != nil {
		return nil, false
	}
	return cp, true
}

// sharedWalk is the catalog's walk through the cluster: the first node
// to mount the source walks it and publishes the catalog, the others load
// it (internal/cluster/catalog.go); a rescan walks and publishes again.
func (m *Mount) sharedWalk(ctx context.Context, walk func(context.Context) ([]byte, error)) ([]byte, bool, error) {
	return m.cl.LoadOrWalk(ctx, m.o.Source, m.o.Rescan, walk)
}

// clusterJobs adapts the cluster to jobs.ClusterJobs (jobs with
// cluster=true: their epochs are claimed in the cluster).
type clusterJobs struct{ c *cluster.Cluster }

func (j clusterJobs) Usable() bool { return j.c.Usable() }

func (j clusterJobs) Join(ctx context.Context, name, shape string) (string, error) {
	run, err := j.c.JoinJob(ctx, name, shape)
	if errors.Is(err, cluster.ErrShape) {
		return "", fmt.Errorf("%w: %w (every node writes the same config)", jobs.ErrInvalid, err)
	}
	return run, err
}

func (j clusterJobs) Leave(ctx context.Context, name string) error { return j.c.LeaveJob(ctx, name) }

func (j clusterJobs) Claim(ctx context.Context, name, run string, world int, checkAhead bool, q sampler.ClaimRequest) (sampler.ClaimAnswer, error) {
	res, err := j.c.Claim(ctx, name, run, cluster.ClaimRequest{Epoch: q.Epoch, Rank: q.Rank, Share: q.Share,
		Padded: q.Padded, Want: q.Want, World: world, CheckAhead: checkAhead, Probe: q.Probe, Cands: q.Cands})
	if errors.Is(err, cluster.ErrAhead) {
		return sampler.ClaimAnswer{}, fmt.Errorf("%w: %w", jobs.ErrAhead, err)
	}
	return sampler.ClaimAnswer{Granted: res.Claimed, Examined: res.Examined, Quota: res.Quota, Losses: res.Losses}, err
}

func (j clusterJobs) Seen(ctx context.Context, name, run string, ep int) ([]byte, error) {
	return j.c.Seen(ctx, name, run, ep)
}

func (j clusterJobs) Seed(ctx context.Context, name, run string, ep, world int, bitmap []byte) error {
	return j.c.Seed(ctx, name, run, ep, world, bitmap)
}

func (j clusterJobs) LoseRank(ctx context.Context, name, run string, ep, rank int, returned []int32) error {
	return j.c.LoseRank(ctx, name, run, ep, rank, returned)
}

func (j clusterJobs) EndEpoch(ctx context.Context, name, run string, ep, rank int) error {
	return j.c.EndEpoch(ctx, name, run, ep, rank)
}

// clusterStatus fills the cluster's status keys, each prefixed
// "cluster.", and the cluster jobs' figures.
func (m *Mount) clusterStatus(d *status.Doc) {
	sec := d.Under("cluster.")
	m.cl.Status(sec)
	m.peerServerStatus(sec)
	js := m.jm.Stats()
	sec.Int("job_fallbacks", js.ClaimFallbacks)
	sec.Int("job_ahead_timeouts", js.AheadTimeouts)
	sec.Int("job_end_errors", js.EndErrors)
}
