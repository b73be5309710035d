package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/status"
	"github.com/epochfs/epochfs/test/rediscluster"
)

// TestTorchDDPAcrossTwoNodesSharesEachEpochThroughTheCluster: two "nodes"
// (two mounts of one source, each with its own tier and state, sharing a
// real 3-master Redis Cluster) and a DistributedDataParallel job (gloo)
// with one rank per node, each reading its own node's mount through
// epochfs.DistributedSampler(cluster=True) and registering the job there
// (LOCAL_RANK=0 on both). Per epoch each rank has ceil(61/2) samples and
// together they are the dataset with one sample twice, exactly as on one
// node; both nodes' job status says the claims went through the cluster.
func TestTorchDDPAcrossTwoNodesSharesEachEpochThroughTheCluster(t *testing.T) {
	requireFUSE(t)
	requireTorch(t)
	rediscluster.Require(t)
	rc := rediscluster.Start(t, rediscluster.Options{})
	const files, classes = 61, 4
	base := t.TempDir()
	bin, src, _, _ := generatedSource(t, base, files, classes)
	var addrs []string
	for _, a := range rc.Addrs() {
		addrs = append(addrs, strconv.Quote(a))
	}
	key := filepath.Join(base, "cluster.key")
	if err := os.WriteFile(key, []byte("ddp-test-key-ddp-test-key-ddp-test-key-0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("[cluster]\nredis = [%s]\ntier_quota = \"1GiB\"\ndataset = \"ddp\"\nkey_file = %q\ninsecure = true\n", strings.Join(addrs, ", "), key)
	mnts := []string{
		mountWith(t, bin, src, filepath.Join(base, "node0"), "1GiB", cfg),
		mountWith(t, bin, src, filepath.Join(base, "node1"), "1GiB", cfg),
	}
	script, _ := filepath.Abs("ddp_train.py")
	out := t.TempDir()
	port := freePort(t)
	res := make([]chan error, 2)
	logs := make([]string, 2)
	for r := range 2 {
		cmd := exec.Command(python, script, "--mount", mnts[r], "--out", out, "--job", "nodes", "--epochs", "2",
			"--batch", "8", "--train", "--cluster")
		cmd.Env = append(os.Environ(), "RANK="+strconv.Itoa(r), "LOCAL_RANK=0", "WORLD_SIZE=2",
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port))
		res[r] = make(chan error, 1)
		go func() {
			var err error
			logs[r], err = runRanks(t, cmd, 5*time.Minute)
			res[r] <- err
		}()
	}
	for r := range 2 {
		if err := <-res[r]; err != nil {
			t.Fatalf("rank %d on node %d: %v\n%s", r, r, err, logs[r])
		}
	}
	r0, r1 := loadRank(t, out, 0), loadRank(t, out, 1)
	if r0.N != files || r0.Len != 31 || r1.Len != 31 || len(r0.Epochs) != 2 || len(r1.Epochs) != 2 {
		t.Fatalf("rank logs: n=%d len=%d/%d epochs=%d/%d", r0.N, r0.Len, r1.Len, len(r0.Epochs), len(r1.Epochs))
	}
	for ep := range 2 {
		checkEpoch(t, fmt.Sprintf("epoch %d", ep+1), [][]int{r0.Epochs[ep], r1.Epochs[ep]}, files, 31)
	}
	for r, l := range []rankLog{r0, r1} {
		kv := status.Parse([]byte(l.Status)).Map()
		if kv["cluster"] != "true" || kv["ranks_remote"] != "1" || kv["claimed"] == "0" || kv["claim_fallbacks"] != "0" {
			t.Errorf("node %d's job status:\n%s", r, l.Status)
		}
	}
}
