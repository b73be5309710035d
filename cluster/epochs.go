package cluster

// Cluster jobs: the epoch state of a DDP job whose ranks read on several
// nodes. Per epoch the job has a seen bitmap (one bit per sample of its
// subset) and each rank's count, in one hash slot; a claim is one script
// that takes the candidates a rank proposes in order, keeps those no rank
// has had this epoch (SETBIT's old bit is the test and the set in one),
// up to what the rank asks for and its quota, and returns them. So every
// sample goes to exactly one rank per epoch whatever node the ranks read
// on. The candidates' order (and so which samples a node prefers) is the
// jobs package's; this file only claims.
//
// A job's state belongs to a run: the first node to join with no member
// left sets the job's shape (its config) and a new run id, and nodes that
// join while members remain must have the same shape. Every key expires
// Options.JobTTL after the last claim; the last node to leave deletes the
// shape and members. An epoch's keys are deleted when the epoch two after
// it is claimed from.
//
// Two epochs at most are in flight across the nodes: each rank records the
// last epoch whose end it read (EndEpoch: a hash of the run, rank → epoch,
// in the job's slot), and a claim with world > 0 for epoch ep ≥ 3 is
// refused (ErrAhead) until every one of the world's ranks ended ep-2. So
// the deletion of ep-2's keys by that claim never pulls the seen set from
// under a rank still drawing from it. A rank that never ends (its node
// died) blocks the others; the caller bounds the wait and then claims with
// world = 0 (no check).

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// joinScript: KEYS shape, members; ARGV shape, node, new run id, ttl ms.
// Returns {1, run} or {0, ""} when members remain with another shape.
var joinScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and redis.call('SCARD', KEYS[2]) > 0 then
  local nl = string.find(cur, "\n", 1, true)
  if not nl or string.sub(cur, 1, nl - 1) ~= ARGV[1] then return {0, ''} end
  redis.call('SADD', KEYS[2], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return {1, string.sub(cur, nl + 1)}
end
redis.call('SET', KEYS[1], ARGV[1] .. "\n" .. ARGV[3], 'PX', ARGV[4])
redis.call('DEL', KEYS[2])
redis.call('SADD', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return {1, ARGV[3]}`)

// leaveScript: KEYS shape, members; ARGV node.
var leaveScript = redis.NewScript(`
redis.call('SREM', KEYS[2], ARGV[1])
if redis.call('SCARD', KEYS[2]) == 0 then redis.call('DEL', KEYS[1], KEYS[2]) end
return 1`)

// claimScript: KEYS seen, got, shape, members, seen two epochs back, got
// two epochs back, ended; ARGV rank, quota, want, ttl ms, epoch, world,
// candidates... Returns {rank's count, candidates examined, claimed...},
// or {-1, 0} when world > 0 and some rank has not ended epoch-2.
var claimScript = redis.NewScript(`
local ep = tonumber(ARGV[5])
local world = tonumber(ARGV[6])
if world > 0 and ep >= 3 then
  local ended = redis.call('HVALS', KEYS[7])
  if #ended < world then return {-1, 0} end
  for _, v in ipairs(ended) do
    if tonumber(v) < ep - 2 then return {-1, 0} end
  end
end
local got = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
local quota = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local out = {got, 0}
local n = 0
for i = 7, #ARGV do
  if got >= quota or n >= want then break end
  out[2] = out[2] + 1
  if redis.call('SETBIT', KEYS[1], ARGV[i], 1) == 0 then
    n = n + 1
    got = got + 1
    out[#out + 1] = tonumber(ARGV[i])
  end
end
out[1] = got
redis.call('HSET', KEYS[2], ARGV[1], got)
for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ARGV[4]) end
redis.call('PEXPIRE', KEYS[7], ARGV[4])
redis.call('DEL', KEYS[5], KEYS[6])
return out`)

// endScript: KEYS ended; ARGV rank, epoch, ttl ms. Keeps the largest.
var endScript = redis.NewScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if tonumber(ARGV[2]) > cur then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`)

// JoinJob joins this node to the cluster job name with the given shape
// (the job's config as text: every node must give the same) and returns
// the run id its claims use. ErrShape: other nodes run it with another
// shape.
func (c *Cluster) JoinJob(ctx context.Context, name, shape string) (run string, err error) {
	jk := c.keys.job(name)
	var rb [8]byte
	rand.Read(rb[:])
	// The script keeps "shape\nrun": the shape goes as its hash, which
	// has no newline whatever the config's text.
	sum := sha256.Sum256([]byte(shape))
	shape = hex.EncodeToString(sum[:])
	octx, cancel := c.op(ctx)
	defer cancel()
	res, err := joinScript.Run(octx, c.rdb, []string{jk.shape, jk.members}, shape, c.o.Node,
		hex.EncodeToString(rb[:]), c.o.JobTTL.Milliseconds()).Slice()
	if c.note(err) != nil {
		return "", fmt.Errorf("cluster: job %s: join: %w", name, err)
	}
	if len(res) != 2 {
		return "", fmt.Errorf("cluster: job %s: join: unexpected answer %v", name, res)
	}
	if ok, _ := res[0].(int64); ok != 1 {
		return "", fmt.Errorf("%w: job %s", ErrShape, name)
	}
	run, _ = res[1].(string)
	return run, nil
}

// LeaveJob takes this node out of the job; the last node out deletes its
// shape (the epochs expire).
func (c *Cluster) LeaveJob(ctx context.Context, name string) error {
	jk := c.keys.job(name)
	octx, cancel := c.op(ctx)
	defer cancel()
	if err := c.note(leaveScript.Run(octx, c.rdb, []string{jk.shape, jk.members}, c.o.Node).Err()); err != nil {
		return fmt.Errorf("cluster: job %s: leave: %w", name, err)
	}
	return nil
}

// Claim offers cands (subset-local sample numbers, in the rank's order of
// preference) for epoch ep of run run: it claims, in order, those no rank
// has had this epoch, until want are claimed or the rank's count reaches
// quota. It returns the claimed samples, how many of cands were examined
// (those examined and not claimed were had by other ranks; the rest were
// not looked at) and the rank's count in the epoch. With world > 0 (the
// job's ranks) a claim for ep ≥ 3 fails with ErrAhead, claiming nothing,
// until ranks 0..world-1 all ended epoch ep-2 (EndEpoch).
func (c *Cluster) Claim(ctx context.Context, name, run string, ep, rank, quota, want int, cands []int32, world int) (claimed []int32, examined, count int, err error) {
	jk := c.keys.job(name)
	args := make([]any, 0, 6+len(cands))
	args = append(args, rank, quota, want, c.o.JobTTL.Milliseconds(), ep, world)
	for _, s := range cands {
		args = append(args, s)
	}
	keys := []string{jk.seen(run, ep), jk.got(run, ep), jk.shape, jk.members, jk.seen(run, ep-2), jk.got(run, ep-2), jk.ended(run)}
	octx, cancel := c.op(ctx)
	defer cancel()
	res, err := claimScript.Run(octx, c.rdb, keys, args...).Int64Slice()
	c.st.claimCalls.Add(1)
	if c.note(err) != nil {
		return nil, 0, 0, fmt.Errorf("cluster: job %s: claim: %w", name, err)
	}
	if len(res) == 2 && res[0] == -1 {
		c.st.claimsAhead.Add(1)
		return nil, 0, 0, fmt.Errorf("%w: job %s rank %d epoch %d", ErrAhead, name, rank, ep)
	}
	if len(res) < 2 || int(res[1]) > len(cands) {
		return nil, 0, 0, fmt.Errorf("cluster: job %s: claim: unexpected answer %v", name, res)
	}
	claimed = make([]int32, 0, len(res)-2)
	for _, v := range res[2:] {
		claimed = append(claimed, int32(v))
	}
	c.st.claims.Add(int64(len(claimed)))
	return claimed, int(res[1]), int(res[0]), nil
}

// EndEpoch records that rank read the end of epoch ep of run run (the
// claims' check of how far ahead a rank may run).
func (c *Cluster) EndEpoch(ctx context.Context, name, run string, ep, rank int) error {
	jk := c.keys.job(name)
	octx, cancel := c.op(ctx)
	defer cancel()
	err := endScript.Run(octx, c.rdb, []string{jk.ended(run)}, rank, ep, c.o.JobTTL.Milliseconds()).Err()
	if c.note(err) != nil {
		return fmt.Errorf("cluster: job %s: end of epoch %d: %w", name, ep, err)
	}
	return nil
}
