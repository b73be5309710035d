package config

import (
	"math"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"4GiB", 4 << 30},
		{"200GB", 200e9},
		{"4096", 4096},
		{"0", 0},
		{"1.5KiB", 1536},
		{"64k", 64 << 10},
		{"64K", 64 << 10},
		{"500MB", 500e6},
		{"500mb", 500e6},
		{"2MiB", 2 << 20},
		{"1TiB", 1 << 40},
		{"3TB", 3e12},
		{"1PiB", 1 << 50},
		{"10B", 10},
		{"10b", 10},
		{" 4 GiB ", 4 << 30},
		{"1e3", 1000},
		{"1e3KiB", 1000 << 10},
		{"2.5e-1KiB", 256},
		{"1e-3MB", 1000},
		{"2e+3", 2000},
		{"2E3", 2000},
		{"+7", 7},
		{".5KiB", 512},
		{"-0", 0},
		{"1.9", 1}, // fractional bytes are dropped
		{"1024PiB", 1 << 60},
	} {
		got, err := ParseSize(tc.in)
		if err != nil {
			t.Errorf("ParseSize(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseSize(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestParseSizeErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // substrings of the error
	}{
		{"4GB?", []string{`"4GB?"`, `unknown unit "GB?"`}},
		{"-1GiB", []string{`"-1GiB"`, "negative"}},
		{"-1", []string{`"-1"`, "negative"}},
		{"", []string{"empty"}},
		{"   ", []string{"empty"}},
		{"GiB", []string{`"GiB"`, "want a number"}},
		{"four", []string{`"four"`}},
		{"1.2.3KiB", []string{`"1.2.3KiB"`, "not a number"}},
		{".", []string{`"."`, "not a number"}},
		{"1e", []string{`"1e"`, "unknown unit"}},
		{"4 G iB", []string{`"4 G iB"`, "unknown unit"}},
		{"1e400", []string{`"1e400"`}},
		{"1e300GiB", []string{`"1e300GiB"`, "too large"}},
		{"9999999PiB", []string{`"9999999PiB"`, "too large"}},
		{"5%", []string{`"5%"`, "unknown unit"}},
		{"0x10", []string{`"0x10"`}},
		{"NaN", []string{`"NaN"`}},
		{"Inf", []string{`"Inf"`}},
		{"1GiB/s", []string{`"1GiB/s"`}},
	} {
		got, err := ParseSize(tc.in)
		if err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", tc.in, got)
			continue
		}
		for _, s := range tc.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("ParseSize(%q) error %q does not contain %q", tc.in, err, s)
			}
		}
	}
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
	}{
		{"10Gbit/s", 1.25e9},
		{"10gbit/s", 1.25e9},
		{"10Gbits/s", 1.25e9},
		{"10Gbit", 1.25e9},
		{"10Gbps", 1.25e9},
		{"100Mbps", 12.5e6},
		{"100Mbit/s", 12.5e6},
		{"8bit/s", 1},
		{"8bps", 1},
		{"1Kibit/s", 128},
		{"500MB/s", 5e8},
		{"500MBps", 5e8},
		{"500MB", 5e8},
		{"1GiB/s", 1 << 30},
		{"2MiB/s", 2 << 20},
		{"500000000", 5e8},
		{"0", 0},
		{"1.5GB/s", 1.5e9},
		{"1e-1GB/s", 1e8},
		{" 1 GiB/s ", 1 << 30},
	} {
		got, err := ParseRate(tc.in)
		if err != nil {
			t.Errorf("ParseRate(%q): %v", tc.in, err)
			continue
		}
		if math.Abs(got-tc.want) > 1e-9*tc.want {
			t.Errorf("ParseRate(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestParseRateErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", []string{"empty"}},
		{"fast", []string{`"fast"`}},
		{"-1MB/s", []string{`"-1MB/s"`, "negative"}},
		{"10Xbit/s", []string{`"10Xbit/s"`, "unknown unit"}},
		{"10GB/min", []string{`"10GB/min"`, "unknown unit"}},
		{"10GB/s?", []string{`"10GB/s?"`, "unknown unit"}},
		{"1e400", []string{`"1e400"`, "not a number"}},
		{"1e300PB/s", []string{`"1e300PB/s"`, "too large"}},
		{"2e18", []string{`"2e18"`, "too large"}},
		{"1..2MB/s", []string{`"1..2MB/s"`, "not a number"}},
	} {
		got, err := ParseRate(tc.in)
		if err == nil {
			t.Errorf("ParseRate(%q) = %v, want an error", tc.in, got)
			continue
		}
		for _, s := range tc.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("ParseRate(%q) error %q does not contain %q", tc.in, err, s)
			}
		}
	}
}

func TestNewSizeOrPct(t *testing.T) {
	for _, tc := range []struct {
		in    string
		isPct bool
		pct   float64
		bytes int64
	}{
		{"5%", true, 5, 0},
		{"0%", true, 0, 0},
		{"100%", true, 100, 0},
		{"12.5%", true, 12.5, 0},
		{" 5 % ", true, 5, 0},
		{"10GiB", false, 0, 10 << 30},
		{"0", false, 0, 0},
		{"4096", false, 0, 4096},
	} {
		v := NewSizeOrPct(tc.in)
		if err := v.Err(); err != nil {
			t.Errorf("NewSizeOrPct(%q): %v", tc.in, err)
			continue
		}
		if v.IsPct != tc.isPct || v.Pct != tc.pct || v.Bytes != tc.bytes || v.Raw != tc.in {
			t.Errorf("NewSizeOrPct(%q) = %+v, want IsPct=%v Pct=%v Bytes=%d", tc.in, v, tc.isPct, tc.pct, tc.bytes)
		}
		if v.String() != tc.in {
			t.Errorf("String() = %q, want %q", v.String(), tc.in)
		}
	}
	for _, in := range []string{"150%", "100.1%", "-1%", "%", "x%", "NaN%", "Inf%", "5%%", "4GB?", "-1GiB"} {
		v := NewSizeOrPct(in)
		if v.Err() == nil {
			t.Errorf("NewSizeOrPct(%q) = %+v, want an error", in, v)
			continue
		}
		if !strings.Contains(v.Err().Error(), `"`+in+`"`) {
			t.Errorf("NewSizeOrPct(%q) error %q does not quote the value", in, v.Err())
		}
	}
}

func TestNewSizeAndRateKeepRawAndError(t *testing.T) {
	s := NewSize("4GB?")
	if s.Err() == nil || s.Raw != "4GB?" || s.String() != "4GB?" {
		t.Errorf("NewSize(4GB?) = %+v, want Raw kept and an error", s)
	}
	s = NewSize("4GiB")
	if s.Err() != nil || s.Bytes != 4<<30 || s.String() != "4GiB" {
		t.Errorf("NewSize(4GiB) = %+v", s)
	}
	if got := (Size{Bytes: 42}).String(); got != "42" {
		t.Errorf("Size{Bytes: 42}.String() = %q", got)
	}
	r := NewRate("10Gbit/s")
	if r.Err() != nil || r.BytesPerSec != 1.25e9 || r.String() != "10Gbit/s" {
		t.Errorf("NewRate(10Gbit/s) = %+v", r)
	}
	r = NewRate("fast")
	if r.Err() == nil || r.Raw != "fast" {
		t.Errorf("NewRate(fast) = %+v, want Raw kept and an error", r)
	}
	if got := (Rate{BytesPerSec: 1.5}).String(); got != "1.5" {
		t.Errorf("Rate{BytesPerSec: 1.5}.String() = %q", got)
	}
}

func TestUnmarshalText(t *testing.T) {
	var s Size
	var r Rate
	var p SizeOrPct
	if err := s.UnmarshalText([]byte("1KiB")); err != nil || s.Bytes != 1024 {
		t.Errorf("Size.UnmarshalText = %+v, %v", s, err)
	}
	if err := r.UnmarshalText([]byte("1kB/s")); err != nil || r.BytesPerSec != 1000 {
		t.Errorf("Rate.UnmarshalText = %+v, %v", r, err)
	}
	if err := p.UnmarshalText([]byte("7%")); err != nil || !p.IsPct || p.Pct != 7 {
		t.Errorf("SizeOrPct.UnmarshalText = %+v, %v", p, err)
	}
	// A bad value is kept for Validate, not reported by the decoder.
	if err := s.UnmarshalText([]byte("lots")); err != nil || s.Err() == nil {
		t.Errorf("Size.UnmarshalText(lots) = %v, Err() = %v; want nil and a kept error", err, s.Err())
	}
}

func TestTOMLDecodingOfUnits(t *testing.T) {
	type doc struct {
		S Size      `toml:"s"`
		R Rate      `toml:"r"`
		P SizeOrPct `toml:"p"`
	}
	for _, tc := range []struct {
		text string
		s    int64
		r    float64
		p    SizeOrPct
		sErr bool
		pErr bool
		rawS string
	}{
		{text: `s = "4GiB"` + "\n" + `r = "500MB/s"` + "\n" + `p = "5%"`, s: 4 << 30, r: 5e8, p: SizeOrPct{Raw: "5%", Pct: 5, IsPct: true}, rawS: "4GiB"},
		{text: "s = 4096\nr = 1000\np = 2048", s: 4096, r: 1000, p: SizeOrPct{Raw: "2048", Bytes: 2048}, rawS: "4096"},
		{text: "s = 0\nr = 0\np = 0", s: 0, r: 0, p: SizeOrPct{Raw: "0"}, rawS: "0"},
		{text: "s = 1.5e3\nr = 2.5", s: 1500, r: 2.5, rawS: "1500"},
		{text: `s = "4GB?"`, sErr: true, rawS: "4GB?"},
		{text: "s = -1", sErr: true, rawS: "-1"},
		{text: "s = true", sErr: true, rawS: "true"},
		{text: "s = [1, 2]", sErr: true},
		{text: "s = {a = 1}", sErr: true},
		{text: `p = "150%"`, pErr: true},
	} {
		var d doc
		if _, err := toml.Decode(tc.text, &d); err != nil {
			t.Errorf("Decode(%q): %v", tc.text, err)
			continue
		}
		if (d.S.Err() != nil) != tc.sErr {
			t.Errorf("Decode(%q): s = %+v, want error %v", tc.text, d.S, tc.sErr)
		}
		if (d.P.Err() != nil) != tc.pErr {
			t.Errorf("Decode(%q): p = %+v, want error %v", tc.text, d.P, tc.pErr)
		}
		if tc.sErr || tc.pErr {
			continue
		}
		if d.S.Bytes != tc.s || d.R.BytesPerSec != tc.r || d.P != tc.p {
			t.Errorf("Decode(%q) = %+v, want s=%d r=%v p=%+v", tc.text, d, tc.s, tc.r, tc.p)
		}
		if tc.rawS != "" && d.S.Raw != tc.rawS {
			t.Errorf("Decode(%q): s.Raw = %q, want %q", tc.text, d.S.Raw, tc.rawS)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0B"},
		{1023, "1023B"},
		{1024, "1.0KiB"},
		{1536, "1.5KiB"},
		{4 << 30, "4.0GiB"},
		{1 << 40, "1.0TiB"},
		{1 << 50, "1.0PiB"},
		{1 << 60, "1.0EiB"},
		{math.MaxInt64, "8.0EiB"},
	} {
		if got := FormatBytes(tc.n); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// A size that FormatBytes prints parses back to within rounding.
func TestFormatBytesParsesBack(t *testing.T) {
	for _, n := range []int64{1, 1000, 1 << 20, 3<<30 + 12345, 7 << 40} {
		got, err := ParseSize(FormatBytes(n))
		if err != nil {
			t.Errorf("ParseSize(FormatBytes(%d) = %q): %v", n, FormatBytes(n), err)
			continue
		}
		if d := math.Abs(float64(got-n)) / float64(n); d > 0.05 {
			t.Errorf("ParseSize(FormatBytes(%d)) = %d", n, got)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"4GiB", "200GB", "4096", "0", "1.5KiB", "4GB?", "-1GiB", "1e3", " 64k ", "1e300PiB", ".", "+", "-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if n != 0 {
				t.Errorf("ParseSize(%q) = %d with error %v, want 0", s, n, err)
			}
			if !strings.Contains(err.Error(), "size") {
				t.Errorf("ParseSize(%q) error %q does not say what was parsed", s, err)
			}
			return
		}
		if n < 0 {
			t.Errorf("ParseSize(%q) = %d, negative", s, n)
		}
		v := NewSize(s)
		if v.Err() != nil || v.Bytes != n || v.Raw != s {
			t.Errorf("NewSize(%q) = %+v, disagrees with ParseSize = %d", s, v, n)
		}
	})
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"10Gbit/s", "500MB/s", "1GiB/s", "0", "500000000", "10Gbps", "-1MB/s", "1e18", "8bits", "bit/s", "/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			if r != 0 {
				t.Errorf("ParseRate(%q) = %v with error %v, want 0", s, r, err)
			}
			if !strings.Contains(err.Error(), "rate") {
				t.Errorf("ParseRate(%q) error %q does not say what was parsed", s, err)
			}
			return
		}
		if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			t.Errorf("ParseRate(%q) = %v, want a finite non-negative rate", s, r)
		}
	})
}
