package cluster

// The cluster tier's write side. One node fills a file for all:
//
//  1. Take the fill lease: SET lease token NX PX Options.Lease. A node that
//     finds it taken waits (tier.go: Wait) instead of reading the source.
//  2. Charge the quota: one script on the quota slot adds the file's size
//     to the counter unless that would pass the quota (never exceeded; no
//     eviction on our side), and records the charge under the file id, so
//     a refill after a crash does not charge twice.
//  3. Write the chunks, each with a time to live (chunkTTL): a node killed
//     here leaves chunks nobody can see (no manifest) and that expire.
//     A renewer extends the lease every third of its life while the fill
//     runs (compare-and-pexpire: only our own lease).
//  4. Commit: one script on the file's slot checks that the lease is still
//     ours and every chunk is there, makes the chunks persistent, SETs the
//     manifest (the file is visible from here on) and deletes the lease.
//
// Abort (the source failed, the cluster failed, the file changed) deletes
// the chunks, takes the charge back and releases the lease.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/epochfs/epochfs/internal/cluster/layout"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// chunkTTL is how long the chunks of a fill live before its commit. A fill
// slower than this (a file of tens of GB from a very slow source) fails
// its commit and the file is read from the source.
const chunkTTL = time.Hour

// reserveScript charges a file's size to the quota counter.
// KEYS: bytes, sizes; ARGV: file id, size, quota. Returns 1 if charged
// (now or before), 0 if it would pass the quota.
var reserveScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 1 end
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if cur + tonumber(ARGV[2]) > tonumber(ARGV[3]) then return 0 end
redis.call('INCRBY', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1`)

// renewScript extends a lease if it is still the caller's.
// KEYS: lease; ARGV: token, ttl ms.
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`)

// releaseScript deletes a lease if it is still the caller's.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// commitScript makes a fill visible. KEYS: lease, manifest, chunks...;
// ARGV: token, manifest. Returns 1, 0 (lease lost), -1 (a chunk is gone).
var commitScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
for i = 3, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then return -1 end
end
for i = 3, #KEYS do redis.call('PERSIST', KEYS[i]) end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('DEL', KEYS[1])
return 1`)

// errStored: the file was stored by another node meanwhile (Fill).
var errStored = errors.New("cluster: stored meanwhile")

// Fill is one node's fill of one file version. Write the file's bytes in
// order, then Commit, or Abort. Not safe for concurrent use.
type Fill struct {
	c     *Cluster
	k     FileKey
	fk    layout.File
	token string
	buf   []byte
	man   manifest // the chunks' MACs so far
	n     int64    // bytes written so far
	lost  atomic.Bool
	done  bool
	// peers: a fill of data = "peers": the chunks are sealed, not
	// stored, and the commit records this node as the holder.
	peers bool

	stopRenew context.CancelFunc
	renewWG   sync.WaitGroup
}

// Fill takes k's fill lease and charges its size to the quota. ErrBusy:
// another node fills it; ErrFull: no room; ErrDown: the cluster fails.
func (c *Cluster) Fill(ctx context.Context, k FileKey) (*Fill, error) {
	f, err := c.lease(ctx, k)
	if err != nil {
		return nil, err
	}
	fk := f.fk
	octx, cancel := c.op(ctx)
	defer cancel()
	// Another node may have committed the file between the caller's
	// lookup and this lease (its commit deletes its lease): look again
	// rather than fill it twice.
	stored, err := c.rdb.Exists(octx, fk.Manifest).Result()
	if c.note(err) != nil || stored != 0 {
		f.release()
		if err != nil {
			return nil, fmt.Errorf("cluster: fill %s: %w", k.Path, err)
		}
		return nil, errStored
	}
	charged, err := reserveScript.Run(octx, c.rdb, []string{c.keys.QuotaBytes(), c.keys.QuotaSizes()},
		fk.ID, k.Size, c.o.Quota).Int64()
	if c.note(err) != nil || charged != 1 {
		f.release()
		if err != nil {
			return nil, fmt.Errorf("cluster: fill %s: quota: %w", k.Path, err)
		}
		c.st.full.Add(1)
		return nil, ErrFull
	}
	f.startRenew()
	return f, nil
}

// lease takes k's fill lease: ErrBusy when another node holds it.
func (c *Cluster) lease(ctx context.Context, k FileKey) (*Fill, error) {
	if !c.Usable() {
		return nil, ErrDown
	}
	fk := c.keys.File(k)
	var tb [12]byte
	rand.Read(tb[:])
	token := c.o.Node + "/" + hex.EncodeToString(tb[:])
	octx, cancel := c.op(ctx)
	defer cancel()
	ok, err := c.rdb.SetNX(octx, fk.Lease, token, c.o.Lease).Result()
	if c.note(err) != nil {
		return nil, fmt.Errorf("cluster: fill %s: lease: %w", k.Path, err)
	}
	if !ok {
		return nil, ErrBusy
	}
	return &Fill{c: c, k: k, fk: fk, token: token,
		man: manifest{kind: kindFile, size: k.Size, mtime: k.Mtime, chunkSize: ChunkSize, path: k.Path}}, nil
}

// startRenew starts renewing the lease while the fill runs.
func (f *Fill) startRenew() {
	rctx, stop := context.WithCancel(f.c.ctx)
	f.stopRenew = stop
	f.renewWG.Add(1)
	go f.renew(rctx)
}

// renew extends the lease every third of its life until stopped; a lease
// found lost fails the fill.
func (f *Fill) renew(ctx context.Context) {
	defer f.renewWG.Done()
	c := f.c
	t := time.NewTicker(c.o.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		octx, cancel := c.op(ctx)
		n, err := renewScript.Run(octx, c.rdb, []string{f.fk.Lease}, f.token, c.o.Lease.Milliseconds()).Int64()
		cancel()
		if ctx.Err() != nil {
			return
		}
		if c.note(err) == nil && n == 0 {
			f.lost.Store(true)
			c.log.Warn("fill lease lost; the fill will not be committed", zap.String("path", f.k.Path))
			return
		}
		// An error: try again at the next tick (the lease has two more
		// thirds of its life).
	}
}

// Write appends p to the file, storing every full chunk.
func (f *Fill) Write(ctx context.Context, p []byte) error {
	if f.lost.Load() {
		return fmt.Errorf("cluster: fill %s: %w", f.k.Path, ErrLeaseLost)
	}
	if f.n+int64(len(p)) > f.k.Size {
		return fmt.Errorf("cluster: fill %s: %d bytes written to a file of %d", f.k.Path, f.n+int64(len(p)), f.k.Size)
	}
	f.n += int64(len(p))
	for len(p) > 0 {
		if f.buf == nil {
			f.buf = make([]byte, 0, min(int64(ChunkSize), f.k.Size))
		}
		take := min(len(p), ChunkSize-len(f.buf))
		f.buf = append(f.buf, p[:take]...)
		p = p[take:]
		if len(f.buf) == ChunkSize {
			if err := f.flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush stores the buffered chunk.
func (f *Fill) flush(ctx context.Context) error {
	c := f.c
	i := len(f.man.sums)
	if f.peers {
		f.man.seal(c.seal, f.buf)
		f.buf = f.buf[:0]
		return nil
	}
	octx, cancel := c.op(ctx)
	err := c.rdb.Set(octx, f.fk.Chunk(i), f.buf, chunkTTL).Err()
	cancel()
	if c.note(err) != nil {
		return fmt.Errorf("cluster: fill %s chunk %d: %w", f.k.Path, i, err)
	}
	f.man.seal(c.seal, f.buf)
	f.buf = f.buf[:0]
	return nil
}

// Commit stores the last chunk and makes the file visible.
func (f *Fill) Commit(ctx context.Context) error {
	c := f.c
	if f.done {
		return errors.New("cluster: fill already ended")
	}
	if f.n != f.k.Size {
		f.Abort()
		return fmt.Errorf("cluster: fill %s: %d bytes written to a file of %d", f.k.Path, f.n, f.k.Size)
	}
	if len(f.buf) > 0 {
		if err := f.flush(ctx); err != nil {
			f.Abort()
			return err
		}
	}
	f.stopRenew()
	f.renewWG.Wait()
	if f.lost.Load() {
		f.Abort()
		return fmt.Errorf("cluster: fill %s: %w", f.k.Path, ErrLeaseLost)
	}
	var n int64
	var err error
	octx, cancel := c.op(ctx)
	if f.peers {
		n, err = peerCommitScript.Run(octx, c.rdb, []string{f.fk.Lease, f.fk.Manifest, f.fk.Holders},
			f.token, f.man.encode(c.seal), c.pr.self).Int64()
	} else {
		keys := []string{f.fk.Lease, f.fk.Manifest}
		for i := range f.man.sums {
			keys = append(keys, f.fk.Chunk(i))
		}
		n, err = commitScript.Run(octx, c.rdb, keys, f.token, f.man.encode(c.seal)).Int64()
	}
	cancel()
	if c.note(err) != nil || n != 1 {
		f.Abort()
		if err == nil {
			err = ErrLeaseLost
			if n == -1 {
				err = errors.New("a chunk expired before the commit")
			}
		}
		return fmt.Errorf("cluster: fill %s: commit: %w", f.k.Path, err)
	}
	f.done = true
	c.st.fills.Add(1)
	c.st.fillBytes.Add(f.k.Size)
	return nil
}

// Abort drops what the fill wrote, its quota charge and its lease. It is
// safe after Commit (it does nothing) and more than once.
func (f *Fill) Abort() {
	if f.done {
		return
	}
	f.done = true
	c := f.c
	c.st.fillsAborted.Add(1)
	f.stopRenew()
	f.renewWG.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), c.o.Timeout)
	defer cancel()
	if !f.lost.Load() && !f.peers {
		// Only while the lease is ours: the charge and the chunks may be
		// another filler's once it is lost.
		var keys []string
		for i := range len(f.man.sums) {
			keys = append(keys, f.fk.Chunk(i))
		}
		if len(keys) > 0 {
			c.note(c.rdb.Del(ctx, keys...).Err())
		}
		c.note(unreserveScript.Run(ctx, c.rdb, []string{c.keys.QuotaBytes(), c.keys.QuotaSizes()}, f.fk.ID).Err())
	}
	f.release()
}

// release deletes the lease if it is still ours.
func (f *Fill) release() {
	c := f.c
	ctx, cancel := context.WithTimeout(context.Background(), c.o.Timeout)
	defer cancel()
	c.note(releaseScript.Run(ctx, c.rdb, []string{f.fk.Lease}, f.token).Err())
}
