package sampler

import (
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Kind is a job's sampler kind.
type Kind uint8

const (
	// KindODS draws uniformly at random from the job's unseen samples and
	// replaces draws of samples nobody holds with samples in the shared
	// buffer that the job has not seen (Seneca's ODS); jobs whose subsets
	// overlap only partly draw through DSA (Joader). The default.
	KindODS Kind = iota
	// KindRandom is an independent uniformly random permutation per epoch,
	// with no substitution (PyTorch's RandomSampler).
	KindRandom
	// KindSequential is the subset in index (catalog) order every epoch.
	KindSequential
)

func (k Kind) String() string {
	switch k {
	case KindODS:
		return "ods"
	case KindRandom:
		return "random"
	case KindSequential:
		return "sequential"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ParseKind parses "ods", "random" or "sequential".
func ParseKind(s string) (Kind, error) {
	switch s {
	case "ods":
		return KindODS, nil
	case "random":
		return KindRandom, nil
	case "sequential":
		return KindSequential, nil
	}
	return 0, fmt.Errorf("%w: sampler=%q: want ods, random or sequential", ErrBadConfig, s)
}

// MaxBatchSize bounds batch_size (a batch is one read of the ctl file).
const MaxBatchSize = 1 << 20

// JobConfig is one job's configuration.
type JobConfig struct {
	// BatchSize is the number of samples per Next (the last batch of an
	// epoch may be shorter). Must be > 0.
	BatchSize int
	// Seed seeds the job's draws; with the job name and the epoch number it
	// fixes the order of a random or sequential job, and of an ODS job
	// running alone.
	Seed uint64
	// Kind is the sampler kind (KindODS by default).
	Kind Kind
	// SubsetPrefixes are the `subset=` values of the ctl config: dataset-
	// relative path prefixes, matched per path component (a file path
	// matches itself, a directory its tree). Empty means every sample. The
	// sampler does not read them: the fs layer resolves them to Subset.
	SubsetPrefixes []string
	// Subset is the job's samples as indices 0..N-1, in any order; duplicates
	// are ignored. Nil means every sample. RegisterJob rejects an empty,
	// non-nil Subset and indices out of range.
	Subset []int
}

// DefaultBatchSize is the batch size of a config that does not set one.
const DefaultBatchSize = 1

// ParseJobConfig parses the `key=value` lines of .epochfs/jobs/NAME/config:
//
//	batch_size=256         # > 0
//	seed=7                 # unsigned 64-bit
//	sampler=ods            # ods | random | sequential
//	subset=train/n01440764 # repeatable; all (or absent) = every sample
//
// Blank lines and lines starting with # are ignored; spaces around keys and
// values are trimmed. Unknown keys, repeated keys (other than subset), lines
// without '=' and bad values are errors that name the line, key and value.
func ParseJobConfig(b []byte) (JobConfig, error) {
	cfg := JobConfig{BatchSize: DefaultBatchSize}
	seen := map[string]bool{}
	all := false
	for n, line := range bytes.Split(b, []byte("\n")) {
		lineNo := n + 1
		s := strings.TrimSpace(string(line))
		if s == "" || s[0] == '#' {
			continue
		}
		key, val, ok := strings.Cut(s, "=")
		if !ok {
			return JobConfig{}, fmt.Errorf("%w: line %d: %q is not key=value", ErrBadConfig, lineNo, clip(s))
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if key != "subset" && seen[key] {
			return JobConfig{}, fmt.Errorf("%w: line %d: %s given twice", ErrBadConfig, lineNo, clip(key))
		}
		seen[key] = true
		switch key {
		case "batch_size":
			v, err := strconv.Atoi(val)
			if err != nil || v <= 0 || v > MaxBatchSize {
				return JobConfig{}, fmt.Errorf("%w: line %d: batch_size=%q: want an integer in 1..%d", ErrBadConfig, lineNo, clip(val), MaxBatchSize)
			}
			cfg.BatchSize = v
		case "seed":
			v, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				return JobConfig{}, fmt.Errorf("%w: line %d: seed=%q: want an unsigned integer", ErrBadConfig, lineNo, clip(val))
			}
			cfg.Seed = v
		case "sampler":
			k, err := ParseKind(val)
			if err != nil {
				return JobConfig{}, fmt.Errorf("%w: line %d: sampler=%q: want ods, random or sequential", ErrBadConfig, lineNo, clip(val))
			}
			cfg.Kind = k
		case "subset":
			p := cleanPrefix(val)
			switch {
			case val == "all" || p == "" || p == ".":
				all = true
			case strings.ContainsRune(val, 0) || hasDotDot(val):
				return JobConfig{}, fmt.Errorf("%w: line %d: subset=%q: want a dataset-relative path without .. or NUL", ErrBadConfig, lineNo, clip(val))
			default:
				cfg.SubsetPrefixes = append(cfg.SubsetPrefixes, p)
			}
		default:
			return JobConfig{}, fmt.Errorf("%w: line %d: unknown key %q (want batch_size, seed, sampler or subset)", ErrBadConfig, lineNo, clip(key))
		}
	}
	if all {
		cfg.SubsetPrefixes = nil
	}
	return cfg, nil
}

// Format renders cfg as ParseJobConfig's input (Subset indices are not part
// of it).
func (c JobConfig) Format() string {
	var b strings.Builder
	fmt.Fprintf(&b, "batch_size=%d\nseed=%d\nsampler=%s\n", c.BatchSize, c.Seed, c.Kind)
	if len(c.SubsetPrefixes) == 0 {
		b.WriteString("subset=all\n")
	}
	for _, p := range c.SubsetPrefixes {
		fmt.Fprintf(&b, "subset=%s\n", p)
	}
	return b.String()
}

// MatchPrefix reports whether the dataset-relative path p is in the subset
// named by prefix (per path component: "a/b" matches "a/b" and "a/b/c", not
// "a/bc"). The fs layer uses it to resolve SubsetPrefixes.
func MatchPrefix(prefix, p string) bool {
	return p == prefix || (strings.HasPrefix(p, prefix) && p[len(prefix)] == '/')
}

// cleanPrefix normalises a subset prefix: no leading, trailing or double
// slashes, no surrounding spaces.
func cleanPrefix(v string) string {
	for {
		p := strings.TrimSpace(strings.Trim(v, "/"))
		if p != "" {
			p = strings.TrimPrefix(path.Clean("/"+p), "/")
		}
		if p == v {
			return p
		}
		v = p
	}
}

func hasDotDot(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if strings.TrimSpace(c) == ".." {
			return true
		}
	}
	return false
}

// clip shortens a value quoted in an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
