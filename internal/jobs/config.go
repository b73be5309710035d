package jobs

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/epochfs/epochfs/internal/ctlpath"
	"github.com/epochfs/epochfs/internal/preprocess/spec"
	"github.com/epochfs/epochfs/internal/sampler"
	"github.com/epochfs/epochfs/internal/views"
)

// DefaultBatchSize is the batch size of a job whose config does not set one.
const DefaultBatchSize = 32

// MaxNameLen bounds a job name.
const MaxNameLen = 64

// Config is a job's configuration: what .epochfs/jobs/NAME/config says.
type Config struct {
	BatchSize int
	Seed      uint64
	Sampler   sampler.Kind
	// Subset holds dataset-relative path prefixes (unquoted, cleaned),
	// matched per path component; nil is every file the job's owner may
	// open.
	Subset    []string
	WorldSize int  // ranks; 1 is a job without ranks of its own
	DropLast  bool // ranks get floor(M/W) samples, not ceil(M/W)
	// View is the form of the samples in the job's batch file (the views package):
	// ViewAugmented (the default), ViewDecoded or ViewEncoded.
	View string
	// Augment is the job's own augment steps (nil: the mount's; empty:
	// none), Output its own output ("": the mount's).
	Augment []string
	Output  string
	// Cluster: the job's ranks read on several nodes, its epochs are
	// claimed in the mount's cluster (cluster.go).
	Cluster bool
	// Fixed: files a refresh adds do not join the job (files it removes
	// still leave it). For samplers whose dataset object lists the
	// samples: a path it does not know cannot be used.
	Fixed bool
}

// The forms of a job's batches.
const (
	ViewEncoded   = views.Encoded
	ViewDecoded   = views.Decoded
	ViewAugmented = views.Augmented
)

// DefaultConfig is a new job's config, and the value of every key a config
// document leaves out.
func DefaultConfig() Config {
	return Config{BatchSize: DefaultBatchSize, Sampler: sampler.KindODS, WorldSize: 1, View: ViewAugmented}
}

// key is one config key: how to read its value into a Config and how to
// write it back. Keys are rendered in table order; a key not given in a
// document keeps DefaultConfig's value. Add keys here (a view, augment
// steps): parsing, rendering, the error text and the docs' list follow.
// A key added after the first four is optional: it is rendered only when
// it differs from its default, so a plain job's config reads as it always
// did.
type key struct {
	name string
	// repeat: the key may be given several times (its values add up).
	repeat bool
	// optional: rendered only when its value is not the default.
	optional bool
	// want describes the values, for errors.
	want   string
	parse  func(c *Config, v string) error
	render func(c *Config) []string
}

// boolKey is an optional key whose value is true or false, kept in the
// field field points to.
func boolKey(name string, field func(*Config) *bool) key {
	return key{name: name, optional: true, want: "true or false",
		parse: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errBadValue
			}
			*field(c) = b
			return nil
		},
		render: func(c *Config) []string { return []string{strconv.FormatBool(*field(c))} }}
}

var keys = []key{
	{name: "batch_size", want: fmt.Sprintf("an integer in 1..%d", sampler.MaxBatchSize),
		parse: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > sampler.MaxBatchSize {
				return errBadValue
			}
			c.BatchSize = n
			return nil
		},
		render: func(c *Config) []string { return []string{strconv.Itoa(c.BatchSize)} }},
	{name: "seed", want: "an unsigned 64-bit integer",
		parse: func(c *Config, v string) error {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return errBadValue
			}
			c.Seed = n
			return nil
		},
		render: func(c *Config) []string { return []string{strconv.FormatUint(c.Seed, 10)} }},
	{name: "sampler", want: kindNames(),
		parse: func(c *Config, v string) error {
			for _, k := range sampler.Kinds() {
				if v == k.String() {
					c.Sampler = k
					return nil
				}
			}
			return errBadValue
		},
		render: func(c *Config) []string { return []string{c.Sampler.String()} }},
	{name: "subset", repeat: true, want: "a dataset-relative path (quoted when it is not a plain line) without .. or NUL, or all",
		parse: parseSubset,
		render: func(c *Config) []string {
			if len(c.Subset) == 0 {
				return []string{"all"}
			}
			out := make([]string, len(c.Subset))
			for i, p := range c.Subset {
				if out[i] = ctlpath.Quote(p); p == "all" {
					out[i] = `"all"` // the file, not the keyword
				}
			}
			return out
		}},
	{name: "world_size", optional: true, want: fmt.Sprintf("an integer in 1..%d", sampler.MaxWorldSize),
		parse: func(c *Config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > sampler.MaxWorldSize {
				return errBadValue
			}
			c.WorldSize = n
			return nil
		},
		render: func(c *Config) []string { return []string{strconv.Itoa(c.WorldSize)} }},
	boolKey("drop_last", func(c *Config) *bool { return &c.DropLast }),
	{name: "view", optional: true, want: "encoded, decoded or augmented",
		parse: func(c *Config, v string) error {
			switch v {
			case ViewEncoded, ViewDecoded, ViewAugmented:
				c.View = v
				return nil
			}
			return errBadValue
		},
		render: func(c *Config) []string { return []string{c.View} }},
	{name: "augment", optional: true, want: "augment steps separated by commas (random_resized_crop:224,hflip:0.5), none, or mount (the mount's)",
		parse: func(c *Config, v string) error {
			switch v {
			case "mount":
				c.Augment = nil
				return nil
			case "none":
				c.Augment = []string{}
				return nil
			}
			steps := splitSteps(v)
			if _, err := spec.ParseList("augment", steps, true); err != nil {
				return err
			}
			c.Augment = steps
			return nil
		},
		render: func(c *Config) []string {
			switch {
			case c.Augment == nil:
				return []string{"mount"}
			case len(c.Augment) == 0:
				return []string{"none"}
			}
			return []string{strings.Join(c.Augment, ",")}
		}},
	{name: "output", optional: true, want: "uint8_hwc, float32_chw, or mount (the mount's)",
		parse: func(c *Config, v string) error {
			switch v {
			case "mount":
				c.Output = ""
			case spec.OutputUint8HWC, spec.OutputFloat32CHW:
				c.Output = v
			default:
				return errBadValue
			}
			return nil
		},
		render: func(c *Config) []string {
			if c.Output == "" {
				return []string{"mount"}
			}
			return []string{c.Output}
		}},
	boolKey("cluster", func(c *Config) *bool { return &c.Cluster }),
	boolKey("fixed", func(c *Config) *bool { return &c.Fixed }),
}

// splitSteps splits augment steps at the commas between them: a step's
// own options (random_resized_crop:224,scale=0.5-1) stay with it.
func splitSteps(v string) []string {
	var out []string
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if len(out) > 0 && strings.Contains(part, "=") && !strings.Contains(part, ":") {
			out[len(out)-1] += "," + part
			continue
		}
		out = append(out, part)
	}
	return out
}

// errBadValue makes the parser name the key, the value and what the key
// wants. Other errors of a key's parse are added to that.
var errBadValue = errors.New("jobs: bad value")

func kindNames() string {
	var names []string
	for _, k := range sampler.Kinds() {
		names = append(names, k.String())
	}
	return strings.Join(names, ", ")
}

func keyNames() string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.name
	}
	return strings.Join(names, ", ")
}

// subsetAll marks a document that said subset=all.
const subsetAll = "\x00all"

func parseSubset(c *Config, v string) error {
	if v == "all" {
		c.Subset = append(c.Subset, subsetAll)
		return nil
	}
	p, err := ctlpath.Unquote(v)
	if err != nil {
		return err
	}
	if strings.IndexByte(p, 0) >= 0 || hasDotDot(p) {
		return errBadValue
	}
	p = strings.Trim(p, "/")
	if p != "" {
		p = strings.TrimPrefix(path.Clean("/"+p), "/")
	}
	if p == "" {
		p = subsetAll // the dataset's root
	}
	c.Subset = append(c.Subset, p)
	return nil
}

func hasDotDot(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return true
		}
	}
	return false
}

// ParseConfig reads a config document: key=value lines, blank lines and #
// comments ignored, spaces around keys and values trimmed. A key not given
// keeps DefaultConfig's value. Unknown keys, keys given twice (but
// subset), lines without '=' and bad values are errors (wrapping
// ErrInvalid) that name the line, the key and the value.
func ParseConfig(doc []byte) (Config, error) {
	p := NewConfigParser()
	for _, raw := range bytes.Split(doc, []byte("\n")) {
		if _, err := p.Line(raw); err != nil {
			return Config{}, err
		}
	}
	return p.Config(), nil
}

// A ConfigParser reads a config document a line at a time, each line
// once, as ParseConfig reads a whole one: a document written in many
// writes is parsed once, not once per write.
type ConfigParser struct {
	c       Config
	subsets map[string]bool // the subset prefixes given (parsed)
	seen    map[string]bool
	n       int // lines so far
	keys    int // key=value lines so far
}

// NewConfigParser starts a document.
func NewConfigParser() *ConfigParser {
	return &ConfigParser{c: DefaultConfig(), seen: map[string]bool{}, subsets: map[string]bool{}}
}

// Line takes the document's next line (without its newline). It returns
// the subset prefix the line adds, if any ("" otherwise, and for
// subset=all), for the caller to check that it names a file.
func (p *ConfigParser) Line(raw []byte) (subset string, err error) {
	p.n++
	line := strings.TrimSpace(string(raw))
	if line == "" || line[0] == '#' {
		return "", nil
	}
	name, val, ok := strings.Cut(line, "=")
	if !ok {
		return "", fmt.Errorf("%w: line %d: %q is not key=value", ErrInvalid, p.n, clip(line))
	}
	name, val = strings.TrimSpace(name), strings.TrimSpace(val)
	k := lookupKey(name)
	if k == nil {
		return "", fmt.Errorf("%w: line %d: unknown key %q (want %s)", ErrInvalid, p.n, clip(name), keyNames())
	}
	if p.seen[name] && !k.repeat {
		return "", fmt.Errorf("%w: line %d: %s given twice", ErrInvalid, p.n, name)
	}
	p.seen[name] = true
	before := len(p.c.Subset)
	if name == "subset" {
		// A prefix given twice is one prefix (each is resolved against
		// the dataset once), kept in the order first given.
		var one Config
		if err := parseSubset(&one, val); err == nil && p.subsets[one.Subset[0]] {
			return "", nil // changes nothing
		}
	}
	if err := k.parse(&p.c, val); err != nil {
		if err == errBadValue {
			return "", fmt.Errorf("%w: line %d: %s=%q: want %s", ErrInvalid, p.n, name, clip(val), k.want)
		}
		return "", fmt.Errorf("%w: line %d: %s=%q: %w", ErrInvalid, p.n, name, clip(val), err)
	}
	p.keys++
	if len(p.c.Subset) > before {
		pre := p.c.Subset[before]
		p.subsets[pre] = true
		if pre != subsetAll {
			return pre, nil
		}
	}
	return "", nil
}

// Keys is the number of key=value lines so far that changed the config
// (a subset prefix given again does not).
func (p *ConfigParser) Keys() int { return p.keys }

// Config is the document's config so far.
func (p *ConfigParser) Config() Config {
	c := p.c
	c.Subset = slices.Clone(c.Subset)
	c.Augment = slices.Clone(c.Augment)
	// subset=all, anywhere, is every file.
	if slices.Contains(c.Subset, subsetAll) {
		c.Subset = nil
	}
	return c
}

func lookupKey(name string) *key {
	for i := range keys {
		if keys[i].name == name {
			return &keys[i]
		}
	}
	return nil
}

// Format renders c as ParseConfig's input, in table order: every key but
// the optional ones at their default.
func (c Config) Format() []byte {
	var b bytes.Buffer
	def := DefaultConfig()
	for _, k := range keys {
		vals := k.render(&c)
		if k.optional && slices.Equal(vals, k.render(&def)) {
			continue
		}
		for _, v := range vals {
			b.WriteString(k.name)
			b.WriteByte('=')
			b.WriteString(v)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// CheckName validates a job name: 1..64 of [A-Za-z0-9._-], not "." or "..".
func CheckName(name string) error {
	ok := name != "" && len(name) <= MaxNameLen && name != "." && name != ".."
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	if !ok {
		return fmt.Errorf("%w: job name %q: want 1-%d letters, digits, '.', '_' or '-' (not \".\" or \"..\")", ErrInvalid, clip(name), MaxNameLen)
	}
	return nil
}

// clip shortens a value quoted in an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
