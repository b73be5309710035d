// Package mount holds the end-to-end tests that run epochfs on a real FUSE
// mount: in-process mounts of the fs package, and the epochfs binary.
package mount

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/cluster"
	"github.com/epochfs/epochfs/internal/cluster/peer"
	epochd "github.com/epochfs/epochfs/internal/daemon"
	"github.com/epochfs/epochfs/internal/fs"
	"github.com/epochfs/epochfs/internal/jobs"
	"github.com/epochfs/epochfs/internal/model"
	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/source"
	"github.com/epochfs/epochfs/internal/status"
	"github.com/epochfs/epochfs/internal/tier"
	"github.com/epochfs/epochfs/internal/views"
	"github.com/epochfs/epochfs/test/faultfs"
	"go.uber.org/zap"

	"github.com/epochfs/epochfs/internal/testenv"
)

var binPath string // the epochfs binary, built by TestMain

func TestMain(m *testing.M) {
	if file := os.Getenv("EPOCHFS_MMAP_FILE"); file != "" {
		// TestMmapOfDatasetFiles's child.
		if file == "fd" {
			// The parent's descriptor (cmd.ExtraFiles[0]).
			file = "/proc/self/fd/3"
		}
		if err := mmapChild(file, os.Getenv("EPOCHFS_MMAP_WANT")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "epochfs-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "epochfs")
	out, err := exec.Command("go", "build", "-o", binPath, "github.com/epochfs/epochfs/cmd/epochfs").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build epochfs: %v\n%s", err, out)
		os.Exit(1)
	}
	before := ourMounts()
	fdsBefore := openFDs()
	code := m.Run()
	os.RemoveAll(dir)
	faultfs.RemoveBinary()
	// ... and on file descriptors left open by the in-process mounts.
	if fds := openFDs(); len(fds) > len(fdsBefore) {
		fmt.Fprintf(os.Stderr, "FAIL: %d file descriptors open at start, %d at the end: %v\n", len(fdsBefore), len(fds), fds)
		code = 1
	}
	// A test run fails on a mount left behind.
	if left := ourMounts(); len(left) > len(before) {
		fmt.Fprintf(os.Stderr, "FAIL: mounts left behind: %v\n", left)
		code = 1
	}
	os.Exit(code)
}

// openFDs lists this process's descriptors of files and directories (tier
// copies, source files, the catalog) and of io_uring instances (FUSE over
// io_uring's queues). Pipes are left out: go-fuse keeps a pool of splice
// pipes for the life of the process.
func openFDs() []string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range ents {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if target == "anon_inode:[io_uring]" || strings.HasPrefix(target, "/") && !strings.HasPrefix(target, "/dev/") && !strings.HasPrefix(target, "/sys/") && !strings.HasPrefix(target, "/proc/") {
			out = append(out, e.Name()+"->"+target)
		}
	}
	return out
}

// ourMounts lists epochfs mounts (and fusectl's) in /proc/mounts.
func ourMounts() []string {
	data, _ := os.ReadFile("/proc/mounts")
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		// fusectl too: the unmount of a dead daemon's mount may mount it
		// (mounts.AbortConnection), and must take it down again.
		if len(f) > 2 && (strings.HasPrefix(f[2], "fuse") && strings.Contains(l, "epochfs") || f[2] == "fusectl") {
			out = append(out, f[1])
		}
	}
	return out
}

func mounted(dir string) bool {
	for _, m := range ourMounts() {
		if m == dir {
			return true
		}
	}
	return false
}

// requireFUSE skips without /dev/fuse, and fails instead when
// EPOCHFS_REQUIRE_FUSE=1 (CI).
func requireFUSE(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		testenv.Skip(t, "no /dev/fuse: %v", err)
	}
	if os.Geteuid() != 0 {
		testenv.Skip(t, "mount tests need root")
	}
}

// skipUnlessAllowed skips a test that cannot run here, or fails it when
// EPOCHFS_REQUIRE_FUSE=1 (CI), where every mount, passthrough and Python
// test must run.
func skipUnlessAllowed(t *testing.T, why string) {
	t.Helper()
	testenv.Skip(t, "%s", why)
}

// requirePassthrough skips (or fails, see skipUnlessAllowed) a test of a
// mount that has no FUSE passthrough.
func requirePassthrough(t *testing.T, e *env) {
	t.Helper()
	if e.status()["passthrough"] != "on" {
		skipUnlessAllowed(t, "passthrough is off on this kernel")
	}
}

// requireDebianPython skips (or fails) a test that drives Debian's
// python3.
func requireDebianPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		skipUnlessAllowed(t, "no /usr/bin/python3")
	}
}

// env is one in-process mount of a source tree, assembled by the daemon
// package as `epochfs mount` assembles it.
type env struct {
	t     *testing.T
	src   string
	mnt   string
	state string
	tiers []tierSpec
	m     *epochd.Mount
	cat   *catalog.Catalog
	p     *placement.Placer
	fsys  *fs.FS
	srcd  *source.Source
	jm    *jobs.Manager
	opts  envOpts
}

type tierSpec struct {
	name  string
	dir   string
	quota int64
}

type envOpts struct {
	validate      placement.Validate
	validateTTL   time.Duration // placement.validate_ttl (0: no earlier mount's check is trusted)
	sourceTimeout time.Duration // default source.DefaultTimeout
	// sourceBandwidth caps source reads in bytes/s (0: none).
	sourceBandwidth float64
	noPassthrough   bool
	statfs          func(string) (uint64, uint64, error)
	// bufferBytes > 0 gives .epochfs/jobs/ a shared buffer of this
	// budget.
	bufferBytes int64
	// metricsListen serves metrics on this address ("127.0.0.1:0").
	metricsListen string
	// views serves .epochfs/views/ (and the jobs' views) with these
	// options; model splits model.memory_budget.
	views *views.Config
	model *model.Settings
	// lease is the jobs' lease (default the sampler's).
	lease time.Duration
	// openFiles and keptCopies are the placer's budgets of tier
	// descriptors and of copies kept ready between opens (0: the default).
	openFiles, keptCopies int
	// cluster makes the mount a node of a Redis Cluster (cluster_test.go).
	cluster *cluster.Options
	// peerListen is where a peers node serves its copies (peers_test.go).
	peerListen string
	// peerTLS makes the peer port speak TLS.
	peerTLS peer.TLSFiles
	// maxWarmupPerUser bounds one user's warmup backlog (0: none).
	maxWarmupPerUser int64
	// docBudget bounds one user's open ctl documents (0: the default).
	docBudget int
	// serveWhileWalking mounts before the walk of a first mount ends (the
	// CLI's default); the tests' default is the walk first, so that they
	// see the whole catalog at once.
	serveWhileWalking bool
	// walkStat walks each directory with its entries' attributes
	// (placement.walk = "stat"); the default is names first, as the CLI's.
	walkStat bool
	// loadHold holds a background load of the stored catalog until it is
	// closed (with serveWhileWalking).
	loadHold chan struct{}
	// firstID starts the catalog's IDs (the inode numbers) past it.
	firstID uint64
	// prewarm registers the tiers' copies at mount (the CLI's default,
	// fuse.prewarm); the tests' default is off, so that their counts of
	// first opens are their readers'.
	prewarm bool
}

// newEnv prepares directories; call mount to mount.
func newEnv(t *testing.T, src string, quotas ...int64) *env {
	t.Helper()
	requireFUSE(t)
	base := t.TempDir()
	e := &env{t: t, src: src, mnt: filepath.Join(base, "mnt"), state: filepath.Join(base, "state")}
	if err := os.Mkdir(e.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, q := range quotas {
		e.tiers = append(e.tiers, tierSpec{name: fmt.Sprintf("t%d", i), dir: filepath.Join(base, fmt.Sprintf("tier%d", i)), quota: q})
	}
	return e
}

// mount mounts the env and registers its unmount.
func (e *env) mount() {
	t := e.t
	t.Helper()
	var tiers []tier.Options
	for _, ts := range e.tiers {
		tiers = append(tiers, tier.Options{Name: ts.name, Dir: ts.dir, Quota: ts.quota, Statfs: e.opts.statfs})
	}
	log := zap.NewNop()
	if os.Getenv("EPOCHFS_TEST_LOG") != "" {
		log, _ = zap.NewDevelopment()
	}
	m, err := epochd.New(context.Background(), epochd.Options{
		Source: e.src, Mountpoint: e.mnt, StateDir: e.state, Tiers: tiers,
		SourceOptions: source.Options{Timeout: e.opts.sourceTimeout, Bandwidth: e.opts.sourceBandwidth},
		Placement: placement.Options{Workers: 2, Validate: e.opts.validate, ValidateTTL: e.opts.validateTTL,
			BufferBytes: e.opts.bufferBytes, OpenFiles: e.opts.openFiles, KeptCopies: e.opts.keptCopies,
			MaxWarmupPerUser: e.opts.maxWarmupPerUser},
		Jobs:    jobs.Options{Lease: e.opts.lease},
		FUSE:    fs.Options{NoPassthrough: e.opts.noPassthrough, Version: "test", DocBudget: e.opts.docBudget, Prewarm: e.opts.prewarm},
		Metrics: epochd.MetricsOptions{Listen: e.opts.metricsListen}, Logger: log,
		Views: e.opts.views, ModelSettings: e.opts.model,
		Cluster: e.opts.cluster, PeerListen: e.opts.peerListen, PeerTLS: e.opts.peerTLS,
		WaitWalk: !e.opts.serveWhileWalking, LoadHold: e.opts.loadHold, FirstID: e.opts.firstID, WalkNames: !e.opts.walkStat,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	e.cat, e.p, e.fsys, e.srcd, e.jm = m.Catalog(), m.Placer(), m.FS(), m.Source(), m.Jobs()
	t.Cleanup(e.unmount)
	checkTransport(t, e.fsys.Transport())
}

// checkTransport fails a mount whose transport is not the one the run is
// for: EPOCHFS_TEST_TRANSPORT=io_uring (scripts/test-io-uring.sh) or dev.
func checkTransport(t *testing.T, got string) {
	t.Helper()
	if want := os.Getenv("EPOCHFS_TEST_TRANSPORT"); want != "" && got != want {
		t.Fatalf("the mount's transport is %q, and this run is for %q", got, want)
	}
}

// unmount unmounts (idempotent), takes the mount down and checks the
// mount is gone.
func (e *env) unmount() {
	if e.m == nil {
		return
	}
	if err := e.m.Unmount(); err != nil {
		// Busy (a failed test left a file open): Close detaches it so that
		// the run fails instead of waiting forever for the server to stop.
		e.t.Errorf("unmount: %v", err)
	}
	if err := e.m.Close(); err != nil {
		e.t.Errorf("close: %v", err)
	}
	e.m, e.fsys = nil, nil
	if mounted(e.mnt) {
		e.t.Errorf("%s still mounted", e.mnt)
	}
}

// status reads .epochfs/status into a map.
func (e *env) status() map[string]string {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join(e.mnt, ".epochfs", "status"))
	if err != nil {
		e.t.Fatal(err)
	}
	m := status.Parse(data).Map()
	return m
}

func (e *env) num(key string) int64 {
	e.t.Helper()
	v, err := strconv.ParseInt(e.status()[key], 10, 64)
	if err != nil {
		e.t.Fatalf("status %s: %v", key, err)
	}
	return v
}

// settle waits until no placement is queued or running. The deadline is a
// liveness bound, not a speed assertion.
func (e *env) settle() {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for e.p.Stats().Queued > 0 {
		if time.Now().After(deadline) {
			e.t.Fatalf("placements still queued after 60s: %+v", e.p.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// makeTree writes the standard test tree and returns the file paths.
func makeTree(t *testing.T, big int64) (string, []string) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	files := map[string]int64{
		"a/b/c/deep.bin":     4097,
		"a/small.txt":        5,
		"empty":              0,
		"big.bin":            big,
		"ünïcødé ñame.dat":   1000,
		"class1/img001.jpg":  110 << 10,
		"class1/img002.jpg":  90 << 10,
		"class2/img003.jpg":  130 << 10,
		"class2/img004.jpg":  1 << 20,
		"class2/sub/odd.bin": 65537,
	}
	var paths []string
	for p, n := range files {
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		data := make([]byte, n)
		rand.Read(data)
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	if err := os.Symlink("a/small.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	return src, paths
}

// checkAll reads every file through the mount and compares it with the
// source.
func checkAll(t *testing.T, src, mnt string, paths []string) {
	t.Helper()
	for _, p := range paths {
		want, err := os.ReadFile(filepath.Join(src, p))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(mnt, p))
		if err != nil {
			t.Fatalf("read %s through the mount: %v", p, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes through the mount differ from the source's %d", p, len(got), len(want))
		}
	}
}
