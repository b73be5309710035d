package daemon

// The cluster (package cluster) as the mount uses it: the placer's Remote
// (local tiers, then the cluster tier, then the source) and the cluster.*
// status keys. It is opened before anything else that could read the
// source, so a cluster the mount cannot use fails the mount at once with
// one line (exit 2) and nothing mounted.

import (
	"context"
	"fmt"
	"io"

	"github.com/epochfs/epochfs/cluster"
	"github.com/epochfs/epochfs/fs"
	"github.com/epochfs/epochfs/placement"
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

// Cluster is the mount's cluster, nil without one.
func (m *Mount) Cluster() *cluster.Cluster { return m.cl }

// clusterRemote adapts the cluster to placement.Remote.
type clusterRemote struct{ c *cluster.Cluster }

func (r clusterRemote) Copy(ctx context.Context, k placement.RemoteKey, w io.Writer, progress func(int64), source placement.SourceCopy) (int64, error) {
	return r.c.Copy(ctx, cluster.FileKey{Path: k.Path, Size: k.Size, Mtime: k.Mtime}, w, progress, source)
}

// sharedWalk is the catalog's walk through the cluster: the first node
// to mount the source walks it and publishes the catalog, the others load
// it (cluster/catalog.go); a rescan walks and publishes again.
func (m *Mount) sharedWalk(ctx context.Context, walk func(context.Context) ([]byte, error)) ([]byte, bool, error) {
	return m.cl.LoadOrWalk(ctx, m.o.Source, m.o.Rescan, walk)
}

// clusterStatus is the cluster's status keys, each prefixed "cluster.".
func (m *Mount) clusterStatus() []fs.StatusEntry {
	st := m.cl.Status()
	out := make([]fs.StatusEntry, len(st))
	for i, s := range st {
		out[i] = fs.StatusEntry{Key: "cluster." + s.Key, Value: s.Value, Numeric: s.Numeric}
	}
	return out
}
