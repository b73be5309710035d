package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// designExample is the config shown in DESIGN.md ("The contract / Config").
const designExample = `
source = "/lustre/datasets/imagenet"
mountpoint = "/mnt/imagenet"
state_dir = "/local/epochfs/state"      # catalog (badger) lives here

[[tier]]
name = "mem"
path = "/dev/shm/epochfs"
quota = "8GiB"

[[tier]]
name = "nvme"
path = "/local/epochfs/data"
quota = "200GiB"
min_free = "5%"

[placement]
workers = 6
source_bandwidth = "0"                  # bytes/s cap on source reads, 0 = none
validate = "once"                       # "once" (first open per mount), "open", "never"
source_timeout = "30s"                  # a source operation slower than this fails with EIO

[log]
level = "info"
format = "console"                      # or "json"
`

func mustParse(t *testing.T, text string) Config {
	t.Helper()
	cfg, err := Parse(Default(), text, "test.toml")
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, text)
	}
	return cfg
}

// wantErr fails unless err is non-nil and contains every substring.
func wantErr(t *testing.T, what string, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one containing %q", what, subs)
		return
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: error %q does not contain %q", what, err, s)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("%s: error %q spans more than one line", what, err)
	}
}

func TestParseDesignExample(t *testing.T) {
	cfg := mustParse(t, designExample)
	if cfg.Source != "/lustre/datasets/imagenet" || cfg.Mountpoint != "/mnt/imagenet" || cfg.StateDir != "/local/epochfs/state" {
		t.Errorf("paths = %q %q %q", cfg.Source, cfg.Mountpoint, cfg.StateDir)
	}
	if len(cfg.Tiers) != 2 {
		t.Fatalf("got %d tiers, want 2: %+v", len(cfg.Tiers), cfg.Tiers)
	}
	mem, nvme := cfg.Tiers[0], cfg.Tiers[1]
	if mem.Name != "mem" || mem.Path != "/dev/shm/epochfs" || mem.Quota.Bytes != 8<<30 || mem.MinFree.Raw != "" {
		t.Errorf("tier 0 = %+v", mem)
	}
	if nvme.Name != "nvme" || nvme.Path != "/local/epochfs/data" || nvme.Quota.Bytes != 200<<30 ||
		!nvme.MinFree.IsPct || nvme.MinFree.Pct != 5 {
		t.Errorf("tier 1 = %+v", nvme)
	}
	p := cfg.Placement
	if p.Workers != 6 || p.SourceBandwidth.BytesPerSec != 0 || p.SourceBandwidth.Err() != nil || p.Validate != "once" || p.SourceTimeoutDuration() != 30*time.Second || p.RefreshRate != 1000 {
		t.Errorf("placement = %+v", p)
	}
	if cfg.Log.Level != "info" || cfg.Log.Format != "console" {
		t.Errorf("log = %+v", cfg.Log)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if err := cfg.ValidateMount(); err != nil {
		t.Errorf("ValidateMount: %v", err)
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "epochfs.toml")
	if err := os.WriteFile(path, []byte(designExample), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(cfg.Tiers) != 2 || cfg.Placement.Workers != 6 {
		t.Errorf("Load = %+v", cfg)
	}

	missing := filepath.Join(t.TempDir(), "missing.toml")
	_, err = Load(missing)
	wantErr(t, "Load(missing)", err, "config", missing)

	bad := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(bad, []byte("[placement]\nwrokers = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	wantErr(t, "Load(bad)", err, bad, "placement.wrokers")
}

func TestDefaultsApplyAndValidate(t *testing.T) {
	d := Default()
	if err := d.Validate(); err != nil {
		t.Fatalf("Default().Validate: %v", err)
	}
	cfg := mustParse(t, `source = "/src"`)
	if cfg.Placement.Workers != 6 || cfg.Placement.Validate != "once" || cfg.Placement.FillAfter != 64 || cfg.Log.Level != "info" || cfg.Log.Format != "console" {
		t.Errorf("defaults not kept under a partial file: %+v", cfg)
	}
	cfg = mustParse(t, "")
	if err := cfg.Validate(); err != nil {
		t.Errorf("empty file: Validate: %v", err)
	}
	if cfg = mustParse(t, "[placement]\nfill_after = 0\n"); cfg.Placement.FillAfter != 0 || cfg.Validate() != nil {
		t.Errorf("fill_after = 0 (off) not kept: %d, %v", cfg.Placement.FillAfter, cfg.Validate())
	}
}

func TestQuotaForms(t *testing.T) {
	for _, tc := range []struct {
		quota string
		want  int64
	}{
		{`4294967296`, 4 << 30},
		{`"4294967296"`, 4 << 30},
		{`"4GiB"`, 4 << 30},
		{`"200GB"`, 200e9},
		{`1.5e6`, 1500000},
		{`"4 GiB"`, 4 << 30},
		{`"4gib"`, 4 << 30},
		{`"4G"`, 4 << 30},
		{`"2048KiB"`, 2 << 20},
	} {
		cfg := mustParse(t, "[[tier]]\nname = \"mem\"\npath = \"/dev/shm/x\"\nquota = "+tc.quota+"\n")
		if got := cfg.Tiers[0].Quota.Bytes; got != tc.want {
			t.Errorf("quota = %s: %d bytes, want %d", tc.quota, got, tc.want)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("quota = %s: Validate: %v", tc.quota, err)
		}
	}
}

func TestParseRejectsUnknownKeys(t *testing.T) {
	for _, tc := range []struct{ text, key string }{
		{"[placement]\nwrokers = 3\n", "placement.wrokers"},
		{"sourc = \"/x\"\n", "sourc"},
		{"[[tier]]\nname = \"mem\"\nnme = \"x\"\n", "tier.nme"},
		{"[log]\nlevel = \"info\"\ncolour = true\n", "log.colour"},
		{"[placment]\nworkers = 3\n", "placment"},
	} {
		base := Default()
		base.Source = "/base"
		cfg, err := Parse(base, tc.text, "node.toml")
		wantErr(t, tc.text, err, "node.toml", "unknown key", tc.key)
		if cfg.Source != "/base" || cfg.Placement.Workers != 6 {
			t.Errorf("%q: Parse returned %+v on error, want the base", tc.text, cfg)
		}
	}
}

func TestParseSyntaxAndTypeErrors(t *testing.T) {
	for _, tc := range []struct {
		text string
		subs []string
	}{
		{"source = \n", []string{"test.toml", "line 1"}},
		{"[placement]\nworkers = 1\nworkers = 2\n", []string{"test.toml", "line 3", "workers"}},
		{"[placement]\nworkers = \"six\"\n", []string{"test.toml", "placement.workers"}},
		{"[[tier]]\nname = 7\n", []string{"test.toml", "tier.name"}},
		{"source = \"/x\"\n[log x]\n", []string{"test.toml", "line 2"}},
	} {
		_, err := Parse(Default(), tc.text, "test.toml")
		wantErr(t, tc.text, err, tc.subs...)
	}
}

func TestParseTiersReplaceBase(t *testing.T) {
	base := Default()
	base.Tiers = []Tier{{Name: "flag", Path: "/flag", Quota: NewSize("1GiB")}}

	cfg, err := Parse(base, "[[tier]]\nname = \"file\"\npath = \"/file\"\nquota = \"2GiB\"\n", "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Tiers) != 1 || cfg.Tiers[0].Name != "file" {
		t.Errorf("tiers = %+v, want the file's list only", cfg.Tiers)
	}
	if len(base.Tiers) != 1 || base.Tiers[0].Name != "flag" {
		t.Errorf("Parse changed the base's tiers: %+v", base.Tiers)
	}

	cfg, err = Parse(base, "[placement]\nworkers = 2\n", "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Tiers) != 1 || cfg.Tiers[0].Name != "flag" || cfg.Placement.Workers != 2 {
		t.Errorf("a file without tiers: %+v, want the base's tiers kept", cfg)
	}
}

const tierHead = "[[tier]]\nname = \"mem\"\npath = \"/dev/shm/x\"\n"

func TestValidateErrorsNameKeyAndValue(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		subs       []string
	}{
		{"bad quota unit", tierHead + `quota = "4GB?"`, []string{`tier "mem"`, "quota", `"4GB?"`}},
		{"negative quota", tierHead + `quota = "-1GiB"`, []string{`tier "mem"`, "quota", `"-1GiB"`}},
		{"zero quota", tierHead + `quota = "0"`, []string{`tier "mem"`, "quota", `"0"`, "greater than 0"}},
		{"missing quota", tierHead, []string{`tier "mem"`, "quota", "missing"}},
		{"bad min_free", tierHead + "quota = \"1GiB\"\nmin_free = \"150%\"", []string{`tier "mem"`, "min_free", `"150%"`}},
		{"bad min_free size", tierHead + "quota = \"1GiB\"\nmin_free = \"lots\"", []string{`tier "mem"`, "min_free", `"lots"`}},
		{"relative path", "[[tier]]\nname = \"mem\"\npath = \"rel/dir\"\nquota = \"1GiB\"", []string{`tier "mem"`, "path", `"rel/dir"`, "absolute"}},
		{"missing path", "[[tier]]\nname = \"mem\"\nquota = \"1GiB\"", []string{`tier "mem"`, "path", "missing"}},
		{"missing name", "[[tier]]\npath = \"/x\"\nquota = \"1GiB\"", []string{"tier[0]", "name"}},
		{"bad name", "[[tier]]\nname = \"my tier\"\npath = \"/x\"\nquota = \"1GiB\"", []string{"tier", "name", `"my tier"`}},
		{"long name", "[[tier]]\nname = \"" + strings.Repeat("a", 33) + "\"\npath = \"/x\"\nquota = \"1GiB\"", []string{"name", strings.Repeat("a", 33)}},
		{"reserved name", "[[tier]]\nname = \"source\"\npath = \"/x\"\nquota = \"1GiB\"", []string{`tier "source"`, "reserved"}},
		{"duplicate names", tierHead + "quota = \"1GiB\"\n" + tierHead + "quota = \"2GiB\"\n", []string{`tier "mem"`, "duplicate"}},
		{"second tier bad", tierHead + "quota = \"1GiB\"\n[[tier]]\nname = \"nvme\"\npath = \"/n\"\nquota = \"x\"", []string{`tier "nvme"`, "quota", `"x"`}},
		{"validate", "[placement]\nvalidate = \"sometimes\"", []string{"placement.validate", `"sometimes"`}},
		{"validate empty", "[placement]\nvalidate = \"\"", []string{"placement.validate", `""`}},
		{"source timeout", "[placement]\nsource_timeout = \"soon\"", []string{"placement.source_timeout", `"soon"`}},
		{"source timeout bare number", "[placement]\nsource_timeout = \"30\"", []string{"placement.source_timeout", `"30"`}},
		{"source timeout too short", "[placement]\nsource_timeout = \"10ms\"", []string{"placement.source_timeout", `"10ms"`, "100ms"}},
		{"refresh rate 0", "[placement]\nrefresh_rate = 0", []string{"placement.refresh_rate", "0"}},
		{"refresh rate negative", "[placement]\nrefresh_rate = -1.5", []string{"placement.refresh_rate", "-1.5"}},
		{"workers 0", "[placement]\nworkers = 0", []string{"placement.workers", "0"}},
		{"workers negative", "[placement]\nworkers = -3", []string{"placement.workers", "-3"}},
		{"workers too many", "[placement]\nworkers = 257", []string{"placement.workers", "257"}},
		{"quota of 4 bytes without a unit", "[[tier]]\nname = \"mem\"\npath = \"/dev/shm/x\"\nquota = 4", []string{`tier "mem"`, `quota "4"`, "unit", "4GiB"}},
		{"quota under 1 MiB without a unit", "[[tier]]\nname = \"mem\"\npath = \"/dev/shm/x\"\nquota = \"1048575\"", []string{`tier "mem"`, "1048575", "unit"}},
		{"fill_after negative", "[placement]\nfill_after = -1", []string{"placement.fill_after", "-1"}},
		{"fill_after too many", "[placement]\nfill_after = 1000001", []string{"placement.fill_after", "1000001"}},
		{"bandwidth", "[placement]\nsource_bandwidth = \"fast\"", []string{"placement.source_bandwidth", `"fast"`}},
		{"bandwidth negative", "[placement]\nsource_bandwidth = -5", []string{"placement.source_bandwidth", `"-5"`}},
		{"log level", "[log]\nlevel = \"loud\"", []string{"log.level", `"loud"`}},
		{"log format", "[log]\nformat = \"xml\"", []string{"log.format", `"xml"`}},
		{"io_uring", "[fuse]\nio_uring = \"yes\"", []string{"fuse.io_uring", `"yes"`, `"auto"`}},
		{"io_uring empty", "[fuse]\nio_uring = \"\"", []string{"fuse.io_uring", `""`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, tc.text)
			wantErr(t, tc.name, cfg.Validate(), tc.subs...)
			wantErr(t, tc.name+" (ValidateMount)", withMountKeys(cfg).ValidateMount(), tc.subs...)
		})
	}
}

func withMountKeys(c Config) *Config {
	c.Source, c.Mountpoint = "/src", "/mnt"
	if len(c.Tiers) == 0 {
		c.Tiers = []Tier{{Name: "mem", Path: "/dev/shm/x", Quota: NewSize("1GiB")}}
	}
	return &c
}

func TestValidateAcceptsEdges(t *testing.T) {
	for _, text := range []string{
		"[fuse]\nio_uring = \"auto\"",
		"[fuse]\nio_uring = \"on\"",
		"[fuse]\nio_uring = \"off\"",
		"[placement]\nworkers = 1",
		"[placement]\nworkers = 256",
		"[placement]\nvalidate = \"never\"",
		"[placement]\nvalidate = \"open\"",
		"[placement]\nsource_timeout = \"100ms\"\nrefresh_rate = 1",
		"[placement]\nsource_timeout = \"24h\"\nrefresh_rate = 1000000",
		"[placement]\nsource_bandwidth = \"10Gbit/s\"",
		"[placement]\nsource_bandwidth = 500000000",
		"[log]\nlevel = \"debug\"\nformat = \"json\"",
		tierHead + "quota = 1048576\nmin_free = \"0%\"",
		tierHead + "quota = \"1GiB\"\nmin_free = \"100%\"",
		tierHead + "quota = \"1GiB\"\nmin_free = \"10GiB\"",
		"[[tier]]\nname = \"" + strings.Repeat("Z", 32) + "\"\npath = \"/a\"\nquota = \"1B\"",
		"[[tier]]\nname = \"a_b-9\"\npath = \"/a:b\"\nquota = \"1MiB\"",
	} {
		cfg := mustParse(t, text)
		if err := cfg.Validate(); err != nil {
			t.Errorf("%q: Validate: %v", text, err)
		}
	}
}

func TestValidateMountRequiresKeys(t *testing.T) {
	full := mustParse(t, designExample)
	for _, tc := range []struct {
		name string
		edit func(*Config)
		subs []string
	}{
		{"no source", func(c *Config) { c.Source = "" }, []string{"source", "missing"}},
		{"no mountpoint", func(c *Config) { c.Mountpoint = "" }, []string{"mountpoint", "missing"}},
		{"no tiers", func(c *Config) { c.Tiers = nil }, []string{"tier", "--tier"}},
	} {
		c := full
		c.Tiers = append([]Tier(nil), full.Tiers...)
		tc.edit(&c)
		wantErr(t, tc.name, c.ValidateMount(), tc.subs...)
		if err := c.Validate(); err != nil {
			t.Errorf("%s: Validate (which does not need mount keys): %v", tc.name, err)
		}
	}
}

func TestParseTierFlag(t *testing.T) {
	for _, tc := range []struct {
		in              string
		name, path, raw string
		bytes           int64
	}{
		{"mem=/dev/shm/x:4GiB", "mem", "/dev/shm/x", "4GiB", 4 << 30},
		{"nvme=/a:b/c:10GiB", "nvme", "/a:b/c", "10GiB", 10 << 30},
		{"n=/p=q:1B", "n", "/p=q", "1B", 1},
		{"ssd=/local/epochfs/data:200GB", "ssd", "/local/epochfs/data", "200GB", 200e9},
	} {
		tr, err := ParseTierFlag(tc.in)
		if err != nil {
			t.Errorf("ParseTierFlag(%q): %v", tc.in, err)
			continue
		}
		if tr.Name != tc.name || tr.Path != tc.path || tr.Quota.Raw != tc.raw || tr.Quota.Bytes != tc.bytes || tr.Quota.Err() != nil {
			t.Errorf("ParseTierFlag(%q) = %+v, want %s=%s:%s (%d bytes)", tc.in, tr, tc.name, tc.path, tc.raw, tc.bytes)
		}
		c := Default()
		c.Tiers = []Tier{tr}
		if err := c.Validate(); err != nil {
			t.Errorf("ParseTierFlag(%q) then Validate: %v", tc.in, err)
		}
	}
	for _, in := range []string{"mem", "=/x:1G", "mem=/x:", "mem=:1G", "mem=/x", ":1G", "", "mem:4G=/x", "mem=/x:1G:"} {
		tr, err := ParseTierFlag(in)
		wantErr(t, "ParseTierFlag("+in+")", err, "--tier", `"`+in+`"`, "NAME=PATH:QUOTA")
		if err == nil {
			t.Errorf("ParseTierFlag(%q) = %+v", in, tr)
		}
	}
	// A bad quota is kept and reported by Validate with the tier's name.
	tr, err := ParseTierFlag("mem=/x:4GB?")
	if err != nil {
		t.Fatalf("ParseTierFlag(mem=/x:4GB?): %v", err)
	}
	c := Config{Tiers: []Tier{tr}, Placement: Default().Placement, Log: Default().Log}
	wantErr(t, "Validate after --tier mem=/x:4GB?", c.Validate(), `tier "mem"`, "quota", `"4GB?"`)
	// A relative path given by flag is rejected too.
	tr, err = ParseTierFlag("mem=rel:1G")
	if err != nil {
		t.Fatal(err)
	}
	c.Tiers = []Tier{tr}
	wantErr(t, "Validate after --tier mem=rel:1G", c.Validate(), `tier "mem"`, "path", `"rel"`)
}

func FuzzParse(f *testing.F) {
	f.Add(designExample)
	f.Add("")
	f.Add("[placement]\nwrokers = 3\n")
	f.Add(tierHead + `quota = "4GB?"`)
	f.Add(tierHead + "quota = 4096\nmin_free = \"5%\"\n")
	f.Add("[[tier]]\nname = \"mem\"\npath = \"rel\"\nquota = 1\n[[tier]]\nname = \"mem\"\n")
	f.Add("[placement]\nvalidate = \"sometimes\"\nworkers = 0\nsource_bandwidth = \"10Gbit/s\"\n")
	f.Add("tier = []\n[log]\nlevel = \"debug\"\nformat = \"json\"\n")
	f.Add("[[tier]]\nquota = [1, {a = 2}]\nmin_free = 1979-05-27T07:32:00Z\n")
	f.Fuzz(func(t *testing.T, text string) {
		cfg, err := Parse(Default(), text, "fuzz.toml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "config fuzz.toml: ") {
				t.Errorf("Parse error %q does not start with the file name", err)
			}
			return
		}
		verr := cfg.Validate()
		merr := cfg.ValidateMount()
		if verr != nil && merr == nil {
			t.Errorf("Validate failed (%v) but ValidateMount passed", verr)
		}
		if verr == nil {
			for i, tr := range cfg.Tiers {
				if tr.Quota.Bytes <= 0 || tr.Quota.Err() != nil || !strings.HasPrefix(tr.Path, "/") {
					t.Errorf("Validate passed tier %d = %+v", i, tr)
				}
			}
			if w := cfg.Placement.Workers; w < 1 || w > 256 {
				t.Errorf("Validate passed workers = %d", w)
			}
		}
	})
}

func TestSamplerSectionDefaultsAndErrorsNameTheKey(t *testing.T) {
	cfg, err := Parse(Default(), "[sampler]\nbuffer = \"2GiB\"\nlease = \"90s\"\nlookahead = 3\n", "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Sampler.Buffer.Bytes != 2<<30 || cfg.Sampler.LeaseDuration().Seconds() != 90 || cfg.Sampler.Lookahead != 3 {
		t.Fatalf("parsed %+v", cfg.Sampler)
	}
	d := Default()
	if d.Sampler.Buffer.Bytes != 1<<30 || d.Sampler.Lease != "2m" || d.Sampler.Lookahead != 2 {
		t.Fatalf("defaults %+v", d.Sampler)
	}
	for text, key := range map[string]string{
		"buffer = \"lots\"": "sampler.buffer",
		"buffer = \"-1\"":   "sampler.buffer",
		"lease = \"soon\"":  "sampler.lease",
		"lease = \"0s\"":    "sampler.lease",
		"lookahead = 0":     "sampler.lookahead",
		"lease = \"\"":      "sampler.lease",
		"lookahead = -1":    "sampler.lookahead",
		"lookahead = 1000":  "sampler.lookahead",
	} {
		cfg, err := Parse(Default(), "[sampler]\n"+text+"\n", "t")
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: got %v, want an error naming %s", text, err, key)
		}
	}
}
