package cluster

// The cluster tier's read side: a stored file is found by its manifest
// (Lookup, which fetches chunk 0 in the same round trip), read chunk by
// chunk with every chunk checked against the manifest (Copy.Chunk), and
// dropped whole when a chunk or the manifest fails its MAC. A node
// that finds another node filling the file waits for the manifest or for
// the lease to go (Wait).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/epochfs/epochfs/internal/cluster/layout"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Copy is a stored file version.
type Copy struct {
	c   *Cluster
	k   FileKey
	fk  layout.File
	man *manifest
	raw []byte     // the manifest as stored (the drop compares it)
	mu  sync.Mutex // guards first and counted
	// first is chunk 0 as read with the manifest (the keys share a hash
	// slot, so one round trip fetches both), until Chunk takes it.
	first []byte
	// counted: the hit was counted (at the first chunk read).
	counted bool
	last    lastChunk
}

// Lookup returns the stored copy of k: ErrMiss if there is none, ErrDown
// while the cluster fails, ErrCorrupt if its manifest is bad (it is
// dropped).
func (c *Cluster) Lookup(ctx context.Context, k FileKey) (*Copy, error) {
	if !c.Usable() {
		return nil, ErrDown
	}
	fk := c.keys.File(k)
	octx, cancel := c.op(ctx)
	// The manifest and chunk 0 in one round trip: most dataset files are
	// one chunk, so a hit costs one round trip, not two.
	pipe := c.rdb.Pipeline()
	mcmd, ccmd := pipe.Get(octx, fk.Manifest), pipe.Get(octx, fk.Chunk(0))
	_, _ = pipe.Exec(octx)
	cancel()
	raw, err := mcmd.Bytes()
	if errors.Is(c.note(err), redis.Nil) {
		return nil, ErrMiss
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: lookup %s: %w", k.Path, err)
	}
	cp := &Copy{c: c, k: k, fk: fk, raw: raw}
	m, err := c.fileManifest(k, raw)
	if err != nil {
		c.log.Warn("stored manifest is bad; dropped", zap.String("path", k.Path), zap.Error(err))
		cp.man = &manifest{size: k.Size, chunkSize: ChunkSize}
		cp.drop(ctx)
		return nil, fmt.Errorf("cluster: lookup %s: %w: %w", k.Path, ErrCorrupt, err)
	}
	cp.man = m
	if first, err := ccmd.Bytes(); err == nil {
		cp.first = first
	}
	return cp, nil
}

// fileManifest decodes and checks the stored manifest of file version k.
func (c *Cluster) fileManifest(k FileKey, raw []byte) (*manifest, error) {
	m, err := decodeManifest(raw, c.seal)
	if err == nil && (m.kind != kindFile || m.path != k.Path || m.size != k.Size || m.mtime != k.Mtime || m.chunkSize < minChunkSize) {
		err = fmt.Errorf("%w: for %q size %d, not %q size %d", errBadManifest, m.path, m.size, k.Path, k.Size)
	}
	return m, err
}

// Size is the file's size; ChunkSize its chunks'; Chunks their count.
func (cp *Copy) Size() int64      { return cp.man.size }
func (cp *Copy) ChunkSize() int64 { return cp.man.chunkSize }
func (cp *Copy) Chunks() int      { return len(cp.man.sums) }

// Chunk returns chunk i, checked against the manifest. A chunk that fails
// drops the copy (ErrCorrupt); one that is gone (dropped by another node
// meanwhile) is ErrMiss.
func (cp *Copy) Chunk(ctx context.Context, i int) ([]byte, error) {
	c := cp.c
	if i < 0 || i >= len(cp.man.sums) {
		return nil, fmt.Errorf("cluster: %s: chunk %d of %d", cp.k.Path, i, len(cp.man.sums))
	}
	if !c.Usable() {
		return nil, ErrDown
	}
	var data []byte
	var err error
	cp.mu.Lock()
	if i == 0 && cp.first != nil {
		data, cp.first = cp.first, nil
	}
	cp.mu.Unlock()
	if data == nil {
		octx, cancel := c.op(ctx)
		data, err = c.rdb.Get(octx, cp.fk.Chunk(i)).Bytes()
		cancel()
	}
	if errors.Is(c.note(err), redis.Nil) {
		return nil, fmt.Errorf("cluster: %s chunk %d: %w", cp.k.Path, i, ErrMiss)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: %s chunk %d: %w", cp.k.Path, i, err)
	}
	if !cp.man.verify(c.seal, i, data) {
		c.log.Warn("stored chunk failed its MAC; the copy is dropped", zap.String("path", cp.k.Path),
			zap.Int("chunk", i), zap.Int("bytes", len(data)), zap.Int64("want", cp.man.chunkLen(i)))
		cp.drop(ctx)
		return nil, fmt.Errorf("cluster: %s chunk %d: %w", cp.k.Path, i, ErrCorrupt)
	}
	cp.mu.Lock()
	if !cp.counted {
		cp.counted = true
		c.st.hits.Add(1)
	}
	cp.mu.Unlock()
	c.st.hitBytes.Add(int64(len(data)))
	return data, nil
}

// ReadAt fills buf with the stored bytes from off, fewer only at the end
// of the file, chunk by chunk (each checked, as Chunk); the chunk read last
// is kept for the next read. Safe for concurrent use. An error (ErrMiss:
// the copy was dropped meanwhile; ErrCorrupt; ErrDown) leaves the rest of
// buf unfilled.
func (cp *Copy) ReadAt(ctx context.Context, buf []byte, off int64) (int, error) {
	return cp.last.readAt(ctx, buf, off, cp.man, cp.Chunk)
}

// lastChunk keeps the chunk a ReadAt read last, for the next read (reads
// of one file follow one another).
type lastChunk struct {
	mu   sync.Mutex
	i    int
	data []byte
}

// readAt fills buf from off with the chunks of the file m describes, each
// got from chunk; see Copy.ReadAt.
func (l *lastChunk) readAt(ctx context.Context, buf []byte, off int64, m *manifest,
	chunk func(context.Context, int) ([]byte, error)) (int, error) {
	n := 0
	for n < len(buf) && off+int64(n) < m.size {
		pos := off + int64(n)
		i := int(pos / m.chunkSize)
		l.mu.Lock()
		data := l.data
		if l.i != i {
			data = nil
		}
		l.mu.Unlock()
		if data == nil {
			var err error
			if data, err = chunk(ctx, i); err != nil {
				return n, err
			}
			l.mu.Lock()
			l.i, l.data = i, data
			l.mu.Unlock()
		}
		n += copy(buf[n:], data[pos-int64(i)*m.chunkSize:])
	}
	return n, nil
}

// dropScript deletes a file's manifest and chunks if the manifest is still
// the one the caller read (a copy filled again meanwhile stays).
// KEYS: manifest, chunks...; ARGV: the manifest as read.
var dropScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('DEL', unpack(KEYS))
return 1`)

// unreserveScript takes a file's charge off the quota counter.
// KEYS: bytes, sizes; ARGV: file id.
var unreserveScript = redis.NewScript(`
local s = redis.call('HGET', KEYS[2], ARGV[1])
if not s then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('DECRBY', KEYS[1], s)
return 1`)

// drop deletes a bad copy and its charge; failures are logged (a copy
// that fails its MAC is never served anyway).
func (cp *Copy) drop(ctx context.Context) {
	c := cp.c
	c.st.corrupt.Add(1)
	keys := []string{cp.fk.Manifest}
	for i := range chunksOf(cp.man.size, cp.man.chunkSize) {
		keys = append(keys, cp.fk.Chunk(i))
	}
	octx, cancel := c.op(context.WithoutCancel(ctx))
	defer cancel()
	n, err := dropScript.Run(octx, c.rdb, keys, cp.raw).Int64()
	if c.note(err) != nil {
		c.log.Warn("cannot drop a bad stored copy", zap.String("path", cp.k.Path), zap.Error(err))
		return
	}
	if n == 1 {
		if err := c.note(unreserveScript.Run(octx, c.rdb, []string{c.keys.QuotaBytes(), c.keys.QuotaSizes()}, cp.fk.ID).Err()); err != nil {
			c.log.Warn("cannot release a dropped copy's quota", zap.String("path", cp.k.Path), zap.Error(err))
		}
	}
}

// Wait returns nil once k is stored or nobody holds its fill lease (the
// caller then looks again), or ctx's error when it ends first (counted as
// a wait that timed out when ctx's deadline passed). It polls: a fill
// shows as one manifest SET, and a poll is one round trip of a few bytes.
func (c *Cluster) Wait(ctx context.Context, k FileKey) error {
	c.st.leaseWaits.Add(1)
	fk := c.keys.File(k)
	delay := 5 * time.Millisecond
	for {
		if !c.Usable() {
			return ErrDown
		}
		octx, cancel := c.op(ctx)
		n, err := c.rdb.Exists(octx, fk.Lease).Result()
		var m int64
		if err == nil {
			m, err = c.rdb.Exists(octx, fk.Manifest).Result()
		}
		cancel()
		if err := ctx.Err(); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				c.st.leaseWaitTimeouts.Add(1)
			}
			return err
		}
		if c.note(err) != nil {
			return fmt.Errorf("cluster: wait for %s: %w", k.Path, err)
		}
		if n == 0 || m == 1 {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				c.st.leaseWaitTimeouts.Add(1)
			}
			return ctx.Err()
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}
