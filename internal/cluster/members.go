package cluster

// The members of a peers cluster, the owners of a file among them, and
// the directory of holders (peers.go).

import (
	"context"
	"slices"
	"time"

	"github.com/epochfs/epochfs/internal/cluster/peer"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// OnMembersChange sets fn to be called (from the prober, so it must not
// block) when the live members change: the files this node keeps change
// with them.
func (c *Cluster) OnMembersChange(fn func(members []string)) {
	if c.pr != nil {
		c.pr.onMove.Store(&fn)
	}
}

// heartbeatScript re-adds a member, drops the expired and returns the
// live ones, on the Redis clock. KEYS: live; ARGV: node, ttl ms, leave
// (1: remove node instead).
var heartbeatScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZRANGE', KEYS[1], 0, -1)`)

// memberTTL is how long a member stays live without a heartbeat.
func (c *Cluster) memberTTL() time.Duration { return max(5*c.o.ProbeInterval, time.Second) }

// MemberTTL is how long a member stays live without a heartbeat: the time
// the members must stay the same before this node takes its share, and
// before it copies a share that moved.
func (c *Cluster) MemberTTL() time.Duration { return c.memberTTL() }

// heartbeat renews this node's membership and reads the members.
func (c *Cluster) heartbeat(leave bool) {
	ctx, cancel := c.op(c.ctx)
	if leave {
		ctx, cancel = context.WithTimeout(context.Background(), c.o.Timeout)
	}
	defer cancel()
	flag := "0"
	if leave {
		flag = "1"
	}
	v, err := heartbeatScript.Run(ctx, c.rdb, []string{c.keys.Members()}, c.pr.self, c.memberTTL().Milliseconds(), flag).StringSlice()
	if c.note(err) != nil || leave {
		return
	}
	if !slices.Contains(v, c.pr.self) {
		v = append(v, c.pr.self)
	}
	slices.Sort(v)
	old := c.pr.members.Swap(&v)
	changed := old == nil || !slices.Equal(*old, v)
	if !c.pr.settled.Load() {
		// Nodes of a job mount within moments of one another: a node
		// that took its share among the first members alone would fill
		// its tiers with the others' shares. It waits until the members
		// stay the same for memberTTL.
		if changed {
			c.pr.settleAt = time.Now().Add(c.memberTTL())
			return
		}
		if time.Now().Before(c.pr.settleAt) {
			return
		}
		c.pr.settled.Store(true)
		c.log.Info("peers: the members are settled; this node takes its share", zap.Strings("members", v))
	} else if !changed {
		return
	} else {
		c.log.Info("peers: the members changed", zap.Strings("members", v))
	}
	if fn := c.pr.onMove.Load(); fn != nil && *fn != nil {
		(*fn)(v)
	}
}

// Members are the live members as last read (this node included).
func (c *Cluster) Members() []string {
	if c.pr == nil {
		return nil
	}
	return *c.pr.members.Load()
}

// Owners are the members that keep version k: its owner first, then its
// replicas.
func (c *Cluster) Owners(k FileKey) []string {
	return peer.Owners(nil, c.keys.File(k).ID, c.Members(), 1+c.o.Replicas)
}

// Keeps reports whether this node keeps version k in its tiers: it is the
// file's owner or one of its replicas, among the members or among those
// that answer. Until the members are settled (heartbeat) it keeps
// nothing: its reads go to the peers, and to the source through the file's
// owner. Without peers, every node keeps every file.
//
// A member that does not answer (a node that died, until its membership
// expires) still owns its share; the node that will own a file of it once
// it is gone keeps the file already. Otherwise, until then, every read of
// the file here would go to the source, and the pass after the change
// would fetch it once more.
func (c *Cluster) Keeps(k FileKey) bool {
	if c.pr == nil {
		return true
	}
	if !c.pr.settled.Load() {
		return false
	}
	var buf [9]string
	id, members := c.keys.File(k).ID, c.Members()
	owners := peer.Owners(buf[:0], id, members, 1+c.o.Replicas)
	if slices.Contains(owners, c.pr.self) {
		return true
	}
	if !slices.ContainsFunc(owners, c.pr.isDown) {
		return false
	}
	live := slices.DeleteFunc(slices.Clone(members), c.pr.isDown)
	return slices.Contains(peer.Owners(buf[:0], id, live, 1+c.o.Replicas), c.pr.self)
}

// Sharing reports whether this node takes its share: the members are
// settled. Always without peers.
func (c *Cluster) Sharing() bool { return c.pr == nil || c.pr.settled.Load() }

// Rank is this node's place in the order of the members for version k:
// 0 for its owner, 1 to replicas for the nodes that keep a copy, more for
// those that would keep one with fewer members; -1 before the members are
// settled, 0 without peers.
func (c *Cluster) Rank(k FileKey) int {
	if c.pr == nil {
		return 0
	}
	if !c.pr.settled.Load() {
		return -1
	}
	var buf [16]string
	members := c.Members()
	return slices.Index(peer.Owners(buf[:0], c.keys.File(k).ID, members, len(members)), c.pr.self)
}

// HeldElsewhere reports whether a live member other than this node is
// listed as a holder of version k; false when Redis does not answer.
func (c *Cluster) HeldElsewhere(ctx context.Context, k FileKey) bool {
	return len(c.liveHolders(ctx, k)) > 0
}

// ProbeHolders asks each live member listed as a holder of version k
// whether it answers, and marks those that do not as down (Keeps then
// counts this node among the owners the file will have without them). A
// peer that asks this node to fetch k found no holder that answers: this
// node may not have tried them yet.
func (c *Cluster) ProbeHolders(ctx context.Context, k FileKey) {
	for _, h := range c.liveHolders(ctx, k) {
		// Within the Redis timeout: the asker waits at most peerTimeout
		// for this node's answer.
		hctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
		if err := c.pr.client.Health(hctx, h); err != nil {
			c.pr.fail(h, err)
		}
		cancel()
	}
}

// liveHolders are the members other than this node listed as holders of
// version k and not found down; none when Redis does not answer.
func (c *Cluster) liveHolders(ctx context.Context, k FileKey) []string {
	if c.pr == nil || !c.Usable() {
		return nil
	}
	octx, cancel := c.op(ctx)
	holders, err := c.rdb.SMembers(octx, c.keys.File(k).Holders).Result()
	cancel()
	if c.note(err) != nil {
		return nil
	}
	members := c.Members()
	return slices.DeleteFunc(holders, func(h string) bool {
		_, ok := slices.BinarySearch(members, h)
		return !ok || h == c.pr.self || c.pr.isDown(h)
	})
}

// KeptElsewhere reports whether another live member keeps version k (its
// owner or a replica is not this node). False without peers, and before
// the members are settled.
func (c *Cluster) KeptElsewhere(k FileKey) bool {
	if c.pr == nil || !c.pr.settled.Load() {
		return false
	}
	var buf [9]string
	for _, o := range peer.Owners(buf[:0], c.keys.File(k).ID, c.Members(), 1+c.o.Replicas) {
		if o != c.pr.self {
			return true
		}
	}
	return false
}

// Holds records that this node holds a copy of k; Dropped that it holds
// none. Both are queued and written in batches.
func (c *Cluster) Holds(k FileKey) {
	c.updateHolders(holderUpdate{k: k, node: c.pr.self, add: true})
}

func (c *Cluster) Dropped(k FileKey) {
	c.updateHolders(holderUpdate{k: k, node: c.pr.self})
}

func (c *Cluster) updateHolders(u holderUpdate) {
	if c.pr == nil {
		return
	}
	if u.add {
		c.pr.st.localHolds.Add(1)
	}
	select {
	case c.pr.updates <- u:
	case <-c.ctx.Done():
	}
}

// holderWriter writes the queued holder updates, up to 512 per pipeline.
func (c *Cluster) holderWriter() {
	defer c.wg.Done()
	batch := make([]holderUpdate, 0, 512)
	flush := func(ctx context.Context) {
		if len(batch) == 0 {
			return
		}
		octx, cancel := context.WithTimeout(ctx, 2*c.o.Timeout)
		pipe := c.rdb.Pipeline()
		for _, u := range batch {
			fk := c.keys.File(u.k)
			if u.add {
				pipe.SAdd(octx, fk.Holders, u.node)
			} else {
				pipe.SRem(octx, fk.Holders, u.node)
			}
		}
		_, err := pipe.Exec(octx)
		cancel()
		if c.note(err) != nil {
			c.log.Warn("peers: cannot record the copies held", zap.Int("updates", len(batch)), zap.Error(err))
		}
		batch = batch[:0]
	}
	for {
		select {
		case u := <-c.pr.updates:
			batch = append(batch, u)
		drain:
			for len(batch) < cap(batch) {
				select {
				case u := <-c.pr.updates:
					batch = append(batch, u)
				default:
					break drain
				}
			}
			flush(c.ctx)
		case <-c.ctx.Done():
			// What is queued still goes out, bounded.
			for {
				select {
				case u := <-c.pr.updates:
					batch = append(batch, u)
					if len(batch) == cap(batch) {
						flush(context.Background())
					}
				default:
					flush(context.Background())
					return
				}
			}
		}
	}
}
