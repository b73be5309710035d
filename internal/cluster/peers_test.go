package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/cluster/peer"
	"github.com/epochfs/epochfs/test/rediscluster"
)

// peerNode is a node of a peers cluster: its cluster client, a peer server
// on a loopback port, and "tiers" in memory that its copies land in.
type peerNode struct {
	t      *testing.T
	c      *Cluster
	srv    *peer.Server
	addr   string
	pfs    map[FileKey]*source
	mu     sync.Mutex
	held   map[FileKey][]byte
	flying map[FileKey]bool // copies running (the placer runs one per file)
	liar   atomic.Bool      // serves every range with one byte flipped
	closed bool
}

func (n *peerNode) Open(k FileKey) (peer.File, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	b, ok := n.held[k]
	if !ok {
		return nil, peer.ErrNotHeld
	}
	if n.liar.Load() && len(b) > 0 {
		b = slices.Clone(b)
		b[len(b)/2] ^= 0x40
	}
	return nopCloser{bytes.NewReader(b)}, nil
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func (n *peerNode) Fetch(_ context.Context, k FileKey) error {
	if n.pfs[k] == nil {
		return peer.ErrNotHeld
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.held[k]; ok || n.flying[k] {
		return nil
	}
	n.flying[k] = true
	go func() {
		n.copy(k)
		n.mu.Lock()
		delete(n.flying, k)
		n.mu.Unlock()
	}()
	return nil
}

// copy is a whole-file copy into this node's tier, as the placer makes.
func (n *peerNode) copy(k FileKey) ([]byte, error) {
	var buf bytes.Buffer
	got, err := n.c.Copy(context.Background(), k, &buf, nil, n.pfs[k].copy)
	if err != nil {
		return nil, err
	}
	if got != k.Size || !bytes.Equal(buf.Bytes(), n.pfs[k].data) {
		return nil, fmt.Errorf("copy of %s: %d bytes, not the source's", k.Path, got)
	}
	n.mu.Lock()
	n.held[k] = buf.Bytes()
	n.mu.Unlock()
	n.c.Holds(k)
	return buf.Bytes(), nil
}

// stop kills the node: its server and its membership.
func (n *peerNode) stop() {
	if n.closed {
		return
	}
	n.closed = true
	n.srv.Close()
	n.c.Close()
}

func startPeers(t *testing.T, rc *rediscluster.Cluster, dataset string, count int, pfs map[FileKey]*source, edit ...func(*Options)) []*peerNode {
	t.Helper()
	var nodes []*peerNode
	for range count {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		n := &peerNode{t: t, addr: l.Addr().String(), pfs: pfs, held: map[FileKey][]byte{}, flying: map[FileKey]bool{}}
		n.c = node(t, rc, dataset, 0, append([]func(*Options){func(o *Options) {
			o.Data, o.PeerAdvertise = DataPeers, n.addr
		}}, edit...)...)
		signer, err := PeerSigner(n.c.o)
		if err != nil {
			t.Fatal(err)
		}
		n.srv = peer.NewServer(peer.ServerOptions{Signer: signer, Store: n})
		done := make(chan struct{})
		go func() { n.srv.Serve(l); close(done) }()
		t.Cleanup(func() { n.stop(); <-done })
		nodes = append(nodes, n)
	}
	// Every node sees every member.
	deadline := time.Now().Add(5 * time.Second)
	for _, n := range nodes {
		for len(n.c.Members()) != count || !n.c.pr.settled.Load() {
			if time.Now().After(deadline) {
				t.Fatalf("node %s sees members %v, want %d", n.addr, n.c.Members(), count)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nodes
}

func newPFS(t *testing.T, files int, size func(i int) int) (map[FileKey]*source, []FileKey) {
	pfs := map[FileKey]*source{}
	var keys []FileKey
	for i := range files {
		s := newSource(t, size(i))
		k := key(fmt.Sprintf("train/c%d/f%04d.jpg", i%7, i), s)
		pfs[k] = s
		keys = append(keys, k)
	}
	return pfs, keys
}

func owner(nodes []*peerNode, k FileKey) *peerNode {
	o := nodes[0].c.Owners(k)[0]
	for _, n := range nodes {
		if n.addr == o {
			return n
		}
	}
	return nil
}

func peerStat(n *peerNode, key string) string { return stat(n.c, key) }

func TestPeersSplitTheDatasetAndReadEachOthersCopies(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	pfs, keys := newPFS(t, 60, func(i int) int { return []int{0, 1, 1000, ChunkSize, 2*ChunkSize + 7}[i%5] })
	nodes := startPeers(t, rc, "peers1", 3, pfs)
	// Every file has one keeper, and the shares are about a third each.
	share := map[string]int{}
	for _, k := range keys {
		keepers := 0
		for _, n := range nodes {
			if n.c.Keeps(k) {
				keepers++
				share[n.addr]++
			}
		}
		if keepers != 1 {
			t.Fatalf("%s is kept by %d nodes, want 1", k.Path, keepers)
		}
	}
	for a, s := range share {
		if s < 8 {
			t.Errorf("node %s keeps %d of 60 files", a, s)
		}
	}
	// Each node copies its share: from the source, once.
	for _, k := range keys {
		if _, err := owner(nodes, k).copy(k); err != nil {
			t.Fatal(err)
		}
	}
	// Every node reads every file it does not keep from its keeper, byte
	// for byte; the source is never read again.
	for _, n := range nodes {
		for _, k := range keys {
			if n.c.Keeps(k) {
				continue
			}
			pc, ok := n.c.PeerStored(context.Background(), k)
			if !ok {
				t.Fatalf("node %s: %s not stored by a peer", n.addr, k.Path)
			}
			buf := make([]byte, k.Size+10)
			got, err := pc.ReadAt(context.Background(), buf, 0)
			if err != nil || !bytes.Equal(buf[:got], pfs[k].data) {
				t.Fatalf("node %s: %s read %d bytes, %v; want the source's %d", n.addr, k.Path, got, err, k.Size)
			}
			// A range across a chunk boundary.
			if k.Size > ChunkSize {
				part := make([]byte, 100)
				if m, err := pc.ReadAt(context.Background(), part, ChunkSize-50); err != nil || m != 100 || !bytes.Equal(part, pfs[k].data[ChunkSize-50:ChunkSize+50]) {
					t.Fatalf("range across chunks: %d, %v", m, err)
				}
			}
		}
	}
	for _, k := range keys {
		if r := pfs[k].reads.Load(); r != 1 {
			t.Fatalf("%s read %d times from the source, want 1", k.Path, r)
		}
	}
	if got := peerStat(nodes[0], "peer_refused"); got != "0" {
		t.Fatalf("peer_refused %s", got)
	}
	if got := peerStat(nodes[0], "peer_reads"); got == "0" {
		t.Fatal("peer_reads 0 after reads from peers")
	}
	if got := peerStat(nodes[1], "members"); got != "3" {
		t.Fatalf("members %s, want 3", got)
	}
}

func TestAPeerThatServesWrongBytesIsRefused(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	pfs, keys := newPFS(t, 12, func(i int) int { return 3000 + i })
	nodes := startPeers(t, rc, "peers2", 3, pfs, func(o *Options) { o.Replicas = 1 })
	for _, k := range keys {
		for _, n := range nodes {
			if n.c.Keeps(k) {
				if _, err := n.copy(k); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// The owner of keys[0] lies: the replica serves it; with both lying
	// the read finds no holder and goes to the source.
	k := keys[0]
	owners := nodes[0].c.Owners(k)
	var reader *peerNode
	var liars []*peerNode
	for _, n := range nodes {
		if slices.Contains(owners, n.addr) {
			liars = append(liars, n)
		} else {
			reader = n
		}
	}
	if reader == nil || len(liars) != 2 {
		t.Fatalf("owners %v", owners)
	}
	liars[0].liar.Store(true)
	if owners[0] != liars[0].addr {
		liars[0], liars[1] = liars[1], liars[0]
		liars[0].liar.Store(true)
		liars[1].liar.Store(false)
	}
	pc, ok := reader.c.PeerStored(context.Background(), k)
	if !ok {
		t.Fatal("not stored")
	}
	buf := make([]byte, k.Size)
	if m, err := pc.ReadAt(context.Background(), buf, 0); err != nil || !bytes.Equal(buf[:m], pfs[k].data) {
		t.Fatalf("read with the owner lying: %d, %v; want the replica's right bytes", m, err)
	}
	if got := peerStat(reader, "peer_refused"); got != "1" {
		t.Fatalf("peer_refused %s, want 1", got)
	}
	liars[1].liar.Store(true)
	pc, _ = reader.c.PeerStored(context.Background(), k)
	if _, err := pc.ReadAt(context.Background(), buf, 0); !errors.Is(err, ErrMiss) {
		t.Fatalf("read with every holder lying: %v, want ErrMiss (the source is read)", err)
	}
}

func TestARequestWithoutTheKeyIsRefused(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	pfs, keys := newPFS(t, 1, func(int) int { return 5000 })
	nodes := startPeers(t, rc, "peers3", 1, pfs)
	k := keys[0]
	if _, err := nodes[0].copy(k); err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"an attacker's key, 32 bytes long!!", ""} {
		c := peer.NewClient(peer.ClientOptions{Signer: peer.NewSigner([]byte(other)), Node: "x"})
		_, err := c.Range(context.Background(), nodes[0].addr, k, 0, 10)
		c.Close()
		if !errors.Is(err, peer.ErrRefused) {
			t.Fatalf("a request signed with %q: %v, want ErrRefused", other, err)
		}
	}
	if got := nodes[0].srv.Stats().Refused.Load(); got != 2 {
		t.Fatalf("server refused %d, want 2", got)
	}
}

func TestAFileNoPeerHoldsIsFetchedByItsOwnerOnce(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	pfs, keys := newPFS(t, 30, func(i int) int { return 2000 + 17*i })
	for _, s := range pfs {
		s.delay = 20 * time.Millisecond
	}
	// Generous bounds: the test asserts one fetch per file, and a cluster
	// operation that times out on a loaded machine sends a read to the
	// source (as it should).
	nodes := startPeers(t, rc, "peers4", 3, pfs, func(o *Options) { o.Timeout, o.MaxWait = time.Second, 30*time.Second })
	var wg sync.WaitGroup
	for _, k := range keys {
		for _, n := range nodes {
			if n.c.Keeps(k) {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				pc, ok := n.c.PeerStored(context.Background(), k)
				if !ok {
					t.Errorf("node %s: %s: no peer copy after asking the owner", n.addr, k.Path)
					return
				}
				buf := make([]byte, k.Size)
				if m, err := pc.ReadAt(context.Background(), buf, 0); err != nil || !bytes.Equal(buf[:m], pfs[k].data) {
					t.Errorf("node %s: %s: %d bytes, %v", n.addr, k.Path, m, err)
				}
			}()
		}
	}
	wg.Wait()
	for _, k := range keys {
		if r := pfs[k].reads.Load(); r != 1 {
			t.Errorf("%s read %d times from the source, want 1 (by its owner)", k.Path, r)
		}
		o := owner(nodes, k)
		o.mu.Lock()
		_, held := o.held[k]
		o.mu.Unlock()
		if !held {
			t.Errorf("%s: its owner %s does not hold it", k.Path, o.addr)
		}
	}
}

func TestANodeThatDiesLosesNothingForTheOthers(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	pfs, keys := newPFS(t, 40, func(i int) int { return 1000 + i })
	nodes := startPeers(t, rc, "peers5", 3, pfs)
	for _, k := range keys {
		if _, err := owner(nodes, k).copy(k); err != nil {
			t.Fatal(err)
		}
	}
	dead := nodes[2]
	var lost []FileKey
	for _, k := range keys {
		if dead.c.Keeps(k) {
			lost = append(lost, k)
		}
	}
	if len(lost) == 0 {
		t.Fatal("the dead node kept nothing")
	}
	// Killed without a goodbye: the server stops answering at once, and its
	// membership expires.
	dead.srv.Close()
	live := nodes[:2]
	moved := make(chan []string, 4)
	live[0].c.OnMembersChange(func(m []string) { moved <- m })
	// Reads right away (the dead node still a member): never wrong, from a
	// peer or (for the lost share) refused so the source is read.
	for _, k := range keys {
		pc, ok := live[0].c.PeerStored(context.Background(), k)
		if !ok {
			continue // read from the source
		}
		buf := make([]byte, k.Size)
		if m, err := pc.ReadAt(context.Background(), buf, 0); err == nil && !bytes.Equal(buf[:m], pfs[k].data) {
			t.Fatalf("%s: wrong bytes", k.Path)
		}
	}
	// Still a member, but it does not answer: the node that will own a
	// file of its share once it is gone keeps the file already, and no
	// other node does.
	live[0].c.pr.fail(dead.addr, errors.New("connection refused"))
	// live[1] finds it down by asking the holders of a file (a peer asks
	// it to fetch one).
	live[1].c.ProbeHolders(context.Background(), lost[0])
	if !live[1].c.pr.isDown(dead.addr) {
		t.Fatal("ProbeHolders did not find the dead holder down")
	}
	after := []string{live[0].addr, live[1].addr}
	slices.Sort(after)
	for _, k := range lost {
		for _, n := range live {
			want := peer.Owners(nil, n.c.keys.File(k).ID, after, 1)[0] == n.addr
			if got := n.c.Keeps(k); got != want {
				t.Errorf("%s on %s with its owner down: Keeps %v, want %v", k.Path, n.addr, got, want)
			}
		}
	}
	dead.stop() // its prober stops and it leaves
	select {
	case m := <-moved:
		if len(m) != 2 || slices.Contains(m, dead.addr) {
			t.Fatalf("members after the death: %v", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the members did not change")
	}
	for len(live[1].c.Members()) != 2 {
		time.Sleep(20 * time.Millisecond)
	}
	// The lost share has new owners among the living; a read of it makes
	// its new owner fetch it from the source, once.
	for _, k := range lost {
		if o := owner(live, k); o == nil || !o.c.Keeps(k) {
			t.Fatalf("%s has no live owner", k.Path)
		}
		for _, n := range live {
			if n.c.Keeps(k) {
				continue
			}
			pc, ok := n.c.PeerStored(context.Background(), k)
			if !ok {
				t.Fatalf("%s: not fetched by its new owner", k.Path)
			}
			buf := make([]byte, k.Size)
			if m, err := pc.ReadAt(context.Background(), buf, 0); err != nil || !bytes.Equal(buf[:m], pfs[k].data) {
				t.Fatalf("%s: %d, %v", k.Path, m, err)
			}
		}
		if r := pfs[k].reads.Load(); r != 2 {
			t.Fatalf("%s: %d source reads, want 2 (the dead owner's, the new owner's)", k.Path, r)
		}
	}
}
