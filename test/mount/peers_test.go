package mount

// Nodes of a cluster with data = "peers": a dataset larger than one
// node's tier, each node keeping its share and reading the rest from the
// others over the peer port (loopback), the PFS read once per file.

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/epochfs/epochfs/internal/cluster"
	"github.com/epochfs/epochfs/test/rediscluster"
)

// peersNode is a node of rc with data = "peers" on a free loopback port
// and one tier of quota bytes.
func peersNode(t *testing.T, rc *rediscluster.Cluster, src string, quota int64, edit ...func(*cluster.Options)) *env {
	t.Helper()
	e := clusterEnv(t, rc, src, clusterKey, quota)
	e.opts.cluster.Data, e.opts.cluster.Quota = cluster.DataPeers, 0
	e.opts.cluster.DatasetID = "peers"
	for _, f := range edit {
		f(e.opts.cluster)
	}
	e.opts.peerListen = "127.0.0.1:0"
	e.mount()
	return e
}

func TestPeersNodesHoldTheirSharesAndServeEveryFileIdentically(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	src, paths, total := clusterTree(t, 1<<20)
	// No node can hold the dataset: each tier takes 65 % of it (a third of
	// it is a node's share, give or take the luck of the hashing).
	quota := total * 65 / 100
	var nodes []*env
	for range 3 {
		nodes = append(nodes, peersNode(t, rc, src, quota))
	}
	for _, n := range nodes {
		waitFor(t, func() bool {
			st := n.status()
			return st["cluster.members"] == "3" && st["cluster.members_settled"] == "yes"
		})
	}
	// Each node copies its share in the background.
	for _, n := range nodes {
		n.settle()
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			readAllShuffled(t, src, n.mnt, paths)
		}()
	}
	wg.Wait()
	var srcBytes, resident, peerReads int64
	for i, n := range nodes {
		n.settle()
		st := n.status()
		if st["cluster.data"] != "peers" {
			t.Errorf("node %d: cluster.data=%q", i, st["cluster.data"])
		}
		if st["files_resident"] == st["files_total"] {
			t.Errorf("node %d holds every file (%s): its tier should hold its share only", i, st["files_resident"])
		}
		if st["placements_skipped_nospace"] != "0" {
			t.Errorf("node %d: %s files found no room: its share does not fit", i, st["placements_skipped_nospace"])
		}
		srcBytes += n.num("source_bytes")
		resident += n.num("files_resident")
		peerReads += n.num("cluster.peer_reads")
		if n.num("cluster.peer_refused") != 0 || n.num("cluster.peer_errors") != 0 {
			t.Errorf("node %d: peer_refused=%s peer_errors=%s", i, st["cluster.peer_refused"], st["cluster.peer_errors"])
		}
		t.Logf("node %d: resident %s of %s, peer_reads %s, peer_served %s, source_bytes %s", i, st["files_resident"],
			st["files_total"], st["cluster.peer_reads"], st["cluster.peer_served"], st["source_bytes"])
	}
	t.Logf("3 nodes: source bytes %d for a dataset of %d", srcBytes, total)
	if srcBytes != total {
		t.Errorf("the nodes read %d bytes from the source; want each file once: %d", srcBytes, total)
	}
	if resident < int64(len(paths)) {
		t.Errorf("%d copies over the nodes for %d files: some file is held nowhere", resident, len(paths))
	}
	if peerReads == 0 {
		t.Error("no read was served by a peer")
	}
	// The same bytes again, through every node.
	for _, n := range nodes {
		checkAll(t, src, n.mnt, paths)
	}
}

func TestPeersACorruptCopyOnItsHolderIsNeverServedElsewhere(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	src, paths, total := clusterTree(t, 1<<20)
	quota := total * 75 / 100
	a := peersNode(t, rc, src, quota)
	b := peersNode(t, rc, src, quota)
	for _, n := range []*env{a, b} {
		waitFor(t, func() bool {
			st := n.status()
			return st["cluster.members"] == "2" && st["cluster.members_settled"] == "yes"
		})
		n.settle()
	}
	// Damage every copy a holds on its disk: b reads none of those bytes.
	tierDir := a.tiers[0].dir
	damaged := 0
	filepath.Walk(tierDir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 || strings.Contains(p, "/.") {
			return nil
		}
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return nil
		}
		defer f.Close()
		var one [1]byte
		f.ReadAt(one[:], fi.Size()/2)
		one[0] ^= 0xff
		if _, err := f.WriteAt(one[:], fi.Size()/2); err == nil {
			damaged++
		}
		return nil
	})
	if damaged == 0 {
		t.Fatal("a holds no copy to damage")
	}
	checkAll(t, src, b.mnt, paths)
	if n := b.num("cluster.peer_refused"); n == 0 {
		t.Errorf("peer_refused = 0 on b after reading %d damaged copies of a", damaged)
	}
	t.Logf("damaged %d copies on a; b: peer_refused %d, source_bytes %d", damaged, b.num("cluster.peer_refused"), b.num("source_bytes"))
}
