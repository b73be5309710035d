package config

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
)

func TestMetricsListenIsOffByDefaultAndWantsAnAddress(t *testing.T) {
	if d := Default(); d.Metrics.Listen != "" {
		t.Fatalf("default metrics.listen = %q, want off", d.Metrics.Listen)
	}
	for _, ok := range []string{"127.0.0.1:9464", "[::1]:9464", "0.0.0.0:9464", "localhost:0"} {
		c, err := Parse(Default(), "[metrics]\nlisten = \""+ok+"\"\n", "t")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil || c.Metrics.Listen != ok {
			t.Errorf("listen = %q: %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		":9464":           `"127.0.0.1:9464"`,
		"9464":            "HOST:PORT",
		"127.0.0.1:http":  "port",
		"127.0.0.1:70000": "port",
	} {
		c, err := Parse(Default(), "[metrics]\nlisten = \""+bad+"\"\n", "t")
		if err != nil {
			t.Fatal(err)
		}
		err = c.Validate()
		if err == nil || !strings.Contains(err.Error(), "metrics.listen") || !strings.Contains(err.Error(), want) {
			t.Errorf("listen = %q: %v, want an error naming metrics.listen and %s", bad, err, want)
		}
	}
}

func TestMetricsPprofWantsListen(t *testing.T) {
	for text, want := range map[string]string{
		"[metrics]\npprof = true\n":                             "metrics.listen",
		"[metrics]\nlisten = \"127.0.0.1:0\"\npprof = true\n":   "",
		"[metrics]\nlisten = \"[::1]:0\"\npprof = true\n":       "",
		"[metrics]\nlisten = \"localhost:0\"\npprof = true\n":   "",
		"[metrics]\nlisten = \"0.0.0.0:9464\"\npprof = true\n":  "loopback",
		"[metrics]\nlisten = \"10.1.2.3:9464\"\npprof = true\n": "loopback",
		"[metrics]\nlisten = \"0.0.0.0:9464\"\n":                "",
	} {
		c, err := Parse(Default(), text, "t")
		if err != nil {
			t.Fatal(err)
		}
		err = c.Validate()
		if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %q", text, err, want)
		}
	}
}

// The configs we ship serve metrics (job names, owners, the source path)
// on a loopback address only.
func TestShippedConfigsServeMetricsOnLoopbackOnly(t *testing.T) {
	paths, _ := filepath.Glob("../../contrib/*/*.toml")
	if len(paths) == 0 {
		t.Fatal("no config under contrib/: the test checks nothing")
	}
	for _, p := range paths {
		c, err := Load(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if c.Metrics.Listen == "" {
			continue
		}
		host, _, err := net.SplitHostPort(c.Metrics.Listen)
		ip := net.ParseIP(host)
		if err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
			t.Errorf("%s: metrics.listen = %q, want a loopback address", p, c.Metrics.Listen)
		}
	}
}
