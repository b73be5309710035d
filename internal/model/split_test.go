package model

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestParseSplit(t *testing.T) {
	for _, c := range []struct {
		in      string
		e, d, a float64
	}{
		{"58-42-0", 0.58, 0.42, 0},
		{" 100-0-0 ", 1, 0, 0},
		{"0-0-100", 0, 0, 1},
		{"50-25.5-24.5", 0.5, 0.255, 0.245},
		{"33.33-33.33-33.34", 0.3333, 0.3333, 0.3334},
	} {
		s, err := ParseSplit(c.in)
		if err != nil {
			t.Errorf("ParseSplit(%q): %v", c.in, err)
			continue
		}
		if !near(s.E, c.e) || !near(s.D, c.d) || !near(s.A, c.a) {
			t.Errorf("ParseSplit(%q) = %+v, want %v/%v/%v", c.in, s, c.e, c.d, c.a)
		}
	}
	for _, c := range []struct{ in, says string }{
		{"50-30-30", "sum to 110"},
		{"50-30-10", "sum to 90"},
		{"50-50", "ENCODED-DECODED-AUGMENTED"},
		{"", "ENCODED-DECODED-AUGMENTED"},
		{"a-50-50", "encoded percentage \"a\""},
		{"50--50", "decoded percentage \"\""},
		{"150-0-0", "encoded percentage 150"},
		{"0-NaN-100", "decoded percentage NaN"},
		{"0-0-Inf", "augmented percentage Inf"},
		{"0x10-0-90", "not a number"},
	} {
		_, err := ParseSplit(c.in)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("ParseSplit(%q) = %v, want an error saying %q", c.in, err, c.says)
		}
	}
}

func TestSplitPercentagesAlwaysSumTo100(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for i := 0; i < 10000; i++ {
		s := randSplit(r)
		e, d, a := s.Pct()
		if sum := e + d + a; math.Abs(sum-100) > 1e-9 {
			t.Fatalf("%+v → %v+%v+%v = %v", s, e, d, a, sum)
		}
		for _, v := range []float64{e, d, a} {
			if v < 0 || v > 100 || math.Abs(v*100-math.Round(v*100)) > 1e-6 {
				t.Fatalf("%+v → %v: not a hundredth of a percent in 0–100", s, v)
			}
		}
		if math.Abs(e/100-s.E) > 0.0001 || math.Abs(d/100-s.D) > 0.0001 || math.Abs(a/100-s.A) > 0.0001 {
			t.Fatalf("%+v → %v-%v-%v: rounded too far", s, e, d, a)
		}
		back, err := ParseSplit(s.String())
		if err != nil {
			t.Fatalf("ParseSplit(%q): %v", s.String(), err)
		}
		if back.String() != s.String() {
			t.Fatalf("round trip %q → %q", s.String(), back.String())
		}
	}
}

func FuzzParseSplit(f *testing.F) {
	for _, s := range []string{"58-42-0", "100-0-0", "33.3-33.3-33.4", "1e2-0-0", "-1-1-100", "50-50", "NaN-0-100"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSplit(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseSplit(%q): error %v does not wrap ErrInvalid", in, err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("ParseSplit(%q) = %+v, which does not validate: %v", in, s, err)
		}
		e, d, a := s.Pct()
		if math.Abs(e+d+a-100) > 1e-9 {
			t.Fatalf("ParseSplit(%q): percentages %v-%v-%v", in, e, d, a)
		}
		if _, err := ParseSplit(s.String()); err != nil {
			t.Fatalf("ParseSplit(%q) = %q does not parse back: %v", in, s.String(), err)
		}
	})
}
