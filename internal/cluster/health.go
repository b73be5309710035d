package cluster

// Health. The cluster is skipped (Usable is false) while it is known to
// fail: the last probe found a master that does not answer or a cluster
// state that is not ok, or an operation failed less than failBackoff ago
// with none succeeding since. Skipping is what keeps a training read from
// paying a timeout per file while a master is down: reads go to the source
// at once, and the probe (every Options.ProbeInterval) finds out when the
// cluster is whole again. "Not stored" answers (redis.Nil) are successes.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/epochfs/epochfs/internal/status"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

const failBackoff = 2 * time.Second

type health struct {
	reachable        atomic.Bool
	lastFail, lastOK atomic.Int64 // unix nanos
	bytes            atomic.Int64 // the quota counter at the last probe
	masters          atomic.Int64
	mu               sync.Mutex
	whyNot           string // the last probe's failure
}

func (h *health) init() { h.reachable.Store(true) }

func (h *health) why() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.whyNot
}

// counters are the cluster's figures for the mount's status.
type counters struct {
	hits, hitBytes     atomic.Int64 // files (and bytes) read from the cluster
	fills, fillBytes   atomic.Int64 // files (and bytes) this node stored
	fillsAborted       atomic.Int64
	leaseWaits         atomic.Int64 // waits for another node's fill
	leaseWaitTimeouts  atomic.Int64 // of which gave up (the source was read)
	corrupt            atomic.Int64 // values that failed their MAC (dropped)
	full               atomic.Int64 // fills refused by the quota
	errors             atomic.Int64 // operations that failed
	catalogState       atomic.Value // string: walked, loaded
	claims, claimCalls atomic.Int64 // cluster job samples claimed, scripts run
	claimsAhead        atomic.Int64 // claims refused: a rank two epochs behind
}

// Usable reports whether operations should be tried now.
func (c *Cluster) Usable() bool {
	if !c.hl.reachable.Load() {
		return false
	}
	f := c.hl.lastFail.Load()
	return f == 0 || f < c.hl.lastOK.Load() || time.Now().UnixNano()-f > int64(failBackoff)
}

// note records an operation's outcome and returns err (redis.Nil is a
// success: the answer "no such key").
func (c *Cluster) note(err error) error {
	now := time.Now().UnixNano()
	if err == nil || errors.Is(err, redis.Nil) {
		c.hl.lastOK.Store(now)
		return err
	}
	if errors.Is(err, context.Canceled) {
		return err // the caller gave up: says nothing of the cluster
	}
	c.st.errors.Add(1)
	if c.hl.lastFail.Swap(now) < c.hl.lastOK.Load() {
		// The first failure after a success: worth a line.
		c.log.Warn("cluster operation failed; reading the source meanwhile", zap.Error(err))
	}
	return err
}

func (c *Cluster) prober() {
	defer c.wg.Done()
	t := time.NewTicker(c.o.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			c.probe()
			if c.pr != nil {
				c.heartbeat(false)
			}
		}
	}
}

// probe pings every master, checks the cluster state and reads the quota
// counter.
func (c *Cluster) probe() {
	ctx, cancel := context.WithTimeout(c.ctx, 2*c.o.Timeout)
	defer cancel()
	var masters atomic.Int64
	var state string
	var stateMu sync.Mutex
	err := c.rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		masters.Add(1)
		info, err := m.ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		if s := infoField(info, "cluster_state"); s != "ok" {
			stateMu.Lock()
			state = s
			stateMu.Unlock()
		}
		return nil
	})
	if err == nil && state != "" {
		err = errors.New("cluster_state:" + state)
	}
	if err == nil {
		var n int64
		n, err = c.rdb.Get(ctx, c.keys.QuotaBytes()).Int64()
		if errors.Is(err, redis.Nil) {
			n, err = 0, nil
		}
		if err == nil {
			c.hl.bytes.Store(n)
		}
	}
	if c.ctx.Err() != nil {
		return
	}
	was := c.hl.reachable.Load()
	c.hl.masters.Store(masters.Load())
	if err != nil {
		c.hl.mu.Lock()
		c.hl.whyNot = err.Error()
		c.hl.mu.Unlock()
		c.hl.reachable.Store(false)
		if was {
			c.log.Warn("cluster unavailable; reading the source until it is back", zap.Error(err))
		}
		// The client's view of the slots may be what is stale.
		c.rdb.ReloadState(c.ctx)
		return
	}
	c.hl.lastOK.Store(time.Now().UnixNano())
	c.hl.reachable.Store(true)
	if !was {
		c.log.Info("cluster available again")
	}
}

// infoField is a field of CLUSTER INFO's "key:value" lines.
func infoField(info, key string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), key+":"); ok {
			return v
		}
	}
	return ""
}

// Status fills the cluster's section of the mount's status (d: the
// section cluster.; docs/ctl.md).
func (c *Cluster) Status(d *status.Doc) {
	cat, _ := c.st.catalogState.Load().(string)
	if cat == "" {
		cat = "local"
	}
	d.Flag("reachable", c.Usable(), status.YesNo)
	d.Text("dataset", c.o.DatasetID)
	d.Int("masters", c.hl.masters.Load())
	d.Int("quota", c.o.Quota)
	d.Int("bytes", c.hl.bytes.Load())
	d.Int("hits", c.st.hits.Load())
	d.Int("hit_bytes", c.st.hitBytes.Load())
	d.Int("fills", c.st.fills.Load())
	d.Int("fill_bytes", c.st.fillBytes.Load())
	d.Int("fills_aborted", c.st.fillsAborted.Load())
	d.Int("lease_waits", c.st.leaseWaits.Load())
	d.Int("lease_wait_timeouts", c.st.leaseWaitTimeouts.Load())
	d.Int("corrupt", c.st.corrupt.Load())
	d.Int("full", c.st.full.Load())
	d.Int("errors", c.st.errors.Load())
	d.Text("catalog", cat)
	d.Int("job_claims", c.st.claims.Load())
	d.Int("job_claim_calls", c.st.claimCalls.Load())
	d.Int("job_claims_ahead", c.st.claimsAhead.Load())
	if c.pr != nil {
		c.peersStatus(d)
	}
}
