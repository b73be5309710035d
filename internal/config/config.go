// Package config is the TOML schema of epochfs, its defaults and its
// validation. Only cmd/epochfs imports it; every other package takes a plain
// Options struct of its own. Every validation error names the key and the
// bad value.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Config is one epochfs node configuration.
type Config struct {
	Source     string     `toml:"source"`
	Mountpoint string     `toml:"mountpoint"`
	StateDir   string     `toml:"state_dir"`
	Tiers      []Tier     `toml:"tier"`
	Placement  Placement  `toml:"placement"`
	Log        Log        `toml:"log"`
	Model      Model      `toml:"model"`
	Preprocess Preprocess `toml:"preprocess"`
	Sampler    Sampler    `toml:"sampler"`
	Metrics    Metrics    `toml:"metrics"`
	Cluster    Cluster    `toml:"cluster"`
	Fuse       Fuse       `toml:"fuse"`
}

// QuotaFromModel as a tier's quota gives the tier the DSI model's share of
// model.memory_budget for encoded samples (a RAM tier).
const QuotaFromModel = "model"

// minPlainQuota is the smallest quota written without a unit: "4" is far
// likelier a forgotten "GiB" than a tier of four bytes.
const minPlainQuota = 1 << 20

// Tier is one local storage tier; tiers are listed fastest first.
type Tier struct {
	Name    string    `toml:"name"`
	Path    string    `toml:"path"`
	Quota   Size      `toml:"quota"`
	MinFree SizeOrPct `toml:"min_free"`
	// RequireMount says the tier must be a file system of its own (a
	// local disk mounted there): a path on the root file system, or whose
	// parent is missing, is refused instead of created.
	RequireMount bool `toml:"require_mount"`
}

// Placement configures the background placer.
type Placement struct {
	Workers         int    `toml:"workers"`
	SourceBandwidth Rate   `toml:"source_bandwidth"`
	Validate        string `toml:"validate"` // "once", "open" or "never"
	// Walk is how a first mount walks the source in the background:
	// "stat" (each directory's entries with their attributes) or "names"
	// (every directory's names first, then the attributes).
	Walk string `toml:"walk"`
	// ValidateTTL is how long a check of a file against the source is
	// trusted by later mounts under validate = "once" (a Go duration;
	// "0s": not at all).
	ValidateTTL string `toml:"validate_ttl"`
	// SourceTimeout bounds every source operation (a Go duration).
	SourceTimeout string `toml:"source_timeout"`
	// RefreshRate bounds the source metadata operations per second of
	// `epochfs refresh` and `epochfs verify`.
	RefreshRate float64 `toml:"refresh_rate"`
	// MaxDrop is the share of the dataset's files one refresh or verify
	// (and the opens between two refreshes) may remove because the
	// source no longer has them: "N%" (default "10%").
	MaxDrop string `toml:"max_drop"`
	// MaxWarmupPerUser bounds the bytes one user other than root may
	// have waiting in warmup: a size, or a share of the tiers' quotas
	// (default "25%").
	MaxWarmupPerUser SizeOrPct `toml:"max_warmup_per_user"`
	// FillAfter is how many files of a directory tree one user reads
	// from the source, in no order, before the rest of the tree is copied
	// in the background (0: never).
	FillAfter int `toml:"fill_after"`
}

// WarmupPerUserBytes is MaxWarmupPerUser in bytes for tiers of total
// quota bytes (Validate first).
func (p *Placement) WarmupPerUserBytes(total int64) int64 {
	if p.MaxWarmupPerUser.IsPct {
		return int64(p.MaxWarmupPerUser.Pct / 100 * float64(total))
	}
	return p.MaxWarmupPerUser.Bytes
}

// MaxDropFraction is MaxDrop as a fraction (Validate first).
func (p *Placement) MaxDropFraction() float64 {
	v, _ := parseMaxDrop(p.MaxDrop)
	return v
}

// parseMaxDrop parses "N%", 0 < N <= 100.
func parseMaxDrop(s string) (float64, bool) {
	num, ok := strings.CutSuffix(strings.TrimSpace(s), "%")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || !(v > 0 && v <= 100) {
		return 0, false
	}
	return v / 100, true
}

// ValidateTTLDuration is ValidateTTL parsed (Validate first).
func (p *Placement) ValidateTTLDuration() time.Duration {
	d, _ := time.ParseDuration(p.ValidateTTL)
	return d
}

// SourceTimeoutDuration is SourceTimeout parsed (Validate first).
func (p *Placement) SourceTimeoutDuration() time.Duration {
	d, _ := time.ParseDuration(p.SourceTimeout)
	return d
}

// Log configures the daemon's logger.
type Log struct {
	Level  string `toml:"level"`  // debug, info, warn, error
	Format string `toml:"format"` // console or json
}

// Default returns the configuration used when no file is given.
func Default() Config {
	return Config{
		Placement: Placement{
			Workers:          6,
			SourceBandwidth:  NewRate("0"),
			Validate:         "once",
			Walk:             "names",
			ValidateTTL:      "24h",
			SourceTimeout:    "30s",
			RefreshRate:      1000,
			MaxDrop:          "10%",
			MaxWarmupPerUser: NewSizeOrPct("25%"),
			FillAfter:        64,
		},
		Log:        Log{Level: "info", Format: "console"},
		Model:      DefaultModel(),
		Preprocess: DefaultPreprocess(),
		Sampler:    DefaultSampler(),
		Fuse:       DefaultFuse(),
	}
}

// Load reads a TOML file over the defaults. Unknown keys are an error.
func Load(path string) (Config, error) {
	cfg := Default()
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	return Parse(cfg, string(data), path)
}

// Parse decodes TOML text over base. name is used in error messages.
func Parse(base Config, text, name string) (Config, error) {
	cfg := base
	// Tiers in a file replace, not extend, the base list.
	cfg.Tiers = nil
	md, err := toml.Decode(text, &cfg)
	if err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return base, fmt.Errorf("config %s: line %d: %s", name, perr.Position.Line, oneLine(perr.Message))
		}
		return base, fmt.Errorf("config %s: %s", name, oneLine(err.Error()))
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return base, fmt.Errorf("config %s: unknown key %s", name, strings.Join(keys, ", "))
	}
	if !md.IsDefined("tier") {
		cfg.Tiers = base.Tiers
	}
	return cfg, nil
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

var tierName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)

// ParseTierFlag parses --tier NAME=PATH:QUOTA.
func ParseTierFlag(s string) (Tier, error) {
	eq := strings.IndexByte(s, '=')
	colon := strings.LastIndexByte(s, ':')
	if eq <= 0 || colon < eq+2 || colon == len(s)-1 {
		return Tier{}, fmt.Errorf("--tier %q: want NAME=PATH:QUOTA, e.g. mem=/dev/shm/epochfs:4GiB", s)
	}
	return Tier{Name: s[:eq], Path: s[eq+1 : colon], Quota: NewSize(s[colon+1:])}, nil
}

// ValidateMount checks the keys a mount needs. It does not touch the disk;
// the mount command checks paths.
func (c *Config) ValidateMount() error {
	if c.Source == "" {
		return fmt.Errorf("source: missing (give SOURCE or set source in the config)")
	}
	if c.Mountpoint == "" {
		return fmt.Errorf("mountpoint: missing (give MOUNTPOINT or set mountpoint in the config)")
	}
	if len(c.Tiers) == 0 {
		return fmt.Errorf("tier: none configured (give --tier NAME=PATH:QUOTA or a [[tier]] table)")
	}
	return c.Validate()
}

// Validate checks every key that is set.
//
// Long: one check per key, in the file's order, so each error names its key.
func (c *Config) Validate() error {
	seen := map[string]bool{}
	fromModel := 0
	for i, t := range c.Tiers {
		key := fmt.Sprintf("tier[%d]", i)
		if t.Name != "" {
			key = fmt.Sprintf("tier %q", t.Name)
		}
		if !tierName.MatchString(t.Name) {
			return fmt.Errorf("%s: name %q: want 1-32 letters, digits, '-' or '_'", key, t.Name)
		}
		if t.Name == "source" {
			return fmt.Errorf("%s: name %q is reserved", key, t.Name)
		}
		if seen[t.Name] {
			return fmt.Errorf("tier %q: duplicate tier name", t.Name)
		}
		seen[t.Name] = true
		if t.Path == "" {
			return fmt.Errorf("%s: path: missing", key)
		}
		if !filepath.IsAbs(t.Path) {
			return fmt.Errorf("%s: path %q: must be absolute", key, t.Path)
		}
		if t.Quota.Raw == QuotaFromModel {
			if fromModel++; fromModel > 1 {
				return fmt.Errorf("%s: quota = %q: only one tier can take the model's encoded share", key, QuotaFromModel)
			}
			if c.Model.MemoryBudget.Raw == "" {
				return fmt.Errorf("%s: quota = %q: needs model.memory_budget (the model splits it between this tier and the caches)", key, QuotaFromModel)
			}
		} else {
			if t.Quota.Raw == "" {
				return fmt.Errorf("%s: quota: missing (e.g. quota = \"4GiB\")", key)
			}
			if err := t.Quota.Err(); err != nil {
				return fmt.Errorf("%s: quota: %w", key, err)
			}
			if t.Quota.Bytes <= 0 {
				return fmt.Errorf("%s: quota %q: must be greater than 0", key, t.Quota.Raw)
			}
			if _, unit := splitNumber(strings.TrimSpace(t.Quota.Raw)); unit == "" && t.Quota.Bytes < minPlainQuota {
				return fmt.Errorf("%s: quota %q: %d bytes; write the unit (e.g. \"%sGiB\"): a quota without a unit is bytes and must be at least 1 MiB", key, t.Quota.Raw, t.Quota.Bytes, strings.TrimSpace(t.Quota.Raw))
			}
		}
		if t.MinFree.Raw != "" {
			if err := t.MinFree.Err(); err != nil {
				return fmt.Errorf("%s: min_free: %w", key, err)
			}
		}
	}
	p := c.Placement
	if p.Workers < 1 || p.Workers > 256 {
		return fmt.Errorf("placement.workers = %d: want 1 to 256", p.Workers)
	}
	if p.FillAfter < 0 || p.FillAfter > 1000000 {
		return fmt.Errorf("placement.fill_after = %d: want 0 (never) to 1000000 files", p.FillAfter)
	}
	if err := p.SourceBandwidth.Err(); err != nil {
		return fmt.Errorf("placement.source_bandwidth: %w", err)
	}
	switch p.Validate {
	case "once", "open", "never":
	default:
		return fmt.Errorf("placement.validate = %q: want \"once\", \"open\" or \"never\"", p.Validate)
	}
	switch p.Walk {
	case "stat", "names":
	default:
		return fmt.Errorf("placement.walk = %q: want \"stat\" or \"names\"", p.Walk)
	}
	if d, err := time.ParseDuration(p.ValidateTTL); err != nil {
		return fmt.Errorf("placement.validate_ttl = %q: want a duration such as \"24h\" or \"0s\"", p.ValidateTTL)
	} else if d < 0 || d > 8760*time.Hour {
		return fmt.Errorf("placement.validate_ttl = %q: want 0s to 8760h (a year)", p.ValidateTTL)
	}
	if d, err := time.ParseDuration(p.SourceTimeout); err != nil {
		return fmt.Errorf("placement.source_timeout = %q: want a duration such as \"30s\" or \"2m\"", p.SourceTimeout)
	} else if d < 100*time.Millisecond || d > 24*time.Hour {
		return fmt.Errorf("placement.source_timeout = %q: want 100ms to 24h", p.SourceTimeout)
	}
	if !(p.RefreshRate >= 1 && p.RefreshRate <= 1e6) {
		return fmt.Errorf("placement.refresh_rate = %g: want 1 to 1000000 operations per second", p.RefreshRate)
	}
	if err := p.MaxWarmupPerUser.Err(); err != nil || p.MaxWarmupPerUser.Raw == "" {
		return fmt.Errorf("placement.max_warmup_per_user = %q: want a size such as \"100GiB\" or a share of the tiers' quotas such as \"25%%\"", p.MaxWarmupPerUser.Raw)
	}
	if _, ok := parseMaxDrop(p.MaxDrop); !ok {
		return fmt.Errorf("placement.max_drop = %q: want a share of the dataset's files such as \"10%%\" (above 0%%, at most 100%%)", p.MaxDrop)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log.level = %q: want debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "console", "json":
	default:
		return fmt.Errorf("log.format = %q: want \"console\" or \"json\"", c.Log.Format)
	}
	if err := c.Model.Validate(); err != nil {
		return err
	}
	if err := c.Preprocess.Validate(); err != nil {
		return err
	}
	if err := c.Metrics.Validate(); err != nil {
		return err
	}
	if err := c.Cluster.Validate(); err != nil {
		return err
	}
	if err := c.Fuse.Validate(); err != nil {
		return err
	}
	return c.Sampler.Validate()
}
