package mount

// The daemon's faces to operators: systemd readiness and Prometheus
// metrics.

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/epochfs/epochfs/internal/testenv"
)

// A fake systemd: a datagram socket at NOTIFY_SOCKET, as sd_notify(3)
// speaks to it.
func TestForegroundMountNotifiesSystemdOnceTheMountAnswers(t *testing.T) {
	src, paths, base, mnt := binDirs(t, 1<<10)
	sock := filepath.Join(base, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cmd := exec.Command(binPath, "mount", "--foreground", "--state", filepath.Join(base, "state"),
		"--tier=mem="+filepath.Join(base, "tier")+":1GiB", src, mnt)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	var log lockedBuffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	t.Cleanup(func() {
		if !exited {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if mounted(mnt) {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	read := func() string {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(60 * time.Second)) // liveness bound
		buf := make([]byte, 4096)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no notification: %v\n%s", err, log.String())
		}
		return string(buf[:n])
	}
	msg := read()
	fields := strings.Split(msg, "\n")
	if fields[0] != "READY=1" {
		t.Fatalf("first notification %q, want READY=1 first", msg)
	}
	if !strings.Contains(msg, "MAINPID="+strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("notification %q lacks MAINPID=%d", msg, cmd.Process.Pid)
	}
	// Ready means the mount answers now, not soon.
	if !mounted(mnt) {
		t.Fatal("READY=1 before the mount is in /proc/mounts")
	}
	checkAll(t, src, mnt, paths)
	cmd.Process.Signal(syscall.SIGTERM)
	if msg := read(); !strings.HasPrefix(msg, "STOPPING=1") {
		t.Fatalf("notification at SIGTERM %q, want STOPPING=1", msg)
	}
	err = cmd.Wait()
	exited = true
	if err != nil || mounted(mnt) {
		t.Fatalf("daemon exit after SIGTERM: %v, mounted %v\n%s", err, mounted(mnt), log.String())
	}
}

// The daemon started by `epochfs mount` (not --foreground) is not the
// unit's main process: only the command would notify, and it exits.
func TestBackgroundMountDoesNotNotifyFromTheDaemon(t *testing.T) {
	src, _, base, mnt := binDirs(t, 1<<10)
	sock := filepath.Join(base, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cmd := exec.Command(binPath, "mount", "--state", filepath.Join(base, "state"),
		"--tier=mem="+filepath.Join(base, "tier")+":1GiB", src, mnt)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	defer cli(t, "unmount", mnt)
	conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if n, err := conn.Read(make([]byte, 4096)); err == nil {
		t.Fatalf("the background daemon sent a notification (%d bytes)", n)
	}
}

// scrapeMetrics fetches /metrics and parses it with Prometheus's parser.
func scrapeMetrics(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// sample is the value of name's sample whose labels include want (-1 if
// there is none); a histogram's is its count.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
	for _, m := range f.Metric {
		if !labelsInclude(m, want) {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

func labelsInclude(m *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.Label {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func TestMetricsEndpointExportsEveryStatusCounterTiersJobsAndReadLatencies(t *testing.T) {
	src, paths := makeTree(t, 1<<20)
	e := newEnv(t, src, 1<<30)
	e.opts.metricsListen = "127.0.0.1:0"
	e.opts.bufferBytes = 1 << 20
	e.mount()
	addr := e.m.MetricsAddr()
	if addr == "" || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("metrics address %q, want one on 127.0.0.1", addr)
	}
	checkAll(t, src, e.mnt, paths) // source reads, copies
	e.settle()
	checkAll(t, src, e.mnt, paths) // resident opens
	if err := os.Mkdir(filepath.Join(e.mnt, ".epochfs", "jobs", "resnet"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(e.mnt, ".epochfs", "jobs", "resnet", "next")); err != nil {
		t.Fatal(err)
	}
	fams := scrapeMetrics(t, addr)

	// Every numeric status key is a metric: read the status after the
	// scrape, and find each key's value among the metrics.
	st := e.status()
	if got := sample(fams, "epochfs_dataset_files", nil); strconv.FormatFloat(got, 'f', -1, 64) != st["files_total"] {
		t.Errorf("epochfs_dataset_files = %v, status files_total = %s", got, st["files_total"])
	}
	if got := sample(fams, "epochfs_source_read_bytes_total", nil); strconv.FormatFloat(got, 'f', -1, 64) != st["source_bytes"] {
		t.Errorf("epochfs_source_read_bytes_total = %v, status source_bytes = %s", got, st["source_bytes"])
	}
	exported := 0
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "epochfs_") {
			exported += len(f.Metric)
		}
	}
	numeric := 0
	data, _ := os.ReadFile(filepath.Join(e.mnt, ".epochfs", "stats.json"))
	for _, l := range strings.Split(strings.Trim(string(data), "{}\n"), ",") {
		if _, v, ok := strings.Cut(l, ":"); ok && !strings.HasPrefix(v, `"`) {
			numeric++
		}
	}
	if exported < numeric {
		t.Errorf("%d epochfs samples for %d numeric status keys", exported, numeric)
	}
	checks := []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"epochfs_placement_queue_depth", nil, 0},
		{"epochfs_placements_done_total", nil, float64(len(paths)) - 1}, // the empty file is not copied
		{"epochfs_tier_used_bytes", map[string]string{"tier": "t0"}, 1},
		{"epochfs_tier_quota_bytes", map[string]string{"tier": "t0"}, 1 << 30},
		{"epochfs_tier_healthy", map[string]string{"tier": "t0"}, 1},
		{"epochfs_tier_info", map[string]string{"tier": "t0", "path": e.tiers[0].dir}, 1},
		{"epochfs_info", map[string]string{"source": src, "mountpoint": e.mnt, "version": "test"}, 1},
		{"epochfs_job_batches_total", map[string]string{"job": "resnet", "owner": "root"}, 1},
		{"epochfs_job_epoch", map[string]string{"job": "resnet", "owner": "root"}, 1},
		{"epochfs_resident_open_seconds", nil, float64(len(paths)) - 1},
		{"epochfs_source_read_seconds", nil, 1},
		{"go_goroutines", nil, 1},
	}
	for _, c := range checks {
		if got := sample(fams, c.name, c.labels); got < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, got, c.min)
		}
	}
	if t.Failed() {
		var b bytes.Buffer
		for n := range fams {
			if strings.HasPrefix(n, "epochfs_") {
				b.WriteString(n + " ")
			}
		}
		t.Logf("metrics: %s", b.String())
	}
	e.unmount()
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Fatal("the metrics endpoint answers after the mount is gone")
	}
}

// The template in contrib/systemd (and docs/admin.md) is one systemd
// accepts for an instance, with this binary in place of /usr/bin/epochfs
// (test/slurm/run.sh runs its lines under Slurm).
func TestSystemdTemplateVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		testenv.Skip(t, "no systemd-analyze (apt-get install systemd)")
	}
	unit, err := os.ReadFile("../../contrib/systemd/epochfs@.service")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(unit, []byte("Type=notify")) || !bytes.Contains(unit, []byte("mount --foreground --keep --config /etc/epochfs/%i.toml")) {
		t.Fatal("the template does not run `epochfs mount --foreground --keep` of /etc/epochfs/%i.toml as Type=notify")
	}
	doc, err := os.ReadFile("../../docs/admin.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(unit), "\n") {
		if strings.HasPrefix(l, "ExecStart=") && !bytes.Contains(doc, []byte(l)) {
			t.Errorf("docs/admin.md does not show the template's %s", l)
		}
	}
	dir := t.TempDir()
	unit = bytes.ReplaceAll(unit, []byte("/usr/bin/epochfs"), []byte(binPath))
	unit = bytes.ReplaceAll(unit, []byte("/etc/epochfs/"), []byte(dir+"/"))
	if err := os.WriteFile(filepath.Join(dir, "epochfs@.service"), unit, 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "imagenet.toml"), nil, 0o644)
	verify := func() ([]byte, error) {
		cmd := exec.Command(analyze, "verify", "--man=no", "epochfs@imagenet.service")
		cmd.Env = append(os.Environ(), "SYSTEMD_UNIT_PATH="+dir+":")
		return cmd.CombinedOutput()
	}
	if out, err := verify(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// A unit that is not one fails (the check can fail).
	os.WriteFile(filepath.Join(dir, "epochfs@.service"), bytes.ReplaceAll(unit, []byte("Type=notify"), []byte("Type=notifyy")), 0o644)
	if out, err := verify(); err == nil && len(bytes.TrimSpace(out)) == 0 {
		t.Fatal("systemd-analyze verify accepted Type=notifyy")
	}
}
