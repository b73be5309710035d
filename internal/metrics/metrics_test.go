package metrics

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/status"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape fetches addr's /metrics and parses it as Prometheus does.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %s: %s", resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value returns the value of the sample of fam whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	for _, m := range f.Metric {
		if !hasLabels(m, want) {
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
	t.Fatalf("no sample of %s with labels %v", name, want)
	return 0
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.Label {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// testStatus is a mount's status as the daemon builds it: typed fields,
// a version that reads as a number among them.
func testStatus() *status.Doc {
	d := status.New()
	d.Text("version", "1.2")
	d.Text("source", "/lustre/x")
	d.Int("pid", 42)
	d.Flag("passthrough", true, status.OnOff)
	d.Int("files_total", 10)
	d.Float("resident_pct", 50, 2)
	d.Int("source_bytes", 4096)
	d.Int("placements_queued", 3)
	d.Int("a_key_added_later", 7)
	mem := d.Under("tier.mem.")
	mem.Text("path", "/dev/shm/e")
	mem.Int("used", 1000)
	mem.Int("errors", 2)
	mem.Flag("healthy", true, status.YesNo)
	d.Under("tier.nvme.").Int("used", 5)
	return d
}

func TestEveryStatusKeyIsExportedWithUnitsInTheNames(t *testing.T) {
	m := New(Options{
		Status: testStatus,
		Jobs: func() []Job {
			return []Job{{Name: "resnet", Owner: "alice", Status: jobStatus()}}
		},
	})
	srv, err := m.Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	m.ObserveOpen(true, 3*time.Millisecond)
	m.ObserveOpen(false, time.Second) // not resident: not timed
	m.ObserveSourceRead(1<<20, 40*time.Millisecond)
	m.ObserveSourceRead(10, time.Millisecond)
	fams := scrape(t, srv.Addr())

	cases := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"epochfs_dataset_files", nil, 10},
		{"epochfs_resident_ratio", nil, 0.5},
		{"epochfs_source_read_bytes_total", nil, 4096},
		{"epochfs_placement_queue_depth", nil, 3},
		{"epochfs_passthrough", nil, 1},
		{"epochfs_a_key_added_later", nil, 7},
		{"epochfs_tier_used_bytes", map[string]string{"tier": "mem"}, 1000},
		{"epochfs_tier_used_bytes", map[string]string{"tier": "nvme"}, 5},
		{"epochfs_tier_errors_total", map[string]string{"tier": "mem"}, 2},
		{"epochfs_tier_healthy", map[string]string{"tier": "mem"}, 1},
		{"epochfs_tier_info", map[string]string{"tier": "mem", "path": "/dev/shm/e"}, 1},
		{"epochfs_info", map[string]string{"version": "1.2", "source": "/lustre/x", "pid": "42"}, 1},
		{"epochfs_job_epoch", map[string]string{"job": "resnet", "owner": "alice"}, 2},
		{"epochfs_job_batches_total", map[string]string{"job": "resnet", "owner": "alice"}, 70},
		{"epochfs_job_source_reads_total", map[string]string{"job": "resnet"}, 5},
		{"epochfs_job_epoch_reads_local_samples", map[string]string{"job": "resnet", "epoch": "1"}, 40},
		{"epochfs_job_epoch_reads_peer_samples", map[string]string{"job": "resnet", "epoch": "1"}, 7},
		{"epochfs_job_epoch_reads_local_samples", map[string]string{"job": "resnet", "epoch": "2"}, 45},
		{"epochfs_job_info", map[string]string{"job": "resnet", "sampler": "ods"}, 1},
		{"epochfs_job_last_read_timestamp_seconds", map[string]string{"job": "resnet"}, 1767323045},
		{"epochfs_resident_open_seconds", nil, 1},
		{"epochfs_source_read_seconds", nil, 2},
	}
	for _, c := range cases {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for name, f := range fams {
		if !strings.HasPrefix(name, "epochfs_") {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			if !strings.HasSuffix(name, "_total") {
				t.Errorf("counter %s does not end in _total", name)
			}
		case dto.MetricType_GAUGE:
			if strings.HasSuffix(name, "_total") {
				t.Errorf("gauge %s ends in _total", name)
			}
		}
	}
	if _, ok := fams["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}
}

func TestEveryKnownKeyHasAUniqueNameWithItsUnit(t *testing.T) {
	seen := map[string]string{}
	for _, table := range []map[string]spec{statusSpecs, tierSpecs, jobSpecs} {
		for key, s := range table {
			if s.label {
				continue
			}
			if o, dup := seen[s.name]; dup {
				t.Errorf("%s and %s share the metric name %s", key, o, s.name)
			}
			seen[s.name] = key
			if (s.kind == 1) != strings.HasSuffix(s.name, "_total") { // 1: CounterValue
				t.Errorf("%s: %s: counters and only counters end in _total", key, s.name)
			}
			if strings.Contains(key, "bytes") && !strings.Contains(s.name, "bytes") {
				t.Errorf("%s: %s: a byte count's name says bytes", key, s.name)
			}
			if s.help == "" {
				t.Errorf("%s: no help", key)
			}
		}
	}
}

func TestListenRefusesAnAddressInUse(t *testing.T) {
	m := New(Options{Status: testStatus})
	a, err := m.Listen("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if b, err := m.Listen(a.Addr(), false); err == nil {
		b.Close()
		t.Fatalf("a second listen on %s succeeded", a.Addr())
	}
	if err := a.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := http.Get("http://" + a.Addr() + "/metrics"); err == nil {
		t.Fatal("the closed server still answers")
	}
}

func TestPprofIsServedOnlyWhenAskedFor(t *testing.T) {
	m := New(Options{Status: testStatus})
	for _, on := range []bool{false, true} {
		srv, err := m.Listen("127.0.0.1:0", on)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get("http://" + srv.Addr() + "/debug/pprof/goroutine?debug=1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		got := resp.StatusCode == http.StatusOK && strings.Contains(string(body), "goroutine profile")
		if got != on {
			t.Errorf("pprof=%v: GET /debug/pprof/goroutine: %d %.60q", on, resp.StatusCode, body)
		}
	}
}

// jobStatus is a job's status as the jobs manager builds it.
func jobStatus() *status.Doc {
	d := status.New()
	d.Text("name", "resnet")
	d.Text("sampler", "ods")
	d.Int("batch_size", 32)
	d.Int("epoch", 2)
	d.Int("position", 64)
	d.Int("batches", 70)
	d.Int("source_reads", 5)
	d.Int("epoch.1.reads_local", 40)
	d.Int("epoch.1.reads_peer", 7)
	d.Int("epoch.2.reads_local", 45)
	d.Time("last_read", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.RFC3339Nano, "never")
	return d
}
