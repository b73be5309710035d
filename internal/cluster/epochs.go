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
	"errors"
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
// two epochs back, ended, lost, lost two epochs back, done, done two
// epochs back; ARGV rank, share, want, ttl ms, epoch, world, check (1: the
// two-epochs check), padded, probe (1: the rank's count is final unless
// its quota grew), candidates... Returns {rank's count, candidates
// examined, rank's quota, ranks lost, claimed...}, or {-1, 0} when the
// check finds a rank of 0..world-1 that has not ended epoch-2.
//
// The rank's quota is sampler.ClusterQuota: share, plus its part of what
// the epoch's lost ranks left and its done ranks did not take. The rank's
// count for the quota is its claims plus the padding its node handed it.
var claimScript = redis.NewScript(`
local ep = tonumber(ARGV[5])
local world = tonumber(ARGV[6])
if ARGV[7] == '1' and world > 0 and ep >= 3 then
  local ended = redis.call('HVALS', KEYS[7])
  if #ended < world then return {-1, 0} end
  for _, v in ipairs(ended) do
    if tonumber(v) < ep - 2 then return {-1, 0} end
  end
end
local rank = tonumber(ARGV[1])
local share = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local pad = tonumber(ARGV[8])
local lost = redis.call('HGETALL', KEYS[8])
local done = redis.call('HGETALL', KEYS[10])
local nlost, ndone = #lost / 2, #done / 2
local quota, final = share, nil
local left, below = 0, 0
for i = 1, #lost, 2 do
  local r, g = tonumber(lost[i]), tonumber(lost[i + 1])
  if g < share then left = left + share - g end
  if r < rank then below = below + 1 end
  if r == rank then final = g end
end
for i = 1, #done, 2 do
  local r, g = tonumber(done[i]), tonumber(done[i + 1])
  if g > share then left = left - (g - share) end
  if r < rank then below = below + 1 end
  if r == rank and not final then final = g end
end
if final then
  quota = final
else
  local live = world - nlost - ndone
  if live > 0 and left > 0 then
    quota = share + math.floor(left / live)
    if rank - below < left % live then quota = quota + 1 end
  end
end
local got = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
local out = {got, 0, quota, nlost}
local n = 0
for i = 10, #ARGV do
  if got + pad >= quota or n >= want then break end
  out[2] = out[2] + 1
  if redis.call('SETBIT', KEYS[1], ARGV[i], 1) == 0 then
    n = n + 1
    got = got + 1
    out[#out + 1] = tonumber(ARGV[i])
  end
end
out[1] = got
redis.call('HSET', KEYS[2], ARGV[1], got)
if ARGV[9] == '1' and got + pad >= quota and not final then
  redis.call('HSET', KEYS[10], ARGV[1], got + pad)
end
for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ARGV[4]) end
redis.call('PEXPIRE', KEYS[7], ARGV[4])
redis.call('PEXPIRE', KEYS[8], ARGV[4])
redis.call('PEXPIRE', KEYS[10], ARGV[4])
redis.call('DEL', KEYS[5], KEYS[6], KEYS[9], KEYS[11])
return out`)

// lostScript: KEYS seen, got, lost, done; ARGV rank, ttl ms, returned...
// The rank's returned samples (granted to it, never handed out) go back
// to the seen set's unseen ones, and its count, so lowered, is its final
// one (the first report of the rank in the epoch counts). Returns 1, or 0
// for a rank already lost or done.
var lostScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 or redis.call('HEXISTS', KEYS[4], ARGV[1]) == 1 then return 0 end
local got = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
for i = 3, #ARGV do
  if redis.call('SETBIT', KEYS[1], ARGV[i], 0) == 1 then got = got - 1 end
end
if got < 0 then got = 0 end
redis.call('HSET', KEYS[2], ARGV[1], got)
redis.call('HSET', KEYS[3], ARGV[1], got)
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
return 1`)

// seedScript: KEYS seen, tmp, ended, shape, members; ARGV bitmap, epoch,
// world, ttl ms. ORs bitmap into the seen set (samples an interrupted run
// handed out), and records every rank of 0..world-1 as having ended the
// epoch before (so that the two-epochs check lets the resumed epoch be
// claimed). Returns 1.
var seedScript = redis.NewScript(`
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[4])
redis.call('BITOP', 'OR', KEYS[1], KEYS[1], KEYS[2])
redis.call('DEL', KEYS[2])
local before = tonumber(ARGV[2]) - 1
for r = 0, tonumber(ARGV[3]) - 1 do
  local cur = tonumber(redis.call('HGET', KEYS[3], r) or '0')
  if before > cur then redis.call('HSET', KEYS[3], r, before) end
end
for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], ARGV[4]) end
return 1`)

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
	jk := c.keys.Job(name)
	var rb [8]byte
	rand.Read(rb[:])
	// The script keeps "shape\nrun": the shape goes as its hash, which
	// has no newline whatever the config's text.
	sum := sha256.Sum256([]byte(shape))
	shape = hex.EncodeToString(sum[:])
	octx, cancel := c.op(ctx)
	defer cancel()
	res, err := joinScript.Run(octx, c.rdb, []string{jk.Shape, jk.Members}, shape, c.o.Node,
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
	jk := c.keys.Job(name)
	octx, cancel := c.op(ctx)
	defer cancel()
	if err := c.note(leaveScript.Run(octx, c.rdb, []string{jk.Shape, jk.Members}, c.o.Node).Err()); err != nil {
		return fmt.Errorf("cluster: job %s: leave: %w", name, err)
	}
	return nil
}

// ClaimRequest is a rank's claim in epoch Epoch of a run: Cands are
// subset-local sample numbers in the rank's order of preference; Share
// the rank's quota with no rank lost; Padded the padding its node handed
// it this epoch; World the job's ranks; CheckAhead: refuse the claim
// (ErrAhead) for Epoch ≥ 3 until ranks 0..World-1 all ended Epoch-2
// (EndEpoch).
type ClaimRequest struct {
	Epoch, Rank   int
	Share, Padded int
	Want          int
	World         int
	CheckAhead    bool
	// Probe: the rank's count is final unless its quota grew; if it did
	// not, the rank is recorded as done, and what ranks lost later leave
	// goes to the others.
	Probe bool
	Cands []int32
}

// ClaimResult is a claim's answer: the claimed samples, how many of the
// candidates were examined (those examined and not claimed were had by
// other ranks; the rest were not looked at), the rank's count and quota
// in the epoch, and how many ranks the epoch has lost.
type ClaimResult struct {
	Claimed                []int32
	Examined, Count, Quota int
	Losses                 int
}

// Claim claims, in order, those of q.Cands no rank has had this epoch,
// until q.Want are claimed or the rank's count reaches its quota: its
// share, plus its part of what the epoch's lost ranks (LoseRank) left.
func (c *Cluster) Claim(ctx context.Context, name, run string, q ClaimRequest) (ClaimResult, error) {
	jk := c.keys.Job(name)
	flag := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	args := make([]any, 0, 9+len(q.Cands))
	args = append(args, q.Rank, q.Share, q.Want, c.o.JobTTL.Milliseconds(), q.Epoch, q.World, flag(q.CheckAhead), q.Padded, flag(q.Probe))
	for _, s := range q.Cands {
		args = append(args, s)
	}
	ep := q.Epoch
	keys := []string{jk.Seen(run, ep), jk.Got(run, ep), jk.Shape, jk.Members, jk.Seen(run, ep-2), jk.Got(run, ep-2),
		jk.Ended(run), jk.Lost(run, ep), jk.Lost(run, ep-2), jk.Done(run, ep), jk.Done(run, ep-2)}
	octx, cancel := c.op(ctx)
	defer cancel()
	res, err := claimScript.Run(octx, c.rdb, keys, args...).Int64Slice()
	c.st.claimCalls.Add(1)
	if c.note(err) != nil {
		return ClaimResult{}, fmt.Errorf("cluster: job %s: claim: %w", name, err)
	}
	if len(res) == 2 && res[0] == -1 {
		c.st.claimsAhead.Add(1)
		return ClaimResult{}, fmt.Errorf("%w: job %s rank %d epoch %d", ErrAhead, name, q.Rank, ep)
	}
	if len(res) < 4 || int(res[1]) > len(q.Cands) {
		return ClaimResult{}, fmt.Errorf("cluster: job %s: claim: unexpected answer %v", name, res)
	}
	out := ClaimResult{Claimed: make([]int32, 0, len(res)-4), Examined: int(res[1]), Count: int(res[0]),
		Quota: int(res[2]), Losses: int(res[3])}
	for _, v := range res[4:] {
		out.Claimed = append(out.Claimed, int32(v))
	}
	c.st.claims.Add(int64(len(out.Claimed)))
	return out, nil
}

// LoseRank records that rank was lost in epoch ep of run run: returned
// (samples claimed for it and never handed out) go back to the epoch's
// unseen samples, and what it had yet to get of its share goes to the
// live ranks' quotas (Claim). A rank's first report in an epoch counts.
func (c *Cluster) LoseRank(ctx context.Context, name, run string, ep, rank int, returned []int32) error {
	jk := c.keys.Job(name)
	args := make([]any, 0, 2+len(returned))
	args = append(args, rank, c.o.JobTTL.Milliseconds())
	for _, s := range returned {
		args = append(args, s)
	}
	octx, cancel := c.op(ctx)
	defer cancel()
	err := lostScript.Run(octx, c.rdb, []string{jk.Seen(run, ep), jk.Got(run, ep), jk.Lost(run, ep), jk.Done(run, ep)}, args...).Err()
	if c.note(err) != nil {
		return fmt.Errorf("cluster: job %s: rank %d lost in epoch %d: %w", name, rank, ep, err)
	}
	return nil
}

// Seen returns epoch ep's seen set of run run as Redis keeps it: bit i
// (the most significant bit of byte i/8 first) is subset-local sample i,
// set once a rank claimed it; nil when nothing was claimed.
func (c *Cluster) Seen(ctx context.Context, name, run string, ep int) ([]byte, error) {
	jk := c.keys.Job(name)
	octx, cancel := c.op(ctx)
	defer cancel()
	b, err := c.rdb.Get(octx, jk.Seen(run, ep)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if c.note(err) != nil {
		return nil, fmt.Errorf("cluster: job %s: seen set of epoch %d: %w", name, ep, err)
	}
	return b, nil
}

// Seed marks the samples set in bitmap (Seen's layout) as had in epoch ep
// of run run, and records ranks 0..world-1 as having ended epoch ep-1: a
// resumed job continues ep with the samples an interrupted run handed out
// left out. Every node of the resumed job seeds the same bits.
func (c *Cluster) Seed(ctx context.Context, name, run string, ep, world int, bitmap []byte) error {
	jk := c.keys.Job(name)
	octx, cancel := c.op(ctx)
	defer cancel()
	keys := []string{jk.Seen(run, ep), jk.Seen(run, ep) + ":seed", jk.Ended(run), jk.Shape, jk.Members}
	err := seedScript.Run(octx, c.rdb, keys, bitmap, ep, world, c.o.JobTTL.Milliseconds()).Err()
	if c.note(err) != nil {
		return fmt.Errorf("cluster: job %s: seed epoch %d: %w", name, ep, err)
	}
	return nil
}

// EndEpoch records that rank read the end of epoch ep of run run (the
// claims' check of how far ahead a rank may run).
func (c *Cluster) EndEpoch(ctx context.Context, name, run string, ep, rank int) error {
	jk := c.keys.Job(name)
	octx, cancel := c.op(ctx)
	defer cancel()
	err := endScript.Run(octx, c.rdb, []string{jk.Ended(run)}, rank, ep, c.o.JobTTL.Milliseconds()).Err()
	if c.note(err) != nil {
		return fmt.Errorf("cluster: job %s: end of epoch %d: %w", name, ep, err)
	}
	return nil
}
