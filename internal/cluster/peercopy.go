package cluster

// Reading a file from the peers that hold it, and filling one no peer
// holds (peers.go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/epochfs/epochfs/internal/cluster/peer"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// peerCommitScript makes a peers fill visible: the manifest, and this
// node among the holders. KEYS: lease, manifest, holders; ARGV: token,
// manifest, node. Returns 1, or 0 when the lease is lost.
var peerCommitScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[3])
redis.call('DEL', KEYS[1])
return 1`)

// PeerCopy is a file version held by live peers, read chunk by chunk from
// them, each chunk checked against the manifest.
type PeerCopy struct {
	c       *Cluster
	k       FileKey
	man     *manifest
	holders []string // live, not this node, in rendezvous order
	last    lastChunk
}

// Size is the file's size; Chunks the count of its chunks; Holders the
// live peers that hold it.
func (pc *PeerCopy) Size() int64       { return pc.man.size }
func (pc *PeerCopy) Chunks() int       { return len(pc.man.sums) }
func (pc *PeerCopy) Holders() []string { return pc.holders }

// peerLookup reads k's manifest and holders (one round trip: they share a
// slot). ErrMiss: no manifest; ErrCorrupt: a bad one (deleted).
func (c *Cluster) peerLookup(ctx context.Context, k FileKey) (*PeerCopy, error) {
	if !c.Usable() {
		return nil, ErrDown
	}
	fk := c.keys.File(k)
	octx, cancel := c.op(ctx)
	pipe := c.rdb.Pipeline()
	mcmd, hcmd := pipe.Get(octx, fk.Manifest), pipe.SMembers(octx, fk.Holders)
	_, _ = pipe.Exec(octx)
	cancel()
	raw, err := mcmd.Bytes()
	if errors.Is(c.note(err), redis.Nil) {
		return nil, ErrMiss
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: lookup %s: %w", k.Path, err)
	}
	m, err := c.fileManifest(k, raw)
	if err != nil {
		c.log.Warn("stored manifest is bad; dropped", zap.String("path", k.Path), zap.Error(err))
		c.st.corrupt.Add(1)
		dctx, cancel := c.op(context.WithoutCancel(ctx))
		c.note(dropScript.Run(dctx, c.rdb, []string{fk.Manifest}, raw).Err())
		cancel()
		return nil, fmt.Errorf("cluster: lookup %s: %w: %w", k.Path, ErrCorrupt, err)
	}
	members := c.Members()
	var live []string
	for _, h := range hcmd.Val() {
		if h != c.pr.self {
			if _, ok := slices.BinarySearch(members, h); ok {
				live = append(live, h)
			}
		}
	}
	return &PeerCopy{c: c, k: k, man: m, holders: peer.Owners(nil, fk.ID, live, len(live))}, nil
}

// peerTimeout bounds one request to a peer.
func (c *Cluster) peerTimeout() time.Duration { return max(4*c.o.Timeout, 2*time.Second) }

// Chunk returns chunk i from the first holder that serves it whole and
// right. A holder that fails is skipped (for peerDown); one whose bytes
// fail the manifest is counted as refused. A holder that answers "not
// held" may be between its commit (which lists it) and the install of
// its copy: when every holder said so, they are asked once more after
// notHeldRetry. ErrMiss: no holder served it.
func (pc *PeerCopy) Chunk(ctx context.Context, i int) ([]byte, error) {
	c, pr := pc.c, pc.c.pr
	if i < 0 || i >= len(pc.man.sums) {
		return nil, fmt.Errorf("cluster: %s: chunk %d of %d", pc.k.Path, i, len(pc.man.sums))
	}
	off, n := int64(i)*pc.man.chunkSize, int(pc.man.chunkLen(i))
	for try := 0; try < 2; try++ {
		onlyNotHeld := true
		for _, h := range pc.holders {
			if pr.isDown(h) {
				onlyNotHeld = false
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, c.peerTimeout())
			data, err := pr.client.Range(rctx, h, pc.k, off, n)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				if errors.Is(err, peer.ErrNotHeld) {
					pr.st.notHeld.Add(1)
					continue
				}
				onlyNotHeld = false
				pr.fail(h, err)
				continue
			}
			if !pc.man.verify(c.seal, i, data) {
				onlyNotHeld = false
				pr.st.refused.Add(1)
				pr.fail(h, errors.New("a range failed the file's MAC"))
				c.log.Warn("peers: a peer served bytes that fail the file's MAC; refused", zap.String("peer", h),
					zap.String("path", pc.k.Path), zap.Int("chunk", i))
				continue
			}
			pr.good(h)
			pr.st.reads.Add(1)
			pr.st.bytes.Add(int64(n))
			return data, nil
		}
		if !onlyNotHeld || len(pc.holders) == 0 {
			break
		}
		t := time.NewTimer(notHeldRetry)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	return nil, fmt.Errorf("cluster: %s chunk %d: %w (no live holder served it)", pc.k.Path, i, ErrMiss)
}

// notHeldRetry is how long a read waits before it asks holders that
// answered "not held" once more.
const notHeldRetry = 50 * time.Millisecond

// ReadAt fills buf from off, chunk by chunk (each as Chunk); see
// Copy.ReadAt.
func (pc *PeerCopy) ReadAt(ctx context.Context, buf []byte, off int64) (int, error) {
	return pc.last.readAt(ctx, buf, off, pc.man, pc.Chunk)
}

func (pr *peers) entry(h string) *peerHealth {
	e, _ := pr.health.LoadOrCompute(h, func() *peerHealth { return &peerHealth{} })
	return e
}

func (pr *peers) isDown(h string) bool {
	e, ok := pr.health.Load(h)
	return ok && time.Now().UnixNano() < e.downUntil.Load()
}

func (pr *peers) fail(h string, err error) {
	pr.st.errors.Add(1)
	e := pr.entry(h)
	e.errs.Add(1)
	e.downUntil.Store(time.Now().Add(peerDown).UnixNano())
	e.mu.Lock()
	e.last = err.Error()
	e.mu.Unlock()
}

func (pr *peers) good(h string) {
	e := pr.entry(h)
	e.ok.Add(1)
	e.downUntil.Store(0)
}

// PeerStored returns a copy of k that live peers hold. When none holds
// it, it asks the file's owner to fetch it and waits for it (at most
// MaxWait): the PFS then serves it once, to the node that keeps it. false:
// read the source.
func (c *Cluster) PeerStored(ctx context.Context, k FileKey) (*PeerCopy, bool) {
	pc, err := c.peerLookup(ctx, k)
	if err == nil && slices.ContainsFunc(pc.holders, func(h string) bool { return !c.pr.isDown(h) }) {
		return pc, true
	}
	if err != nil && !errors.Is(err, ErrMiss) && !errors.Is(err, ErrCorrupt) {
		return nil, false
	}
	// Held by no live peer that answers: its owner among the members that
	// answer (the owner it will have once a dead holder's membership
	// expires) fetches it.
	members := slices.DeleteFunc(slices.Clone(c.Members()), c.pr.isDown)
	asked := false
	for _, o := range peer.Owners(nil, c.keys.File(k).ID, members, 1+c.o.Replicas) {
		if o == c.pr.self {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, c.peerTimeout())
		ferr := c.pr.client.Fetch(actx, o, k)
		cancel()
		if ferr == nil {
			asked = true
			break
		}
		if !errors.Is(ferr, peer.ErrNoRoom) && !errors.Is(ferr, peer.ErrNotHeld) {
			c.pr.fail(o, ferr)
		}
	}
	if !asked {
		return nil, false
	}
	c.pr.st.asks.Add(1)
	wctx, cancel := context.WithTimeout(ctx, c.o.MaxWait)
	werr := c.waitHeld(wctx, k, false)
	cancel()
	if werr != nil {
		if errors.Is(werr, context.DeadlineExceeded) {
			c.pr.st.askTimeouts.Add(1)
		}
		return nil, false
	}
	if pc, err = c.peerLookup(ctx, k); err == nil && slices.ContainsFunc(pc.holders, func(h string) bool { return !c.pr.isDown(h) }) {
		return pc, true
	}
	return nil, false
}

// waitHeld returns nil once a live peer holds k, or once its fill lease,
// taken (or, with leased, already held), is gone; ctx's error when it
// ends first.
func (c *Cluster) waitHeld(ctx context.Context, k FileKey, leased bool) error {
	fk := c.keys.File(k)
	delay := 5 * time.Millisecond
	for {
		if !c.Usable() {
			return ErrDown
		}
		octx, cancel := c.op(ctx)
		pipe := c.rdb.Pipeline()
		lcmd, hcmd := pipe.Exists(octx, fk.Lease), pipe.SMembers(octx, fk.Holders)
		_, err := pipe.Exec(octx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		if c.note(err) != nil {
			return fmt.Errorf("cluster: wait for %s: %w", k.Path, err)
		}
		members := c.Members()
		for _, h := range hcmd.Val() {
			if _, ok := slices.BinarySearch(members, h); ok && h != c.pr.self && !c.pr.isDown(h) {
				return nil
			}
		}
		if lcmd.Val() == 1 {
			leased = true
		} else if leased {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// copyPeers is Copy with data = "peers": from a live holder when there is
// one, otherwise from the source under the fill lease (the manifest and
// this node as a holder committed at the end), or after another node's
// fill.
func (c *Cluster) copyPeers(ctx context.Context, k FileKey, w io.Writer, progress func(int64),
	source func(w io.Writer, progress func(int64)) (int64, error)) (int64, error) {
	if !c.Keeps(k) {
		// A copy of another node's share (the shared buffer's, a copy a
		// peer asked for): read from its holders, or from the source
		// through its owner; never fill it here, or the node that keeps it
		// would find this node listed as a holder of a copy it does not
		// serve.
		if pc, ok := c.PeerStored(ctx, k); ok {
			return c.readPeers(ctx, pc, w, progress, source)
		}
		return source(w, progress)
	}
	deadline := time.Now().Add(c.o.MaxWait)
	for range maxLookups {
		pc, err := c.peerLookup(ctx, k)
		if err == nil && len(pc.holders) > 0 {
			return c.readPeers(ctx, pc, w, progress, source)
		}
		if err != nil && !errors.Is(err, ErrMiss) && !errors.Is(err, ErrCorrupt) {
			return source(w, progress)
		}
		f, err := c.peerFill(ctx, k)
		switch {
		case err == nil:
			return c.fillFromSource(ctx, f, w, progress, source)
		case errors.Is(err, errStored):
			continue
		case errors.Is(err, ErrBusy) && time.Now().Before(deadline):
			wctx, cancel := context.WithDeadline(ctx, deadline)
			werr := c.waitHeld(wctx, k, true)
			cancel()
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			if werr != nil {
				return source(w, progress)
			}
		default:
			return source(w, progress)
		}
	}
	return source(w, progress)
}

// peerFill takes k's fill lease for a peers fill (no quota: the bytes go
// to this node's tier, not to Redis). errStored: a live peer holds it now.
func (c *Cluster) peerFill(ctx context.Context, k FileKey) (*Fill, error) {
	f, err := c.lease(ctx, k)
	if err != nil {
		return nil, err
	}
	f.peers = true
	octx, cancel := c.op(ctx)
	holders, err := c.rdb.SMembers(octx, f.fk.Holders).Result()
	cancel()
	if c.note(err) != nil {
		f.release()
		return nil, fmt.Errorf("cluster: fill %s: %w", k.Path, err)
	}
	members := c.Members()
	for _, h := range holders {
		if _, ok := slices.BinarySearch(members, h); ok && h != c.pr.self {
			f.release()
			return nil, errStored
		}
	}
	f.startRenew()
	return f, nil
}

// readPeers writes pc's chunks, read from its holders, to w; when no
// holder serves one, the rest comes from the source (a keeper then holds
// the file: Holds). w's errors are returned, the peers' never.
func (c *Cluster) readPeers(ctx context.Context, pc *PeerCopy, w io.Writer, progress func(int64),
	source func(w io.Writer, progress func(int64)) (int64, error)) (int64, error) {
	n, err := c.readCopy(ctx, pc, w, progress)
	if err == nil {
		c.st.hits.Add(1)
		c.st.hitBytes.Add(n)
		return n, nil
	}
	var werr *writeError
	if errors.As(err, &werr) {
		return n, werr.err
	}
	c.log.Debug("no peer served the file; reading the source", zap.String("path", pc.k.Path), zap.Error(err))
	return c.finishFromSource(w, n, progress, source)
}
