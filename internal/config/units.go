package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a byte count written as a plain number ("4294967296") or with a
// unit ("4GiB", "500MB", "64k"). Binary units (KiB, MiB, GiB, TiB) are powers
// of 1024; decimal units (kB, MB, GB, TB) are powers of 1000.
type Size struct {
	Raw   string // as written, for error messages and display
	Bytes int64
	err   error
}

// Rate is a bandwidth in bytes per second, written as a plain number of
// bytes/s ("500000000") or with a unit ("500MB/s", "10Gbit/s", "1GiB/s").
type Rate struct {
	Raw         string
	BytesPerSec float64
	err         error
}

// SizeOrPct is a byte count or a percentage of a file system ("5%").
type SizeOrPct struct {
	Raw   string
	Bytes int64
	Pct   float64 // 0..100; used when IsPct
	IsPct bool
	err   error
}

var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1e3, "kib": 1 << 10,
	"m": 1 << 20, "mb": 1e6, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1e9, "gib": 1 << 30,
	"t": 1 << 40, "tb": 1e12, "tib": 1 << 40,
	"p": 1 << 50, "pb": 1e15, "pib": 1 << 50,
}

// ParseSize parses a byte count such as "4GiB", "200GB", "4096" or "0".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty size")
	}
	num, unit := splitNumber(t)
	if num == "" {
		return 0, fmt.Errorf("bad size %q: want a number with an optional unit such as 4GiB", s)
	}
	mul, ok := sizeUnits[strings.ToLower(strings.TrimSpace(unit))]
	if !ok {
		return 0, fmt.Errorf("bad size %q: unknown unit %q (use B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)", s, unit)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("bad size %q: %q is not a number", s, num)
	}
	if v < 0 {
		return 0, fmt.Errorf("bad size %q: negative", s)
	}
	b := v * mul
	if b > math.MaxInt64/2 {
		return 0, fmt.Errorf("bad size %q: too large", s)
	}
	return int64(b), nil
}

// ParseRate parses a bandwidth such as "500MB/s", "10Gbit/s", "1GiB/s" or a
// plain number of bytes per second.
func ParseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty rate")
	}
	num, unit := splitNumber(t)
	if num == "" {
		return 0, fmt.Errorf("bad rate %q: want a number with an optional unit such as 500MB/s", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("bad rate %q: %q is not a number", s, num)
	}
	if v < 0 {
		return 0, fmt.Errorf("bad rate %q: negative", s)
	}
	raw := strings.TrimSpace(unit)
	u := strings.ToLower(raw)
	u = strings.TrimSuffix(u, "/s")
	bits := false
	switch {
	case strings.HasSuffix(raw, "bps"):
		// Mbps, Gbps: a lower-case b before "ps" is bits (MBps is bytes).
		bits = true
		u = strings.TrimSuffix(u, "bps")
	case strings.HasSuffix(u, "ps"):
		u = strings.TrimSuffix(u, "ps")
	}
	switch {
	case bits:
	case strings.HasSuffix(u, "bit"):
		bits = true
		u = strings.TrimSuffix(u, "bit")
	case strings.HasSuffix(u, "bits"):
		bits = true
		u = strings.TrimSuffix(u, "bits")
	}
	var mul float64
	if bits {
		m, ok := map[string]float64{"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30}[u]
		if !ok {
			return 0, fmt.Errorf("bad rate %q: unknown unit %q", s, unit)
		}
		mul = m / 8
	} else {
		m, ok := sizeUnits[u]
		if !ok {
			return 0, fmt.Errorf("bad rate %q: unknown unit %q (use e.g. MB/s, GiB/s, Gbit/s)", s, unit)
		}
		mul = m
	}
	r := v * mul
	if math.IsInf(r, 0) || r > 1e18 {
		return 0, fmt.Errorf("bad rate %q: too large", s)
	}
	return r, nil
}

// splitNumber splits "4.5GiB" into "4.5" and "GiB", and "1.5e-3MB" into
// "1.5e-3" and "MB".
func splitNumber(s string) (num, unit string) {
	isDigit := func(c byte) bool { return c >= '0' && c <= '9' }
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isDigit(c) || c == '.':
		case (c == '-' || c == '+') && (i == 0 || s[i-1] == 'e' || s[i-1] == 'E'):
		case (c == 'e' || c == 'E') && i > 0 && i+1 < len(s) && (isDigit(s[i+1]) || s[i+1] == '-' || s[i+1] == '+'):
		default:
			return s[:i], s[i:]
		}
	}
	return s, ""
}

// NewSize parses s; a bad value is kept and reported by Validate.
func NewSize(s string) Size {
	b, err := ParseSize(s)
	return Size{Raw: s, Bytes: b, err: err}
}

// NewRate parses s; a bad value is kept and reported by Validate.
func NewRate(s string) Rate {
	r, err := ParseRate(s)
	return Rate{Raw: s, BytesPerSec: r, err: err}
}

// NewSizeOrPct parses "5%" or a byte count.
func NewSizeOrPct(s string) SizeOrPct {
	t := strings.TrimSpace(s)
	if strings.HasSuffix(t, "%") {
		v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(t, "%")), 64)
		if err != nil || math.IsNaN(v) || v < 0 || v > 100 {
			return SizeOrPct{Raw: s, err: fmt.Errorf("bad percentage %q: want 0%% to 100%%", s)}
		}
		return SizeOrPct{Raw: s, Pct: v, IsPct: true}
	}
	b, err := ParseSize(s)
	return SizeOrPct{Raw: s, Bytes: b, err: err}
}

// Err is the parse error, if any.
func (s Size) Err() error      { return s.err }
func (r Rate) Err() error      { return r.err }
func (s SizeOrPct) Err() error { return s.err }

func (s Size) String() string {
	if s.Raw != "" {
		return s.Raw
	}
	return strconv.FormatInt(s.Bytes, 10)
}
func (r Rate) String() string {
	if r.Raw != "" {
		return r.Raw
	}
	return strconv.FormatFloat(r.BytesPerSec, 'f', -1, 64)
}
func (s SizeOrPct) String() string { return s.Raw }

// UnmarshalTOML accepts a string with a unit or a plain number.
func (s *Size) UnmarshalTOML(v any) error {
	*s = NewSize(scalarString(v))
	return nil
}

func (r *Rate) UnmarshalTOML(v any) error {
	*r = NewRate(scalarString(v))
	return nil
}

func (s *SizeOrPct) UnmarshalTOML(v any) error {
	*s = NewSizeOrPct(scalarString(v))
	return nil
}

// UnmarshalText lets flags and TOML strings set these types.
func (s *Size) UnmarshalText(b []byte) error      { *s = NewSize(string(b)); return nil }
func (r *Rate) UnmarshalText(b []byte) error      { *r = NewRate(string(b)); return nil }
func (s *SizeOrPct) UnmarshalText(b []byte) error { *s = NewSizeOrPct(string(b)); return nil }

func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return fmt.Sprintf("%v", v)
	}
}

// FormatBytes renders n with a binary unit, e.g. "4.0GiB".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
