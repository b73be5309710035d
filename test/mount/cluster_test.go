package mount

// Several epochfs mounts ("nodes") of one source, each with its own tiers
// and state, sharing a real 3-master Redis Cluster started by the test
// (test/rediscluster): the cluster tier, one fill per file, and its faults.

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/cluster"
	"github.com/epochfs/epochfs/internal/cluster/layout"
	"github.com/epochfs/epochfs/test/rediscluster"
)

// clusterTree is the standard tree plus 40 image-sized files.
func clusterTree(t *testing.T, big int64) (src string, paths []string, total int64) {
	t.Helper()
	src, paths = makeTree(t, big)
	for i := range 40 {
		p := fmt.Sprintf("train/c%d/img%03d.jpg", i%4, i)
		full := filepath.Join(src, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		data := make([]byte, 20<<10+mrand.IntN(200<<10))
		rand.Read(data)
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	for _, p := range paths {
		fi, err := os.Stat(filepath.Join(src, p))
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
	}
	return src, paths, total
}

// clusterKey is the nodes' key file content (cluster.key_file).
const clusterKey = "Zp0c1Jx8VnQm3rT6yW9bE2hK5sD7fG4aL1oU8iY0tR4="

// secretFile writes a root-only one-line file (a key_file or
// password_file) into a fresh directory.
func secretFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// clusterNode mounts src as one node of rc (dataset "ds"), with one tier
// of quota (default 1 GiB); the test clusters have no password
// (insecure), the nodes share clusterKey.
func clusterNode(t *testing.T, rc *rediscluster.Cluster, src string, quota ...int64) *env {
	t.Helper()
	e := clusterEnv(t, rc, src, clusterKey, quota...)
	e.mount()
	return e
}

// clusterEnv is clusterNode's env before its mount, sealing with key.
func clusterEnv(t *testing.T, rc *rediscluster.Cluster, src, key string, quota ...int64) *env {
	t.Helper()
	e := newEnv(t, src, append(quota, 1<<30)[0])
	e.opts.cluster = &cluster.Options{
		KeyFile: secretFile(t, key), Insecure: true,
		Addrs: rc.Addrs(), DatasetID: "ds", Quota: 1 << 30,
		Lease: time.Second, Timeout: 300 * time.Millisecond, MaxWait: 5 * time.Second,
		ProbeInterval: 100 * time.Millisecond,
	}
	return e
}

// readAllShuffled reads every path through mnt in a random order and
// compares it with the source.
func readAllShuffled(t *testing.T, src, mnt string, paths []string) {
	order := append([]string(nil), paths...)
	mrand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for _, p := range order {
		want, err := os.ReadFile(filepath.Join(src, p))
		if err != nil {
			t.Error(err)
			return
		}
		got, err := os.ReadFile(filepath.Join(mnt, p))
		if err != nil {
			t.Errorf("read %s through %s: %v", p, mnt, err)
			return
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s through %s: %d bytes differ from the source's %d", p, mnt, len(got), len(want))
			return
		}
	}
}

func fileKey(t *testing.T, src, p string) cluster.FileKey {
	t.Helper()
	fi, err := os.Stat(filepath.Join(src, p))
	if err != nil {
		t.Fatal(err)
	}
	return cluster.FileKey{Path: p, Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
}

func TestClusterNodesWalkOnceServeIdenticalBytesAndReadEachFileFromTheSourceOnce(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	src, paths, total := clusterTree(t, 3<<20)
	var nodes []*env
	for range 3 {
		// A node that cannot read the published catalog within its
		// operation timeout walks on its own, by design: on a loaded
		// machine (the race suite's packages side by side) 300 ms is not
		// always enough, and this test is not about timeouts.
		e := clusterEnv(t, rc, src, clusterKey)
		e.opts.cluster.Timeout = 3 * time.Second
		e.mount()
		nodes = append(nodes, e)
	}
	// The source is walked once: the first node walks and publishes the
	// catalog, the others load it.
	for i, n := range nodes {
		want, how := i == 0, map[bool]string{true: "walked", false: "loaded"}
		if st := n.status(); n.cat.Walked() != want || st["cluster.catalog"] != how[want] {
			t.Errorf("node %d: walked=%v cluster.catalog=%s; want %s (cluster.errors=%s, reachable=%s, corrupt=%s)",
				i, n.cat.Walked(), st["cluster.catalog"], how[want], st["cluster.errors"], st["cluster.reachable"], st["cluster.corrupt"])
		}
		if n.cat.Files() != int64(len(paths)) {
			t.Errorf("node %d: %d files in its catalog, want %d", i, n.cat.Files(), len(paths))
		}
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
	var srcBytes, hits, fills int64
	for i, n := range nodes {
		n.settle()
		st := n.status()
		if st["cluster.reachable"] != "yes" {
			t.Errorf("node %d: cluster.reachable=%s", i, st["cluster.reachable"])
		}
		if st["files_resident"] != st["files_total"] {
			t.Errorf("node %d: %s of %s files in its local tier", i, st["files_resident"], st["files_total"])
		}
		srcBytes += n.num("source_bytes")
		hits += n.num("cluster.hits")
		fills += n.num("cluster.fills")
	}
	t.Logf("3 nodes: source bytes %d for a dataset of %d; cluster hits %d, fills %d", srcBytes, total, hits, fills)
	if srcBytes != total {
		t.Errorf("3 nodes read %d bytes from the source; want each file once: %d", srcBytes, total)
	}
	if fills != int64(len(paths)) || hits < 2*int64(len(paths)-1) {
		t.Errorf("fills %d (want %d), hits %d (want at least %d)", fills, len(paths), hits, 2*(len(paths)-1))
	}
	// Every node, its local tier full, serves the same bytes again.
	for _, n := range nodes {
		checkAll(t, src, n.mnt, paths)
	}
}

// TestClusterFileThatFitsNoTierIsReadFromTheCluster: a node whose tier
// cannot hold a file reads it from the cluster's copy, not from the PFS.
func TestClusterFileThatFitsNoTierIsReadFromTheCluster(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	src, paths, _ := clusterTree(t, 3<<20)
	a := clusterNode(t, rc, src)
	readAllShuffled(t, src, a.mnt, paths)
	a.settle()
	b := clusterNode(t, rc, src, 2<<20) // big.bin (3 MiB) fits no tier of b
	checkAll(t, src, b.mnt, []string{"big.bin"})
	st := b.status()
	t.Logf("node b: remote_reads=%s source_bytes=%s placements_skipped_nospace=%s", st["remote_reads"], st["source_bytes"], st["placements_skipped_nospace"])
	if b.num("remote_reads") == 0 {
		t.Error("remote_reads = 0: big.bin was not read from the cluster")
	}
	if n := b.num("source_bytes"); n != 0 {
		t.Errorf("node b read %d bytes from the source; the cluster holds every file", n)
	}
}

func TestClusterCorruptedValueIsNeverServedThroughTheMount(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	src, paths, _ := clusterTree(t, 3<<20)
	a := clusterNode(t, rc, src)
	checkAll(t, src, a.mnt, paths)
	a.settle()
	k := fileKey(t, src, "big.bin")
	bad := bytes.Repeat([]byte{0}, cluster.ChunkSize)
	if err := rc.SetRaw(layout.New("ds").File(k).Chunk(1), bad); err != nil {
		t.Fatal(err)
	}
	b := clusterNode(t, rc, src)
	checkAll(t, src, b.mnt, []string{"big.bin"})
	b.settle()
	checkAll(t, src, b.mnt, []string{"big.bin"})
	if c := b.num("cluster.corrupt"); c != 1 {
		t.Errorf("cluster.corrupt = %d, want 1", c)
	}
	if sb := b.num("source_bytes"); sb != k.Size {
		t.Errorf("node b read %d bytes from the source; want big.bin once (%d)", sb, k.Size)
	}
	// The bad copy was dropped; b's fallback did not fill it again (it
	// read the source past a bad chunk), so a third node fills it anew.
	c := clusterNode(t, rc, src)
	checkAll(t, src, c.mnt, []string{"big.bin"})
	c.settle()
	if c.num("cluster.fills") != 1 {
		t.Errorf("third node: cluster.fills=%d, want 1 (the dropped copy filled again)", c.num("cluster.fills"))
	}
}

func TestClusterMasterKilledMidEpochEveryReadStaysCorrect(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	src, paths, _ := clusterTree(t, 2<<20)
	a := clusterNode(t, rc, src)
	b := clusterNode(t, rc, src)
	half := len(paths) / 2
	checkAll(t, src, a.mnt, paths[:half])
	rc.Kill(1)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); readAllShuffled(t, src, b.mnt, paths) }()
	go func() { defer wg.Done(); readAllShuffled(t, src, a.mnt, paths[half:]) }()
	wg.Wait()
	waitFor(t, func() bool { return b.status()["cluster.reachable"] == "no" })
	a.settle()
	b.settle()
	checkAll(t, src, a.mnt, paths)
	checkAll(t, src, b.mnt, paths)
	rc.Restart(1)
	waitFor(t, func() bool {
		return a.status()["cluster.reachable"] == "yes" && b.status()["cluster.reachable"] == "yes"
	})
	// Back in use: a file neither node has read is filled by one and
	// read from the cluster by the other.
	p := "late/new.bin"
	os.MkdirAll(filepath.Join(src, "late"), 0o755)
	data := make([]byte, 300<<10)
	rand.Read(data)
	os.WriteFile(filepath.Join(src, p), data, 0o644)
	for _, n := range []*env{a, b} {
		if code, out := cli(t, "refresh", n.mnt); code != 0 {
			t.Fatalf("refresh: %d %s", code, out)
		}
	}
	waitFor(t, func() bool {
		_, ea := os.Stat(filepath.Join(a.mnt, p))
		_, eb := os.Stat(filepath.Join(b.mnt, p))
		return ea == nil && eb == nil
	})
	hits := b.num("cluster.hits")
	checkAll(t, src, a.mnt, []string{p})
	a.settle()
	checkAll(t, src, b.mnt, []string{p})
	if b.num("cluster.hits") != hits+1 {
		t.Errorf("after the master came back, node b did not read the new file from the cluster (hits %d → %d)", hits, b.num("cluster.hits"))
	}
}

// clusterConfig writes a config making a binary mount a node of rc.
func clusterConfig(t *testing.T, dir string, addrs []string, extra string) string {
	t.Helper()
	var q []string
	for _, a := range addrs {
		q = append(q, strconv.Quote(a))
	}
	if !strings.Contains(extra, "password_file") {
		extra = "insecure = true\n" + extra
	}
	text := fmt.Sprintf("[cluster]\nredis = [%s]\ntier_quota = \"1GiB\"\ndataset = \"ds\"\nlease = \"1s\"\ntimeout = \"300ms\"\nkey_file = %q\n%s",
		strings.Join(q, ", "), secretFile(t, clusterKey), extra)
	path := filepath.Join(dir, "cluster.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestClusterNodeSIGKILLedMidFillOthersFinish(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	src, paths, base, mnt := binDirs(t, 8<<20)
	total := int64(0)
	for _, p := range paths {
		fi, _ := os.Stat(filepath.Join(src, p))
		total += fi.Size()
	}
	// The victim reads its source slowly, so its fill of big.bin is in
	// progress when it dies.
	cfg := clusterConfig(t, base, rc.Addrs(), "[placement]\nsource_bandwidth = \"2MiB/s\"\n")
	binMount(t, src, mnt, filepath.Join(base, "state"), "--config", cfg, "--tier=disk="+filepath.Join(base, "tier")+":1GiB")
	k := fileKey(t, src, "big.bin")
	cat := exec.Command("cat", filepath.Join(mnt, "big.bin"))
	if err := cat.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		out, _ := rc.CLI("EXISTS", layout.New("ds").File(k).Lease)
		return out == "1\n"
	})
	pid, _ := strconv.Atoi(statusOf(t, mnt)["pid"])
	if pid <= 0 {
		t.Fatal("no pid in status")
	}
	syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, func() bool { return !processAlive(pid) })
	cat.Wait() // fails: its mount's daemon is gone
	if code, out := cli(t, "unmount", "--lazy", mnt); code != 0 {
		t.Fatalf("unmount --lazy of the dead node: exit %d: %s", code, out)
	}
	if out, _ := rc.CLI("EXISTS", layout.New("ds").File(k).Manifest); out != "0\n" {
		t.Fatal("the dead node's half fill is visible")
	}
	// The others finish: every byte right, each file from the source once.
	a := clusterNode(t, rc, src)
	b := clusterNode(t, rc, src)
	var wg sync.WaitGroup
	for _, n := range []*env{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); readAllShuffled(t, src, n.mnt, paths) }()
	}
	wg.Wait()
	a.settle()
	b.settle()
	if sb := a.num("source_bytes") + b.num("source_bytes"); sb != total {
		t.Errorf("the two surviving nodes read %d bytes from the source, want each file once (%d)", sb, total)
	}
	checkAll(t, src, a.mnt, paths)
	checkAll(t, src, b.mnt, paths)
}

func TestClusterMountRefusesAnUnusableClusterWithExitTwo(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{Password: "pw-right"})
	plain := rediscluster.StartPlain(t)
	src, _, base, mnt := binDirs(t, 1<<10)
	pwFile := filepath.Join(base, "redis.pass")
	os.WriteFile(pwFile, []byte("pw-wrong\n"), 0o600)
	cases := map[string]string{
		"unreachable":    clusterConfig(t, t.TempDir(), []string{rediscluster.ClosedPort(t)}, ""),
		"wrong password": clusterConfig(t, t.TempDir(), rc.Addrs(), "password_file = "+strconv.Quote(pwFile)+"\n"),
		"not a cluster":  clusterConfig(t, t.TempDir(), []string{plain}, ""),
	}
	// The credentials: both files needed unless insecure, neither one
	// readable by others.
	good := secretFile(t, "pw-right")
	openPw := filepath.Join(base, "open.pass")
	os.WriteFile(openPw, []byte("pw-right\n"), 0o644)
	openKey := filepath.Join(base, "open.key")
	os.WriteFile(openKey, []byte(clusterKey+"\n"), 0o640)
	plainText := func(extra string) string {
		p := filepath.Join(t.TempDir(), "c.toml")
		os.WriteFile(p, []byte(fmt.Sprintf("[cluster]\nredis = [%q]\ntier_quota = \"1GiB\"\n%s", rc.Addrs()[0], extra)), 0o644)
		return p
	}
	cases["no key_file"] = plainText("password_file = " + strconv.Quote(good) + "\n")
	cases["no password_file"] = plainText("key_file = " + strconv.Quote(secretFile(t, clusterKey)) + "\n")
	cases["world-readable password_file"] = plainText("password_file = " + strconv.Quote(openPw) + "\nkey_file = " + strconv.Quote(secretFile(t, clusterKey)) + "\n")
	cases["group-readable key_file"] = plainText("password_file = " + strconv.Quote(good) + "\nkey_file = " + strconv.Quote(openKey) + "\n")
	for name, cfg := range cases {
		code, out := cli(t, "mount", "--config", cfg, "--state", filepath.Join(base, "state"),
			"--tier=disk="+filepath.Join(base, "tier")+":1GiB", src, mnt)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2: %s", name, code, out)
		}
		if lines := strings.Count(strings.TrimSpace(out), "\n"); lines != 0 || !strings.Contains(out, "cluster") {
			t.Errorf("%s: want one line naming the cluster, got %q", name, out)
		}
		if strings.Contains(out, "pw-") {
			t.Errorf("%s: the output reveals the password: %q", name, out)
		}
		if mounted(mnt) {
			cli(t, "unmount", "--lazy", mnt)
			t.Errorf("%s: mounted anyway", name)
		}
	}
}

// rankEpochOf reads rank r's batches of job dir (open and read at offset 0
// each, as the Python sampler does) until the 0-byte read; safe to call
// from a goroutine (errors are reported with t.Error).
func rankEpochOf(t *testing.T, dir string, r int) []string {
	next := filepath.Join(dir, "rank", strconv.Itoa(r), "next")
	var out []string
	for i := 0; i < 1000; i++ {
		b, err := os.ReadFile(next)
		if err != nil {
			t.Errorf("read %s: %v", next, err)
			return out
		}
		if len(b) == 0 {
			return out
		}
		out = append(out, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")...)
	}
	t.Errorf("%s: the epoch does not end", next)
	return out
}

func TestClusterDDPJobWithOneRankPerNodeSharesEachEpochExactlyOnce(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	// 23 samples: the job over all of them pads (ceil(23/2) = 12 per
	// rank); the job over class0 and class1 (12 samples) does not.
	src, paths := makeSamples(t, 23, 3000)
	nodes := []*env{clusterNode(t, rc, src), clusterNode(t, rc, src)}
	for _, c := range []struct {
		job, doc string
		subset   []string
	}{
		{"odd", "batch_size=4\nworld_size=2\ncluster=true\n", paths},
		{"even", "batch_size=4\nworld_size=2\ncluster=true\nsubset=class0\nsubset=class1\n",
			slices.DeleteFunc(slices.Clone(paths), func(p string) bool { return !strings.HasPrefix(p, "class0/") && !strings.HasPrefix(p, "class1/") })},
	} {
		dirs := make([]string, 2)
		for i, e := range nodes {
			dirs[i] = filepath.Join(e.mnt, ".epochfs", "jobs", c.job)
			if err := os.Mkdir(dirs[i], 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dirs[i], "config"), []byte(c.doc), 0); err != nil {
				t.Fatalf("%s: config on node %d: %v", c.job, i, err)
			}
		}
		quota := (len(c.subset) + 1) / 2
		for ep := 1; ep <= 2; ep++ {
			// Rank 0 reads on node 0 and rank 1 on node 1, at once.
			shares := make([][]string, 2)
			var wg sync.WaitGroup
			for r := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					shares[r] = rankEpochOf(t, dirs[r], r)
				}()
			}
			wg.Wait()
			count := map[string]int{}
			for r, sh := range shares {
				if len(sh) != quota {
					t.Errorf("%s epoch %d: rank %d got %d samples, want its quota %d", c.job, ep, r, len(sh), quota)
				}
				for _, p := range sh {
					count[p]++
				}
			}
			repeats := 0
			for _, p := range c.subset {
				if count[p] == 0 {
					t.Errorf("%s epoch %d: %s went to no rank", c.job, ep, p)
				}
				repeats += max(count[p]-1, 0)
			}
			if len(count) != len(c.subset) || repeats != 2*quota-len(c.subset) {
				t.Errorf("%s epoch %d: %d distinct samples, %d repeated; want %d and %d (padding)",
					c.job, ep, len(count), repeats, len(c.subset), 2*quota-len(c.subset))
			}
		}
		for i, dir := range dirs {
			st := kv(mustRead(t, filepath.Join(dir, "status")))
			if st["cluster"] != "true" || st["ranks_remote"] != "1" || st["claimed"] == "0" || st["claim_fallbacks"] != "0" {
				t.Errorf("%s on node %d: status cluster=%s ranks_remote=%s claimed=%s claim_fallbacks=%s",
					c.job, i, st["cluster"], st["ranks_remote"], st["claimed"], st["claim_fallbacks"])
			}
		}
	}
	for i, e := range nodes {
		if n := e.num("cluster.job_claims"); n == 0 {
			t.Errorf("node %d: cluster.job_claims=0 after two cluster jobs", i)
		}
		if n := e.num("cluster.job_fallbacks"); n != 0 {
			t.Errorf("node %d: cluster.job_fallbacks=%d, want 0", i, n)
		}
	}
	// A node that writes another config for a cluster job is refused.
	bad := []string{filepath.Join(nodes[0].mnt, ".epochfs", "jobs", "bad"), filepath.Join(nodes[1].mnt, ".epochfs", "jobs", "bad")}
	for _, d := range bad {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bad[0], "config"), []byte("world_size=2\ncluster=true\n"), 0); err != nil {
		t.Fatal(err)
	}
	err := os.WriteFile(filepath.Join(bad[1], "config"), []byte("world_size=3\ncluster=true\n"), 0)
	if !errors.Is(err, syscall.EINVAL) || !strings.Contains(nodes[1].errorsFile(), "another configuration") {
		t.Errorf("another config for the job on node 1: %v, want EINVAL; errors:\n%s", err, nodes[1].errorsFile())
	}
}

// Anyone who can write to the cluster but has no key (another tenant of a
// shared Redis, a leaked password) stores a copy of a dataset file with
// their bytes and publishes a catalog that makes a root-only file
// readable: a node with the key serves neither, reads the file from the
// source and walks the source instead.
func TestClusterACopyOrCatalogWrittenWithoutTheKeyIsNeverServed(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	src, paths, _ := clusterTree(t, 1<<20)
	hidden := filepath.Join(src, "hidden.txt")
	if err := os.WriteFile(hidden, []byte("root only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	victim := paths[len(paths)-1]
	full := filepath.Join(src, victim)
	real, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(full)
	k := fileKey(t, src, victim)

	// The forger's values: its bytes under the victim's path, size and
	// mtime; a catalog with the hidden file at 0644.
	evil := bytes.Repeat([]byte{'E'}, len(real))
	os.WriteFile(full, evil, 0o644)
	os.Chtimes(full, fi.ModTime(), fi.ModTime())
	os.Chmod(hidden, 0o644)
	forgerKey := strings.Repeat("f", 44)
	f := clusterEnv(t, rc, src, forgerKey)
	f.mount()
	if got, _ := os.ReadFile(filepath.Join(f.mnt, victim)); !bytes.Equal(got, evil) {
		t.Fatal("the forger's mount did not read its own bytes")
	}
	f.settle()
	f.unmount()
	if out, _ := rc.CLI("EXISTS", layout.New("ds").File(k).Manifest); out != "1\n" {
		t.Fatalf("the forged copy is not in the cluster (EXISTS %q): the test would check nothing", out)
	}
	// Control: a node with the forger's key takes both.
	g := clusterEnv(t, rc, src, forgerKey)
	g.mount()
	if g.status()["cluster.catalog"] != "loaded" {
		t.Fatal("a node with the forger's key did not load the forged catalog")
	}
	g.unmount()

	// The source as it really is.
	os.WriteFile(full, real, 0o644)
	os.Chtimes(full, fi.ModTime(), fi.ModTime())
	os.Chmod(hidden, 0o600)

	b := clusterNode(t, rc, src)
	if st := b.status(); st["cluster.catalog"] != "walked" {
		t.Errorf("with the key: cluster.catalog=%s, want walked (the forged catalog refused)", st["cluster.catalog"])
	}
	hi, err := os.Stat(filepath.Join(b.mnt, "hidden.txt"))
	if err != nil || hi.Mode().Perm() != 0o600 {
		t.Errorf("hidden.txt through the node with the key: %v, %v; want mode 0600 as the source has it", hi.Mode(), err)
	}
	got, err := os.ReadFile(filepath.Join(b.mnt, victim))
	if err != nil || !bytes.Equal(got, real) {
		t.Errorf("%s through the node with the key: %v, same as the source %v; want the source's bytes", victim, err, bytes.Equal(got, real))
	}
	b.settle()
	if n := b.num("cluster.corrupt"); n < 2 {
		t.Errorf("cluster.corrupt = %d, want at least 2 (the catalog and the copy)", n)
	}
	if out, _ := rc.CLI("EXISTS", layout.New("ds").File(k).Manifest); out != "1\n" {
		t.Errorf("the node with the key did not store the real copy in place of the forged one")
	}
	checkAll(t, src, b.mnt, paths)
}

// TestClusterARankLostOnOneNodeIsFinishedByRanksOnAnother: a cluster job
// of 3 ranks, rank 0 on node A and ranks 1 and 2 on node B. Rank 0 reads
// two batches and stops; once its lease (2 s) has run out, node A tells
// the cluster, and ranks 1 and 2 on node B read what it had not: the
// epoch holds every sample once, apart from padding, and B's status counts
// what its ranks took over.
func TestClusterARankLostOnOneNodeIsFinishedByRanksOnAnother(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	src, paths := makeSamples(t, 61, 2000)
	var nodes []*env
	for range 2 {
		e := clusterEnv(t, rc, src, clusterKey)
		e.opts.lease = 2 * time.Second
		e.mount()
		nodes = append(nodes, e)
	}
	dirs := make([]string, 2)
	for i, e := range nodes {
		dirs[i] = filepath.Join(e.mnt, ".epochfs", "jobs", "lossy")
		if err := os.Mkdir(dirs[i], 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dirs[i], "config"), []byte("batch_size=2\nworld_size=3\ncluster=true\n"), 0); err != nil {
			t.Fatal(err)
		}
	}
	read := func(node, r int) []string {
		b, err := os.ReadFile(filepath.Join(dirs[node], "rank", strconv.Itoa(r), "next"))
		if err != nil {
			t.Fatalf("rank %d on node %d: %v", r, node, err)
		}
		if len(b) == 0 {
			return nil
		}
		return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	var got [3][]string
	for range 2 {
		got[0] = append(got[0], read(0, 0)...)
	}
	for range 3 {
		for _, r := range []int{1, 2} {
			got[r] = append(got[r], read(1, r)...)
		}
	}
	// Node A loses rank 0 once its lease runs out: with no rank left
	// there, the job ends on A, and A tells the cluster first.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(dirs[0]); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node A never dropped the job of its lost rank")
		}
		// Node B's ranks stay alive meanwhile.
		if in, ok := nodes[1].jm.Lookup("lossy"); ok {
			for _, r := range []int{1, 2} {
				nodes[1].jm.Touch(in.Ref(), r)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, r := range []int{1, 2} {
		got[r] = append(got[r], rankEpochOf(t, dirs[1], r)...)
	}
	count := map[string]int{}
	for _, sh := range got {
		for _, p := range sh {
			count[p]++
		}
	}
	repeats := 0
	for _, p := range paths {
		if count[p] == 0 {
			t.Fatalf("%s was never handed out: rank 0's share was not taken over (counts %d %d %d)", p, len(got[0]), len(got[1]), len(got[2]))
		}
		repeats += count[p] - 1
	}
	// Ranks 1 and 2 read the rest. (How they split it depends on when
	// each learnt of the loss: one that had finished its share before
	// leaves its part to the other.)
	if len(got[0]) != 4 || len(got[1])+len(got[2]) < len(paths)-4 {
		t.Fatalf("counts %d %d %d: want rank 0's 4, and ranks 1 and 2 the rest", len(got[0]), len(got[1]), len(got[2]))
	}
	st := kv(mustRead(t, filepath.Join(dirs[1], "status")))
	if st["taken_over"] == "0" || st["taken_over"] == "" {
		t.Errorf("node B's status: taken_over=%q, want what its ranks took over", st["taken_over"])
	}
	if want := st["padded"]; strconv.Itoa(repeats) != want {
		t.Errorf("%d samples handed out twice, node B padded %s: every repeat must be padding", repeats, want)
	}
}

// TestClusterJobResumesOnTwoMountsWithAnotherWorldSize: a cluster job of
// 2 ranks (one per mount) is interrupted; its state, as the Python
// DistributedSampler makes it (node A's document with the unread lines of
// both: what each node's ranks drew ahead), resumes a cluster job of 3
// ranks (rank 0 on A, 1 and 2 on B): every sample comes once across both
// runs, apart from torch's padding, with equal counts.
func TestClusterJobResumesOnTwoMountsWithAnotherWorldSize(t *testing.T) {
	rc := rediscluster.Start(t, rediscluster.Options{})
	src, paths := makeSamples(t, 61, 2000)
	nodes := []*env{clusterNode(t, rc, src), clusterNode(t, rc, src)}
	job := func(name, doc string) []string {
		var dirs []string
		for _, e := range nodes {
			d := filepath.Join(e.mnt, ".epochfs", "jobs", name)
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, "config"), []byte(doc), 0); err != nil {
				t.Fatal(err)
			}
			dirs = append(dirs, d)
		}
		return dirs
	}
	read := func(dir string, r int) []string {
		b, err := os.ReadFile(filepath.Join(dir, "rank", strconv.Itoa(r), "next"))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			return nil
		}
		return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
	old := job("old", "batch_size=3\nseed=2\nworld_size=2\ncluster=true\n")
	var seen []string
	for range 3 {
		seen = append(seen, read(old[0], 0)...)
		seen = append(seen, read(old[1], 1)...)
	}
	var doc []byte
	for i, d := range old {
		text := mustRead(t, filepath.Join(d, "state"))
		body, unread, ok := bytes.Cut(text, []byte("\nunread "))
		if i == 0 {
			doc = append(doc, body...)
			doc = append(doc, '\n')
		}
		if ok {
			doc = append(doc, "unread "...)
			doc = append(doc, unread...)
		} else {
			t.Fatalf("node %d's state gives back nothing its ranks drew ahead:\n%s", i, text)
		}
	}
	dirs := job("new", "batch_size=2\nseed=2\nworld_size=3\ncluster=true\n")
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "resume"), doc, 0); err != nil {
			t.Fatalf("resume: %v\n%s", err, nodes[0].errorsFile())
		}
	}
	where := []string{dirs[0], dirs[1], dirs[1]}
	shares := make([][]string, 3)
	for r := range 3 {
		shares[r] = read(where[r], r)
	}
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shares[r] = append(shares[r], rankEpochOf(t, where[r], r)...)
		}()
	}
	wg.Wait()
	left := len(paths) - len(seen)
	count := map[string]int{}
	for _, p := range seen {
		count[p]++
	}
	total := len(seen)
	for r, sh := range shares {
		if want := (left + 2) / 3; len(sh) != want {
			t.Errorf("resumed rank %d got %d samples, want ceil(%d/3) = %d", r, len(sh), left, want)
		}
		for _, p := range sh {
			count[p]++
			total++
		}
	}
	if len(count) != len(paths) {
		t.Fatalf("%d of %d samples handed out across the runs", len(count), len(paths))
	}
	if repeats, pad := total-len(paths), 3*((left+2)/3)-left; repeats != pad {
		t.Fatalf("%d repeats, want the padding %d", repeats, pad)
	}
}
