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
// two epochs back; ARGV rank, quota, want, ttl ms, candidates...
// Returns {rank's count, candidates examined, claimed...}.
var claimScript = redis.NewScript(`
local got = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
local quota = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local out = {got, 0}
local n = 0
for i = 5, #ARGV do
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
redis.call('DEL', KEYS[5], KEYS[6])
return out`)

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
// not looked at) and the rank's count in the epoch.
func (c *Cluster) Claim(ctx context.Context, name, run string, ep, rank, quota, want int, cands []int32) (claimed []int32, examined, count int, err error) {
	jk := c.keys.job(name)
	args := make([]any, 0, 4+len(cands))
	args = append(args, rank, quota, want, c.o.JobTTL.Milliseconds())
	for _, s := range cands {
		args = append(args, s)
	}
	keys := []string{jk.seen(run, ep), jk.got(run, ep), jk.shape, jk.members, jk.seen(run, ep-2), jk.got(run, ep-2)}
	octx, cancel := c.op(ctx)
	defer cancel()
	res, err := claimScript.Run(octx, c.rdb, keys, args...).Int64Slice()
	c.st.claimCalls.Add(1)
	if c.note(err) != nil {
		return nil, 0, 0, fmt.Errorf("cluster: job %s: claim: %w", name, err)
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
