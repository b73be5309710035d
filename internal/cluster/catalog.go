package cluster

// The shared catalog. The first node to mount a source walks it and
// publishes the catalog (an opaque document: placement owns its format)
// under a walk lease, so that the other nodes load it instead of walking
// the PFS too. A publication is chunks of a new generation, then one
// script that swaps the manifest to that generation and lets the old
// generation's chunks expire (a node loading the old one has catalogTTL to
// finish). A rescan walks and publishes again.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/epochfs/epochfs/internal/cluster/layout"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// oldCatalogTTL is how long the chunks of a replaced catalog stay.
const oldCatalogTTL = 10 * time.Minute

// publishScript swaps a catalog's manifest and expires the chunks of the
// one it replaces. KEYS: manifest, then the replaced generation's chunks
// (named by the manifest the caller read just before); ARGV: the new
// manifest, their time to live in ms.
var publishScript = redis.NewScript(`
redis.call('SET', KEYS[1], ARGV[1])
for i = 2, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
return 1`)

// LoadOrWalk returns the source's published catalog, or walks it under the
// walk lease and publishes the result. walked reports which: true when
// walk ran here. With rescan it walks whatever is published, and publishes
// what it found. A node that finds another node walking waits for its
// publication as long as that node keeps its lease; if the cluster fails
// at any point it walks on its own. Only walk's error is returned.
func (c *Cluster) LoadOrWalk(ctx context.Context, source string, rescan bool, walk func(context.Context) ([]byte, error)) (doc []byte, walked bool, err error) {
	ck := c.keys.Catalog(source)
	if !rescan {
		if doc, err := c.loadCatalog(ctx, ck, source); err == nil {
			c.st.catalogState.Store("loaded")
			c.log.Info("catalog loaded from the cluster", zap.Int("bytes", len(doc)))
			return doc, false, nil
		} else if !errors.Is(err, ErrMiss) {
			c.log.Warn("cannot load the catalog from the cluster; walking the source", zap.Error(err))
			return c.walkAlone(ctx, ck, source, walk)
		}
	}
	delay := 50 * time.Millisecond
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, fmt.Errorf("cluster: catalog: %w", err)
		}
		if !c.Usable() {
			return c.walkAlone(ctx, ck, source, walk)
		}
		lease, err := c.takeLease(ctx, ck.Lease)
		if err != nil {
			c.log.Warn("cannot take the walk lease; walking the source", zap.Error(err))
			return c.walkAlone(ctx, ck, source, walk)
		}
		if lease != nil {
			doc, err := walk(ctx)
			if err != nil {
				lease.release()
				return nil, false, err
			}
			if perr := c.publish(ctx, ck, source, doc); perr != nil {
				c.log.Warn("cannot publish the catalog; other nodes will walk", zap.Error(perr))
			}
			lease.release()
			c.st.catalogState.Store("walked")
			return doc, true, nil
		}
		// Another node walks: wait for its publication while its lease
		// lives, then look again.
		if rescan {
			return c.walkAlone(ctx, ck, source, walk)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		delay = min(2*delay, 500*time.Millisecond)
		if doc, err := c.loadCatalog(ctx, ck, source); err == nil {
			c.st.catalogState.Store("loaded")
			c.log.Info("catalog loaded from the cluster after another node's walk", zap.Int("bytes", len(doc)))
			return doc, false, nil
		}
	}
}

// walkAlone walks without the lease and publishes if it can.
func (c *Cluster) walkAlone(ctx context.Context, ck layout.Catalog, source string, walk func(context.Context) ([]byte, error)) ([]byte, bool, error) {
	doc, err := walk(ctx)
	if err != nil {
		return nil, false, err
	}
	if c.Usable() {
		if perr := c.publish(ctx, ck, source, doc); perr != nil {
			c.log.Warn("cannot publish the catalog", zap.Error(perr))
		}
	}
	c.st.catalogState.Store("walked")
	return doc, true, nil
}

// loadCatalog reads and checks the published catalog: ErrMiss if none.
func (c *Cluster) loadCatalog(ctx context.Context, ck layout.Catalog, source string) ([]byte, error) {
	if !c.Usable() {
		return nil, ErrDown
	}
	octx, cancel := c.op(ctx)
	raw, err := c.rdb.Get(octx, ck.Manifest).Bytes()
	cancel()
	if errors.Is(c.note(err), redis.Nil) {
		return nil, ErrMiss
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: catalog: %w", err)
	}
	m, err := decodeManifest(raw, c.seal)
	if err == nil && (m.kind != kindCatalog || m.path != source) {
		err = fmt.Errorf("%w: a manifest of %q, not the catalog of %q", errBadManifest, m.path, source)
	}
	if err != nil {
		c.st.corrupt.Add(1)
		c.log.Warn("the stored catalog is bad; walking the source", zap.Error(err))
		return nil, fmt.Errorf("cluster: catalog: %w: %w", ErrCorrupt, err)
	}
	doc := make([]byte, 0, m.size)
	for i := range m.sums {
		octx, cancel := c.op(ctx)
		data, err := c.rdb.Get(octx, ck.Chunk(m.gen, i)).Bytes()
		cancel()
		if errors.Is(c.note(err), redis.Nil) {
			// Replaced and expired while we read: look again.
			return nil, fmt.Errorf("cluster: catalog chunk %d: %w", i, ErrMiss)
		}
		if err != nil {
			return nil, fmt.Errorf("cluster: catalog chunk %d: %w", i, err)
		}
		if !m.verify(c.seal, i, data) {
			c.st.corrupt.Add(1)
			return nil, fmt.Errorf("cluster: catalog chunk %d: %w", i, ErrCorrupt)
		}
		doc = append(doc, data...)
	}
	return doc, nil
}

// publish stores doc as a new generation and swaps the manifest to it.
func (c *Cluster) publish(ctx context.Context, ck layout.Catalog, source string, doc []byte) error {
	var gb [8]byte
	rand.Read(gb[:])
	gen := hex.EncodeToString(gb[:])
	m := &manifest{kind: kindCatalog, size: int64(len(doc)), chunkSize: ChunkSize, gen: gen, path: source}
	for i := 0; i < len(doc); i += ChunkSize {
		part := doc[i:min(i+ChunkSize, len(doc))]
		octx, cancel := c.op(ctx)
		err := c.rdb.Set(octx, ck.Chunk(gen, len(m.sums)), part, 0).Err()
		cancel()
		if c.note(err) != nil {
			return fmt.Errorf("cluster: publish catalog: %w", err)
		}
		m.seal(c.seal, part)
	}
	keys := []string{ck.Manifest}
	octx, cancel := c.op(ctx)
	defer cancel()
	if raw, err := c.rdb.Get(octx, ck.Manifest).Bytes(); err == nil {
		if old, derr := decodeManifest(raw, c.seal); derr == nil {
			for i := range old.sums {
				keys = append(keys, ck.Chunk(old.gen, i))
			}
		}
	}
	if err := c.note(publishScript.Run(octx, c.rdb, keys, m.encode(c.seal), oldCatalogTTL.Milliseconds()).Err()); err != nil {
		return fmt.Errorf("cluster: publish catalog: %w", err)
	}
	c.log.Info("catalog published to the cluster", zap.Int("bytes", len(doc)), zap.Int("chunks", len(m.sums)))
	return nil
}

// lease is a held lease renewed in the background until released.
type lease struct {
	c     *Cluster
	key   string
	token string
	stop  context.CancelFunc
	done  chan struct{}
}

// takeLease takes key's lease: nil without error when another node holds it.
func (c *Cluster) takeLease(ctx context.Context, key string) (*lease, error) {
	var tb [12]byte
	rand.Read(tb[:])
	l := &lease{c: c, key: key, token: c.o.Node + "/" + hex.EncodeToString(tb[:]), done: make(chan struct{})}
	octx, cancel := c.op(ctx)
	ok, err := c.rdb.SetNX(octx, key, l.token, c.o.Lease).Result()
	cancel()
	if c.note(err) != nil {
		return nil, err
	}
	if !ok {
		return nil, nil
	}
	rctx, stop := context.WithCancel(c.ctx)
	l.stop = stop
	go func() {
		defer close(l.done)
		t := time.NewTicker(c.o.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
			octx, cancel := c.op(rctx)
			c.note(renewScript.Run(octx, c.rdb, []string{key}, l.token, c.o.Lease.Milliseconds()).Err())
			cancel()
		}
	}()
	return l, nil
}

func (l *lease) release() {
	l.stop()
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), l.c.o.Timeout)
	defer cancel()
	l.c.note(releaseScript.Run(ctx, l.c.rdb, []string{l.key}, l.token).Err())
}
