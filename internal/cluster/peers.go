package cluster

// Data = "peers": the bytes of a file stay on the tiers of the nodes that
// hold it, and the others read them from there (package peer). What
// Redis keeps per file is its manifest (the chunks' MACs, computed by the
// node that read it from the source) and the set of its holders; per
// dataset, the live members.
//
//	members   a sorted set {p}:live, node → expiry; every node re-adds
//	          itself at each probe and drops the expired, in one script
//	          on the Redis clock, so nodes never compare their own clocks
//	owners    rendezvous hashing of the file id over the members
//	          (peer.Owners): the first keeps the file, Replicas more keep
//	          copies; a member's arrival or loss moves only its share
//	fill      the first node that copies a file no live node holds takes
//	          its fill lease, reads the source, seals the chunks' MACs as
//	          the bytes pass, and commits the manifest and itself as a
//	          holder in one script: the PFS serves the file once
//	read      a node that does not keep a file reads its chunks from a
//	          live holder, each checked against the manifest before it is
//	          used; a holder that fails or lies is skipped for the next;
//	          with no live holder the node asks the file's owner to fetch
//	          it and waits (at most MaxWait) for a holder to appear
//
// Whatever fails (Redis, every holder, the owner) the read goes to the
// source: peers accelerate reads, never fail one.

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/epochfs/epochfs/internal/cluster/peer"
	"github.com/epochfs/epochfs/internal/status"
	"github.com/puzpuzpuz/xsync/v3"
)

// Where file data lives (Options.Data).
const (
	DataRedis = "redis" // chunks in Redis Cluster (the cluster tier)
	DataPeers = "peers" // on the nodes' tiers, read from each other
)

// peerDown is how long a peer that failed is skipped.
const peerDown = 2 * time.Second

// peers is the state of data = "peers".
type peers struct {
	self    string
	client  *peer.Client
	members atomic.Pointer[[]string] // live members, sorted, self included
	// settled: the members have not changed for memberTTL since this
	// node joined (settleAt); until then it keeps nothing (see Keeps).
	settled  atomic.Bool
	settleAt time.Time // heartbeat's own
	onMove   atomic.Pointer[func(members []string)]
	updates  chan holderUpdate
	health   *xsync.MapOf[string, *peerHealth]
	st       struct {
		reads, bytes, errors, refused, notHeld atomic.Int64
		asks, askTimeouts, localHolds          atomic.Int64
	}
}

// holderUpdate adds node to, or removes it from, the holders of k.
type holderUpdate struct {
	k    FileKey
	node string
	add  bool
}

// peerHealth is one peer's record.
type peerHealth struct {
	ok, errs  atomic.Int64
	downUntil atomic.Int64 // unix nanos
	mu        sync.Mutex
	last      string
}

// openPeers checks the peers options and starts the membership.
func (c *Cluster) openPeers(o Options, key []byte) error {
	if o.Data == DataRedis || o.Data == "" {
		if o.PeerAdvertise != "" || o.Replicas != 0 {
			return errors.New(`cluster: peer_listen, peer_advertise and replicas need data = "peers"`)
		}
		return nil
	}
	if o.Data != DataPeers {
		return fmt.Errorf(`cluster: data %q: want "redis" or "peers"`, o.Data)
	}
	host, port, err := net.SplitHostPort(o.PeerAdvertise)
	if err != nil || host == "" || port == "" || port == "0" || host == "0.0.0.0" || host == "::" {
		return fmt.Errorf("cluster: peer address %q: want the host:port the other nodes reach this node at", o.PeerAdvertise)
	}
	if o.Replicas < 0 || o.Replicas > 8 {
		return fmt.Errorf("cluster: replicas %d: want 0 to 8", o.Replicas)
	}
	c.pr = &peers{
		self: o.PeerAdvertise,
		client: peer.NewClient(peer.ClientOptions{Signer: peer.NewSigner(key), Node: o.PeerAdvertise,
			TLS: o.PeerTLS, DialTimeout: o.Timeout}),
		updates: make(chan holderUpdate, 4096),
		health:  xsync.NewMapOf[string, *peerHealth](),
	}
	self := []string{c.pr.self}
	c.pr.members.Store(&self)
	c.pr.settleAt = time.Now().Add(c.memberTTL())
	return nil
}

// PeerSigner is the signer of peer requests: the server of this node's
// copies checks requests with it.
func PeerSigner(o Options) (peer.Signer, error) {
	key := insecureKey
	if o.KeyFile != "" {
		var err error
		if key, err = readKey(o.KeyFile); err != nil {
			return peer.Signer{}, err
		}
	}
	return peer.NewSigner(key), nil
}

// Peers reports whether file data is kept on the nodes (data = "peers").
func (c *Cluster) Peers() bool { return c.pr != nil }

// peersStatus fills the peers' keys of the cluster's status section.
func (c *Cluster) peersStatus(d *status.Doc) {
	pr := c.pr
	d.Text("data", DataPeers)
	d.Text("peer_address", pr.self)
	members := c.Members()
	d.Int("members", int64(len(members)))
	d.Flag("members_settled", pr.settled.Load(), status.YesNo)
	d.Text("member_list", strings.Join(members, ","))
	d.Int("replicas", int64(c.o.Replicas))
	d.Int("peer_reads", pr.st.reads.Load())
	d.Int("peer_bytes", pr.st.bytes.Load())
	d.Int("peer_errors", pr.st.errors.Load())
	d.Int("peer_refused", pr.st.refused.Load())
	d.Int("peer_not_held", pr.st.notHeld.Load())
	d.Int("peer_asks", pr.st.asks.Load())
	d.Int("peer_ask_timeouts", pr.st.askTimeouts.Load())
	d.Int("held_here", pr.st.localHolds.Load())
	var health []string
	down := 0
	for _, m := range members {
		if m == pr.self {
			continue
		}
		state := "ok"
		if e, ok := pr.health.Load(m); ok {
			if pr.isDown(m) {
				down++
				e.mu.Lock()
				state = "down (" + e.last + ")"
				e.mu.Unlock()
			}
		}
		health = append(health, m+" "+state)
	}
	d.Int("peers_down", int64(down))
	d.Text("peer_health", strings.Join(health, "; "))
}
