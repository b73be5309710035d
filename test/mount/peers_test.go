package mount

// Nodes of a cluster with data = "peers": a dataset larger than one
// node's tier, each node keeping its share and reading the rest from the
// others over the peer port (loopback), the PFS read once per file.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/epochfs/epochfs/internal/cluster"
	"github.com/epochfs/epochfs/test/rediscluster"
)

// peersNode is a node of rc with data = "peers" on a free loopback port
// and one tier of quota bytes.
func peersNode(t *testing.T, rc *rediscluster.Cluster, src string, quota int64, edit ...func(*cluster.Options)) *env {
	t.Helper()
	e := peersEnv(t, rc, src, quota, edit...)
	e.mount()
	return e
}

// peersEnv is peersNode before its mount.
func peersEnv(t *testing.T, rc *rediscluster.Cluster, src string, quota int64, edit ...func(*cluster.Options)) *env {
	t.Helper()
	e := clusterEnv(t, rc, src, clusterKey, quota)
	e.opts.cluster.Data, e.opts.cluster.Quota = cluster.DataPeers, 0
	e.opts.cluster.DatasetID = "peers"
	for _, f := range edit {
		f(e.opts.cluster)
	}
	e.opts.peerListen = "127.0.0.1:0"
	return e
}

// sharesCopied waits until every node sees them all as members, settled,
// and has copied its share.
func sharesCopied(t *testing.T, nodes ...*env) {
	t.Helper()
	for _, e := range nodes {
		waitFor(t, func() bool {
			st := e.status()
			return st["cluster.members"] == strconv.Itoa(len(nodes)) && st["cluster.members_settled"] == "yes"
		})
	}
	for _, e := range nodes {
		waitFor(t, func() bool { return e.num("files_resident") > 0 })
		e.settle()
	}
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
		// The census is counted at most once a second: it comes to every
		// file kept here or by a peer.
		waitFor(t, func() bool {
			return n.num("cluster.files_here") == n.num("files_resident") && n.num("cluster.files_nowhere") == 0 &&
				n.num("cluster.files_here")+n.num("cluster.files_peers") == int64(len(paths))
		})
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

// freePort is a loopback address nobody listens at now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestPeersANodeKilledAndWipedMidEpochCostsTheOthersNoRead: a node's
// daemon is SIGKILLed and its tier wiped while two others read the whole
// dataset: their reads never fail nor differ, and its share comes back to
// them (held by the survivors once its membership expires), read from the
// PFS once.
func TestPeersANodeKilledAndWipedMidEpochCostsTheOthersNoRead(t *testing.T) {
	killAndWipeMidEpoch(t, 0)
}

// TestPeersWithAReplicaANodeKilledCostsThePFSNothing: the same with
// replicas = 1: every file of the dead node's share has a copy on a
// survivor, so the survivors read nothing more from the PFS.
func TestPeersWithAReplicaANodeKilledCostsThePFSNothing(t *testing.T) {
	killAndWipeMidEpoch(t, 1)
}

func killAndWipeMidEpoch(t *testing.T, replicas int) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	src, paths, total := clusterTree(t, 1<<20)
	// Each node keeps (1+replicas)/3 of the dataset, give or take the
	// luck of the hashing over 50 files.
	quota := total * int64(75+15*replicas) / 100
	// The victim: the binary, its own process, on a port of its own.
	base := t.TempDir()
	mnt, tierDir := filepath.Join(base, "mnt"), filepath.Join(base, "tier")
	os.Mkdir(mnt, 0o755)
	var q []string
	for _, a := range rc.Addrs() {
		q = append(q, strconv.Quote(a))
	}
	cfg := filepath.Join(base, "peers.toml")
	text := fmt.Sprintf("[cluster]\nredis = [%s]\ninsecure = true\nkey_file = %q\ndataset = \"peers\"\nlease = \"1s\"\ntimeout = \"300ms\"\ndata = \"peers\"\npeer_listen = %q\nreplicas = %d\n",
		strings.Join(q, ", "), secretFile(t, clusterKey), freePort(t), replicas)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	binMount(t, src, mnt, filepath.Join(base, "state"), "--config", cfg, fmt.Sprintf("--tier=disk=%s:%d", tierDir, quota))
	withReplicas := func(o *cluster.Options) { o.Replicas = replicas }
	a := peersNode(t, rc, src, quota, withReplicas)
	b := peersNode(t, rc, src, quota, withReplicas)
	for _, n := range []*env{a, b} {
		waitFor(t, func() bool {
			st := n.status()
			return st["cluster.members"] == "3" && st["cluster.members_settled"] == "yes"
		})
	}
	waitFor(t, func() bool { return statusOf(t, mnt)["cluster.members_settled"] == "yes" })
	// Each node copies its share; the victim's is on its disk.
	waitFor(t, func() bool {
		st := statusOf(t, mnt)
		return st["placements_queued"] == "0" && st["files_resident"] != "0"
	})
	a.settle()
	b.settle()
	// Every file is kept by 1+replicas nodes before the kill: a copy still
	// in flight from the victim would be finished from the source. A
	// node's queue can be empty before its pass for the third member has
	// queued anything, so the copies are counted, not the queues.
	waitFor(t, func() bool {
		victim := statusOf(t, mnt)
		here, _ := strconv.ParseInt(victim["cluster.files_here"], 10, 64)
		due, _ := strconv.ParseInt(victim["cluster.share_due_bytes"], 10, 64)
		for _, n := range []*env{a, b} {
			here += n.num("cluster.files_here")
			due += n.num("cluster.share_due_bytes")
		}
		return due == 0 && here >= int64((1+replicas)*len(paths))
	})
	a.settle()
	b.settle()
	pid, _ := strconv.Atoi(statusOf(t, mnt)["pid"])
	if pid <= 0 {
		t.Fatal("no pid in the victim's status")
	}
	passes := []int64{a.num("cluster.share_passes"), b.num("cluster.share_passes")}
	filled := a.num("source_bytes") + b.num("source_bytes")
	// Readers on a and b go through the dataset twice; the victim dies
	// and loses its disk early in the first pass.
	var wg sync.WaitGroup
	started := make(chan struct{}, 2)
	for _, n := range []*env{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			readAllShuffled(t, src, n.mnt, paths)
			readAllShuffled(t, src, n.mnt, paths)
		}()
	}
	<-started
	<-started
	syscall.Kill(pid, syscall.SIGKILL)
	os.RemoveAll(tierDir)
	wg.Wait()
	waitFor(t, func() bool { return !processAlive(pid) })
	if code, out := cli(t, "unmount", "--lazy", mnt); code != 0 {
		t.Fatalf("unmount --lazy of the dead node: exit %d: %s", code, out)
	}
	// Its membership expires; the survivors take its share: a pass after
	// the change queues it, and the copies end.
	for i, n := range []*env{a, b} {
		waitFor(t, func() bool {
			return n.status()["cluster.members"] == "2" && n.num("cluster.share_passes") > passes[i]
		})
		n.settle()
	}
	held := a.num("files_resident") + b.num("files_resident")
	before := a.num("source_bytes") + b.num("source_bytes")
	// Every file is held by a survivor now: a pass over both reads none
	// from the source.
	checkAll(t, src, a.mnt, paths)
	checkAll(t, src, b.mnt, paths)
	after := a.num("source_bytes") + b.num("source_bytes")
	t.Logf("replicas=%d: survivors: %d files held of %d; source bytes %d for a dataset of %d (%d after the kill); a pass after: %d more",
		replicas, held, len(paths), before, total, before-filled, after-before)
	if held < int64(len(paths)) {
		t.Errorf("the survivors hold %d copies of %d files: part of the dead node's share is held nowhere", held, len(paths))
	}
	if after != before {
		t.Errorf("a pass after the share moved read %d bytes from the source, want 0", after-before)
	}
	// The lost share is fetched from the source once, by the nodes that
	// will own it (Cluster.Keeps), not by every read until the victim's
	// membership expires: at most the file or two each survivor was
	// reading from the victim when it died come from the source twice.
	if replicas > 0 && before != filled {
		// Every file of the dead node's share has a replica on a survivor.
		t.Errorf("with replicas = %d the survivors read %d bytes from the source after the kill, want 0", replicas, before-filled)
	}
	// One file in flight per survivor: the rest of a file it was reading
	// from the victim comes from the source, and the file's new owner
	// fetches it whole. The dataset holds two files of 1 MiB (a seventh
	// of it each), so the bound is the dataset and its two largest files,
	// not a ratio.
	if limit := total + largest(t, src, paths, 2); before > limit {
		t.Errorf("the survivors read %d bytes from the source for a dataset of %d (want at most %d: the dataset and one file in flight per survivor)", before, total, limit)
	}
}

// TestPeersClusterJobReadsItsOwnNodesSamplesFirst: an ODS cluster job with
// one rank per node over a dataset split between three nodes: every epoch
// exactly once, each rank reading its samples through its node's mount,
// and jobs/NAME/status (read with bash) counting each epoch's samples by
// where they were kept.
func TestPeersClusterJobReadsItsOwnNodesSamplesFirst(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	const n, w, epochs = 240, 3, 3
	src, paths := makeSamples(t, n, 3000)
	total := int64(n * 3000)
	var nodes []*env
	for range w {
		nodes = append(nodes, peersNode(t, rc, src, total*65/100))
	}
	sharesCopied(t, nodes...)
	dirs := make([]string, w)
	for i, e := range nodes {
		dirs[i] = filepath.Join(e.mnt, ".epochfs", "jobs", "peers")
		if err := os.Mkdir(dirs[i], 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dirs[i], "config"), []byte("batch_size=8\nworld_size=3\ncluster=true\nsampler=ods\n"), 0); err != nil {
			t.Fatal(err)
		}
	}
	for ep := 1; ep <= epochs; ep++ {
		shares := make([][]string, w)
		var wg sync.WaitGroup
		for r := range w {
			wg.Add(1)
			go func() {
				defer wg.Done()
				shares[r] = rankEpochOf(t, dirs[r], r)
				checkAll(t, src, nodes[r].mnt, shares[r])
			}()
		}
		wg.Wait()
		seen := map[string]int{}
		for _, sh := range shares {
			for _, p := range sh {
				seen[p]++
			}
		}
		if len(seen) != len(paths) {
			t.Fatalf("epoch %d: %d distinct samples of %d", ep, len(seen), len(paths))
		}
	}
	var local, all int64
	for r := range nodes {
		out, err := exec.Command("bash", "-c", `cat "$1"/status`, "bash", dirs[r]).Output()
		if err != nil {
			t.Fatal(err)
		}
		st := kv(out)
		for ep := 1; ep <= epochs; ep++ {
			p := fmt.Sprintf("epoch.%d.", ep)
			l, _ := strconv.ParseInt(st[p+"reads_local"], 10, 64)
			pe, _ := strconv.ParseInt(st[p+"reads_peer"], 10, 64)
			so, _ := strconv.ParseInt(st[p+"reads_source"], 10, 64)
			if l+pe+so != n/w {
				t.Errorf("node %d epoch %d: local %d + peer %d + source %d != %d", r, ep, l, pe, so, n/w)
			}
			if so != 0 {
				t.Errorf("node %d epoch %d: %d samples only on the source; every file is kept by a node", r, ep, so)
			}
			if ep >= 2 {
				local, all = local+l, all+l+pe+so
			}
		}
		t.Logf("node %d: %s", r, strings.Join([]string{st["epoch.1.reads_local"], st["epoch.2.reads_local"], st["epoch.3.reads_local"]}, "/"))
	}
	frac := float64(local) / float64(all)
	t.Logf("epochs 2-3: %.2f of the samples read on the node that keeps them (a third with plain draws)", frac)
	if frac < 0.5 {
		t.Errorf("epochs 2-3: %.2f of the samples read locally, want well over a third", frac)
	}
}

// TestPeersBufferFetchesARanksNextSamplesFromTheirHolders: a job on one
// node of three, the dataset split between them and the node's tier too
// small for more than its share and a little: the shared buffer fetches
// the samples the rank reads next (the job's known order) from the peers
// that hold them, ahead of the reads and within its budget; the PFS is
// not read at all.
func TestPeersBufferFetchesARanksNextSamplesFromTheirHolders(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	const n, size = 240, 16 << 10
	src, paths := makeSamples(t, n, size)
	total := int64(n * size)
	quota := total * 45 / 100
	// Node 0 runs the job, with a buffer of a fifth of the dataset.
	a := peersEnv(t, rc, src, quota)
	a.opts.bufferBytes = total / 5
	a.mount()
	sharesCopied(t, a, peersNode(t, rc, src, quota), peersNode(t, rc, src, quota))
	// Every file is held by some node before the job starts.
	waitFor(t, func() bool { return a.num("cluster.files_nowhere") == 0 })
	want := map[string][]byte{}
	for _, p := range paths {
		want[p], _ = os.ReadFile(filepath.Join(src, p))
	}
	srcBefore, peerBefore := a.num("source_bytes"), a.num("cluster.peer_reads")
	resident := a.num("files_resident")
	dir := filepath.Join(a.mnt, ".epochfs", "jobs", "pf")
	if _, err := runJob(a, "pf", "batch_size=8\nsampler=random\n", want); err != nil {
		t.Fatal(err)
	}
	got, err := readJobEpoch(a, dir, want)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("epoch 2: %d samples of %d", len(got), n)
	}
	out, err := exec.Command("bash", "-c", `cat "$1"/status`, "bash", dir).Output()
	if err != nil {
		t.Fatal(err)
	}
	st := kv(out)
	num := func(k string) int64 { v, _ := strconv.ParseInt(st[k], 10, 64); return v }
	buffered, fromPeers := num("buffer_reads"), num("peer_reads")
	t.Logf("resident %d of %d; job: resident_reads %d, buffer_reads %d, peer_reads %d, source_reads %d; node: buffer_fetches %d, buffer_hits %d (%d waited), peer_reads %d, source bytes %d",
		resident, n, num("resident_reads"), buffered, fromPeers, num("source_reads"), a.num("buffer_fetches"),
		a.num("buffer_hits"), a.num("buffer_hits_waiting"), a.num("cluster.peer_reads")-peerBefore, a.num("source_bytes")-srcBefore)
	if d := a.num("source_bytes") - srcBefore; d != 0 {
		t.Errorf("the job's node read %d bytes from the source; every file is held by a node", d)
	}
	if num("source_reads") != 0 {
		t.Errorf("%d samples handed out as kept by no node", num("source_reads"))
	}
	if a.num("buffer_fetches") == 0 || a.num("cluster.peer_reads") == peerBefore {
		t.Fatalf("the buffer fetched %d files, %d chunks from peers: nothing was prefetched from the peers",
			a.num("buffer_fetches"), a.num("cluster.peer_reads")-peerBefore)
	}
	// The samples other nodes keep were mostly in the buffer (fetched or
	// being fetched) when the rank was handed them.
	if buffered < 3*(buffered+fromPeers)/4 {
		t.Errorf("of %d samples kept by peers, %d were in the buffer when handed out; want at least 3/4",
			buffered+fromPeers, buffered)
	}
	if b, bud := a.num("buffer_bytes"), a.num("buffer_budget"); b > bud {
		t.Errorf("buffer_bytes %d over the budget %d", b, bud)
	}
}

// largest is the sum of the sizes of the n largest of paths under src.
func largest(t *testing.T, src string, paths []string, n int) int64 {
	t.Helper()
	var sizes []int64
	for _, p := range paths {
		fi, err := os.Stat(filepath.Join(src, p))
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, fi.Size())
	}
	slices.Sort(sizes)
	var sum int64
	for _, s := range sizes[max(0, len(sizes)-n):] {
		sum += s
	}
	return sum
}
