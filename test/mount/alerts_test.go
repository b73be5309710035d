package mount

// The alert rules and the dashboard of contrib/ against a real Prometheus
// (Debian's prometheus) scraping a live mount.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/testenv"
	"github.com/epochfs/epochfs/internal/views"
	"github.com/epochfs/epochfs/test/rediscluster"
)

// prometheus runs a Prometheus server on loopback that scrapes target
// every second in a job named "epochfs" and evaluates rules (the rules
// file's `for:` durations shortened to forSecs, so that a test need not
// wait 5 minutes). It returns the server's address; the server is
// stopped by its PID at the end of the test.
func prometheus(t *testing.T, target string, forSecs int) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		testenv.Skip(t, "no prometheus (apt-get install prometheus)")
	}
	dir := t.TempDir()
	rules, err := os.ReadFile("../../contrib/prometheus/epochfs.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	short := regexp.MustCompile(`(?m)^(\s+for: )\S+$`).ReplaceAll(rules, []byte(fmt.Sprintf("${1}%ds", forSecs)))
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), short, 0o644); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: epochfs
    static_configs: [{targets: [%q]}]
`, filepath.Join(dir, "rules.yml"), target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	var log lockedBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", log.String())
		}
	})
	waitUntil(t, 60*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return addr
}

// promAPI is the data of a Prometheus API answer.
func promAPI(t *testing.T, addr, path string, q url.Values) json.RawMessage {
	t.Helper()
	u := "http://" + addr + path
	if q != nil {
		u += "?" + q.Encode()
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		t.Fatalf("%s %v: %s %s (%v)", path, q, r.Status, r.Error, err)
	}
	return r.Data
}

// promAlerts are the alerts Prometheus holds now: name and state
// ("pending", "firing") of each.
func promAlerts(t *testing.T, addr string) [][2]string {
	var d struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := json.Unmarshal(promAPI(t, addr, "/api/v1/alerts", nil), &d); err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	for _, a := range d.Alerts {
		out = append(out, [2]string{a.Labels["alertname"], a.State})
	}
	return out
}

// alertStates are the states of the alerts named name.
func alertStates(t *testing.T, addr, name string) []string {
	var out []string
	for _, a := range promAlerts(t, addr) {
		if a[0] == name {
			out = append(out, a[1])
		}
	}
	return out
}

// firing names every alert that fires now.
func firing(t *testing.T, addr string) []string {
	var out []string
	for _, a := range promAlerts(t, addr) {
		if a[1] == "firing" {
			out = append(out, a[0])
		}
	}
	return out
}

// A mount's source taken away (its file system detached, as when a PFS
// client goes) raises EpochfsSourceUnavailable on a real Prometheus
// scraping the mount, and its return resolves it; a healthy mount raises
// no alert.
func TestPrometheusAlertsOnALiveMount(t *testing.T) {
	requireFUSE(t)
	src, paths := makeTree(t, 1<<20)
	bind := filepath.Join(t.TempDir(), "pfs")
	os.Mkdir(bind, 0o755)
	if out, err := exec.Command("mount", "--bind", src, bind).CombinedOutput(); err != nil {
		t.Fatalf("bind mount: %s", out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", bind).Run() })
	e := newEnv(t, bind, 64<<20)
	e.opts.metricsListen = "127.0.0.1:0"
	e.mount()
	checkAll(t, src, e.mnt, paths[:2])
	e.settle()
	addr := prometheus(t, e.m.MetricsAddr(), 3)
	// Healthy: scraped, and nothing fires.
	waitUntil(t, 30*time.Second, func() bool {
		var d struct {
			Result []json.RawMessage `json:"result"`
		}
		json.Unmarshal(promAPI(t, addr, "/api/v1/query", url.Values{"query": {`epochfs_info{job="epochfs", source_state="available"}`}}), &d)
		return len(d.Result) == 1
	})
	time.Sleep(5 * time.Second) // longer than every shortened for:
	if f := firing(t, addr); len(f) > 0 {
		t.Fatalf("alerts fire on a healthy mount: %v", f)
	}
	if out, err := exec.Command("umount", "-l", bind).CombinedOutput(); err != nil {
		t.Fatalf("umount -l: %s", out)
	}
	waitUntil(t, 10*time.Second, func() bool { return e.status()["source_state"] == "unavailable" })
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := alertStates(t, addr, "EpochfsSourceUnavailable")
		if len(s) == 1 && s[0] == "firing" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("EpochfsSourceUnavailable is %v a minute after the source went; Prometheus has up %s, epochfs_info %s", s,
				promAPI(t, addr, "/api/v1/query", url.Values{"query": {"up"}}),
				promAPI(t, addr, "/api/v1/query", url.Values{"query": {"epochfs_info"}}))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out, err := exec.Command("mount", "--bind", src, bind).CombinedOutput(); err != nil {
		t.Fatalf("bind mount again: %s", out)
	}
	waitUntil(t, 60*time.Second, func() bool { return len(alertStates(t, addr, "EpochfsSourceUnavailable")) == 0 })
	if f := firing(t, addr); len(f) > 0 {
		t.Fatalf("alerts still fire once the source is back: %v", f)
	}
}

// Every metric the dashboard (contrib/grafana/epochfs.json) queries is
// served by a live mount with a job, views and a peers cluster, and every
// query is one Prometheus accepts and answers from that mount.
func TestGrafanaDashboardQueriesMetricsALiveMountServes(t *testing.T) {
	requireFUSE(t)
	data, err := os.ReadFile("../../contrib/grafana/epochfs.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("contrib/grafana/epochfs.json: %v", err)
	}
	rc := rediscluster.Start(t, rediscluster.Options{})
	src := filepath.Join(t.TempDir(), "src")
	makeJPEGs(t, src, 6)
	e := peersEnv(t, rc, src, 1<<30)
	e.opts.metricsListen = "127.0.0.1:0"
	e.opts.bufferBytes = 1 << 20
	e.opts.views = &views.Config{Pipeline: viewPipeline, Seed: 3, DecodedBytes: 1 << 20, AugmentedBytes: 1 << 20}
	e.mount()
	if err := os.Mkdir(filepath.Join(e.mnt, ".epochfs", "jobs", "resnet"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(e.mnt, ".epochfs", "jobs", "resnet", "next")); err != nil {
		t.Fatal(err)
	}
	e.settle()
	served := map[string]bool{}
	for name, f := range scrapeMetrics(t, e.m.MetricsAddr()) {
		served[name] = true
		if f.GetType().String() == "HISTOGRAM" {
			served[name+"_bucket"], served[name+"_sum"], served[name+"_count"] = true, true, true
		}
	}
	addr := prometheus(t, e.m.MetricsAddr(), 300)
	waitUntil(t, 30*time.Second, func() bool {
		var d struct {
			Result []json.RawMessage `json:"result"`
		}
		json.Unmarshal(promAPI(t, addr, "/api/v1/query", url.Values{"query": {`epochfs_job_epoch{job="epochfs"}`}}), &d)
		return len(d.Result) > 0
	})
	time.Sleep(3 * time.Second) // a few scrapes, for the rates
	metric := regexp.MustCompile(`\bepochfs_[a-z0-9_]+`)
	rows, queries := 0, 0
	var missing []string
	for _, p := range dash.Panels {
		if p.Type == "row" {
			rows++
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			for _, m := range metric.FindAllString(tg.Expr, -1) {
				if !served[m] {
					missing = append(missing, fmt.Sprintf("%s (panel %q)", m, p.Title))
				}
			}
			q := strings.ReplaceAll(tg.Expr, "$instance", ".*")
			var d struct {
				Result []json.RawMessage `json:"result"`
			}
			if err := json.Unmarshal(promAPI(t, addr, "/api/v1/query", url.Values{"query": {q}}), &d); err != nil {
				t.Fatal(err)
			}
			if len(d.Result) == 0 {
				t.Errorf("panel %q: %s answers nothing from a live mount", p.Title, q)
			}
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("the dashboard queries %s, which the mount does not serve", m)
	}
	if rows < 6 || queries < 20 {
		t.Errorf("the dashboard has %d rows and %d queries, want a row per concern", rows, queries)
	}
}

// Every alert has a summary and a runbook line pointing to a heading of
// docs/admin.md.
func TestAlertRunbooksPointIntoTheAdminGuide(t *testing.T) {
	rules, err := os.ReadFile("../../contrib/prometheus/epochfs.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/admin.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, l := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " "); ok && strings.HasPrefix(l, "#") {
			anchors[strings.ToLower(strings.ReplaceAll(h, " ", "-"))] = true
		}
	}
	alerts := regexp.MustCompile(`(?m)^\s+- alert: (\w+)$`).FindAllStringSubmatch(string(rules), -1)
	runbooks := regexp.MustCompile(`(?m)^\s+runbook: "docs/admin\.md#([a-z0-9-]+):`).FindAllStringSubmatch(string(rules), -1)
	summaries := regexp.MustCompile(`(?m)^\s+summary: "`).FindAllString(string(rules), -1)
	if len(alerts) < 9 || len(runbooks) != len(alerts) || len(summaries) != len(alerts) {
		t.Fatalf("%d alerts, %d runbook lines into docs/admin.md, %d summaries: want one each per alert", len(alerts), len(runbooks), len(summaries))
	}
	for i, a := range alerts {
		if runbooks[i][1] != strings.ToLower(a[1]) || !anchors[runbooks[i][1]] {
			t.Errorf("alert %s: runbook #%s is not its heading in docs/admin.md", a[1], runbooks[i][1])
		}
	}
}
