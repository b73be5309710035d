package splitspec

import (
	"math"
	"testing"
)

func TestParseAcceptsPercentagesThatSumTo100(t *testing.T) {
	for in, want := range map[string][3]float64{
		"58-42-0": {0.58, 0.42, 0}, "100-0-0": {1, 0, 0}, " 50 - 25.5 - 24.5 ": {0.5, 0.255, 0.245},
	} {
		e, d, a, err := Parse(in)
		if err != nil || math.Abs(e-want[0]) > 1e-12 || math.Abs(d-want[1]) > 1e-12 || math.Abs(a-want[2]) > 1e-12 {
			t.Errorf("Parse(%q) = %g %g %g, %v", in, e, d, a, err)
		}
	}
}

func TestParseRejectsWhatIsNotASplit(t *testing.T) {
	for _, in := range []string{"", "58-42", "58-42-0-0", "50-50-1", "-10-110-0", "a-b-c", "0x32-50-18", "nan-50-50", "101-0-0", "+50-50-0"} {
		if _, _, _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) accepted", in)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"58-42-0", "1e2-0-0", "33.3-33.3-33.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, d, a, err := Parse(s)
		if err != nil {
			return
		}
		for _, v := range []float64{e, d, a} {
			if math.IsNaN(v) || v < 0 || v > 1 {
				t.Fatalf("Parse(%q) gave fraction %g", s, v)
			}
		}
		if math.Abs(e+d+a-1) > 1e-9 {
			t.Fatalf("Parse(%q) sums to %g", s, e+d+a)
		}
	})
}
