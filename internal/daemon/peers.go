package daemon

// A cluster with data = "peers" (package cluster, peers.go): this node's
// peer server (package peer) serves its tier copies to the other nodes and
// copies, on their request, the files it owns; the placer keeps this
// node's share (placement.Sharer) and reads the rest from the peers; a
// pass copies the share at mount and again whenever the members change.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/epochfs/epochfs/internal/cluster"
	"github.com/epochfs/epochfs/internal/cluster/peer"
	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/status"
	"go.uber.org/zap"
)

// listenPeers listens on o.PeerListen before the cluster opens (the
// address names this node among the members): a port the mount cannot
// take fails it at once.
func (m *Mount) listenPeers() (net.Listener, error) {
	co := m.o.Cluster
	if co == nil || co.Data != cluster.DataPeers {
		return nil, nil
	}
	c := *co
	if m.o.PeerTLS.On() {
		srv, cli, err := m.o.PeerTLS.Configs()
		if err != nil {
			return nil, &configError{fmt.Errorf("daemon: cluster.%w", err)}
		}
		m.peerTLS, c.PeerTLS = srv, cli
	}
	l, err := net.Listen("tcp", m.o.PeerListen)
	if err != nil {
		return nil, &configError{fmt.Errorf("daemon: cluster.peer_listen: %w", err)}
	}
	if c.PeerAdvertise == "" {
		c.PeerAdvertise = l.Addr().String()
	}
	m.o.Cluster = &c
	return l, nil
}

// startPeerServer serves this node's copies on l. Until the placer
// exists every request is answered "not held".
func (m *Mount) startPeerServer(l net.Listener) error {
	if l == nil {
		return nil
	}
	signer, err := cluster.PeerSigner(*m.o.Cluster)
	if err != nil {
		l.Close()
		return &configError{fmt.Errorf("daemon: %w", err)}
	}
	m.peerSrv = peer.NewServer(peer.ServerOptions{Signer: signer, Store: peerStore{m}, Logger: m.log.Named("peer"), TLS: m.peerTLS})
	done := make(chan struct{})
	go func() {
		if err := m.peerSrv.Serve(l); err != nil {
			m.log.Error("peer server stopped", zap.Error(err))
		}
		close(done)
	}()
	m.log.Info("serving this node's copies to its peers", zap.String("listen", l.Addr().String()),
		zap.String("advertise", m.o.Cluster.PeerAdvertise))
	m.steps = append(m.steps, step{what: "the peer server", always: true, close: func() error {
		err := m.peerSrv.Close()
		<-done
		return err
	}})
	return nil
}

// peerStore is the placer as the peer server's store.
type peerStore struct{ m *Mount }

func (s peerStore) placer() *placement.Placer { return s.m.placer.Load() }

func (s peerStore) Open(k peer.Key) (peer.File, error) {
	p := s.placer()
	if p == nil {
		return nil, peer.ErrNotHeld
	}
	f, err := p.OpenCopy(placement.RemoteKey(k))
	if errors.Is(err, placement.ErrNotResident) || errors.Is(err, placement.ErrNoEntry) {
		return nil, fmt.Errorf("%w: %w", peer.ErrNotHeld, err)
	}
	return f, err
}

func (s peerStore) Fetch(ctx context.Context, k peer.Key) error {
	p := s.placer()
	if p == nil {
		return peer.ErrNotHeld
	}
	// The peer found no holder that answers; a dead one makes this node
	// the file's owner-to-be (Cluster.Keeps) once it is seen down here.
	s.m.cl.ProbeHolders(ctx, cluster.FileKey(k))
	err := p.FetchNow(placement.RemoteKey(k))
	switch {
	case errors.Is(err, placement.ErrNoRoom):
		return fmt.Errorf("%w: %w", peer.ErrNoRoom, err)
	case errors.Is(err, placement.ErrNoEntry):
		return fmt.Errorf("%w: %w", peer.ErrNotHeld, err)
	}
	return err
}

// peersRemote adapts a peers cluster to placement.Sharer.
type peersRemote struct{ c *cluster.Cluster }

func key(k placement.RemoteKey) cluster.FileKey { return cluster.FileKey(k) }

func (r peersRemote) Copy(ctx context.Context, k placement.RemoteKey, w io.Writer, progress func(int64), source placement.SourceCopy) (int64, error) {
	return r.c.Copy(ctx, key(k), w, progress, source)
}

func (r peersRemote) Stored(ctx context.Context, k placement.RemoteKey) (placement.RemoteFile, bool) {
	pc, ok := r.c.PeerStored(ctx, key(k))
	if !ok {
		return nil, false
	}
	return pc, true
}

func (r peersRemote) Keeps(k placement.RemoteKey) bool { return r.c.Keeps(key(k)) }
func (r peersRemote) Holds(k placement.RemoteKey)      { r.c.Holds(key(k)) }
func (r peersRemote) Dropped(k placement.RemoteKey)    { r.c.Dropped(key(k)) }
func (r peersRemote) Sharing() bool                    { return r.c.Sharing() }
func (r peersRemote) Rank(k placement.RemoteKey) int   { return r.c.Rank(key(k)) }

func (r peersRemote) HeldElsewhere(ctx context.Context, k placement.RemoteKey) bool {
	return r.c.HeldElsewhere(ctx, key(k))
}

// startSharePasses copies this node's share in the background: once now
// and again (the previous pass cancelled) whenever the members change.
// After a change the next pass waits until the members have stayed the
// same for the member TTL: nodes leave one after another at a job's end
// (each epilog unmounts its node), and the nodes still mounted would
// otherwise start copying each leaver's share from the PFS. Reads need no
// pass: a node copies a file of its new share when it is read.
func (m *Mount) startSharePasses() {
	if m.cl == nil || !m.cl.Peers() {
		return
	}
	kick := make(chan struct{}, 1)
	m.cl.OnMembersChange(func([]string) {
		select {
		case kick <- struct{}{}:
		default:
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		shared := false // a pass ran with the members settled
		for {
			shared = shared || m.cl.Sharing()
			pctx, stop := context.WithCancel(ctx)
			passDone := make(chan struct{})
			go func() {
				defer close(passDone)
				n, err := m.p.CopyShare(pctx)
				if err == nil {
					m.sharePasses.Add(1)
					m.log.Info("this node's share is queued for copying", zap.Int("files", n))
				}
			}()
			select {
			case <-ctx.Done():
				stop()
				<-passDone
				return
			case <-kick:
				stop()
				<-passDone
			}
			if shared && !quiet(ctx, kick, m.cl.MemberTTL()) {
				return
			}
		}
	}()
	m.steps = append(m.steps, step{what: "the share's copy pass", close: func() error {
		m.cl.OnMembersChange(nil)
		cancel()
		<-done
		return nil
	}})
}

// quiet waits until kick stays silent for d: false when ctx ends first.
func quiet(ctx context.Context, kick <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-kick:
			t.Reset(d)
		case <-t.C:
			return true
		}
	}
}

// peerHeld reports whether another node keeps sample i, a file this node
// has no tier copy of (the jobs' PeerHeld).
func (m *Mount) peerHeld(i int) bool {
	e := m.cat.ByIndex(i)
	if e == nil || e.Tier() >= 0 {
		return false
	}
	a := e.Attr()
	return m.cl.KeptElsewhere(cluster.FileKey{Path: e.Path(), Size: a.Size, Mtime: a.Mtime})
}

// census is where the dataset's files are kept, as this node sees it:
// in its tiers, by a live peer (the file's owner or a replica is another
// member), or nowhere (this node keeps it and has no copy yet, or had no
// room for it). A count is kept for a second, or 20 times what it took
// (a catalog of millions of files: a few percent of a core at most).
type census struct {
	at, until                           time.Time
	here, peers, nowhere                int64
	hereBytes, peersBytes, nowhereBytes int64
}

func (m *Mount) takeCensus() census {
	m.censusMu.Lock()
	defer m.censusMu.Unlock()
	if time.Now().Before(m.census.until) {
		return m.census
	}
	var c census
	start := time.Now()
	for i := range m.cat.Indexed() {
		e := m.cat.ByIndex(i)
		if e == nil || e.Gone() {
			continue
		}
		a := e.Attr()
		switch {
		case e.Tier() >= 0:
			c.here++
			c.hereBytes += a.Size
		case m.cl.KeptElsewhere(cluster.FileKey{Path: e.Path(), Size: a.Size, Mtime: a.Mtime}):
			c.peers++
			c.peersBytes += a.Size
		default:
			c.nowhere++
			c.nowhereBytes += a.Size
		}
	}
	c.at = time.Now()
	c.until = c.at.Add(max(time.Second, 20*c.at.Sub(start)))
	m.census = c
	return c
}

// peerServerStatus adds the census and the peer server's counters to the
// cluster's section.
func (m *Mount) peerServerStatus(d *status.Doc) {
	if m.peerSrv == nil {
		return
	}
	if m.cat != nil {
		c := m.takeCensus()
		d.Int("files_here", c.here)
		d.Int("bytes_here", c.hereBytes)
		d.Int("files_peers", c.peers)
		d.Int("bytes_peers", c.peersBytes)
		d.Int("files_nowhere", c.nowhere)
		d.Int("bytes_nowhere", c.nowhereBytes)
	}
	d.Int("share_passes", m.sharePasses.Load())
	if p := m.placer.Load(); p != nil {
		due, dropped := p.ShareStats()
		d.Int("share_due_bytes", due)
		d.Int("beyond_share_dropped", dropped)
	}
	st := m.peerSrv.Stats()
	d.Int("peer_served", st.Served.Load())
	d.Int("peer_served_bytes", st.ServedBytes.Load())
	d.Int("peer_requests_refused", st.Refused.Load())
	d.Int("peer_busy", st.Busy.Load())
	d.Int("peer_fetches", st.Fetches.Load())
}
