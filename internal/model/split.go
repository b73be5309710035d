package model

import (
	"math"
	"strconv"

	"github.com/epochfs/epochfs/internal/model/splitspec"
)

// Split is a division of the memory budget: the fractions x_E, x_D and x_A
// (each in [0, 1], summing to 1) given to encoded, decoded and augmented
// samples.
type Split struct {
	E, D, A float64
}

// The single-form splits, for comparison.
var (
	AllEncoded   = Split{E: 1}
	AllDecoded   = Split{D: 1}
	AllAugmented = Split{A: 1}
)

// Pct returns the split in percent, rounded to hundredths with the largest
// remainder method so that the three always sum to exactly 100.00.
func (s Split) Pct() (e, d, a float64) {
	raw := []float64{s.E * 10000, s.D * 10000, s.A * 10000}
	var total float64
	for _, v := range raw {
		total += v
	}
	if total <= 0 || math.IsNaN(total) {
		return 100, 0, 0
	}
	units := make([]int, 3)
	rem := make([]float64, 3)
	sum := 0
	for i, v := range raw {
		v = v * 10000 / total
		units[i] = int(math.Floor(v))
		rem[i] = v - float64(units[i])
		sum += units[i]
	}
	for sum < 10000 {
		best := 0
		for i := 1; i < 3; i++ {
			if rem[i] > rem[best] {
				best = i
			}
		}
		units[best]++
		rem[best] = -1
		sum++
	}
	return float64(units[0]) / 100, float64(units[1]) / 100, float64(units[2]) / 100
}

// Rounded returns the split as Pct rounds it.
func (s Split) Rounded() Split {
	e, d, a := s.Pct()
	return Split{E: e / 100, D: d / 100, A: a / 100}
}

// String renders the split in the paper's X-Y-Z notation (percent encoded,
// decoded, augmented), e.g. "58-42-0".
func (s Split) String() string {
	e, d, a := s.Pct()
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	return f(e) + "-" + f(d) + "-" + f(a)
}

// Validate checks that the split's fractions are in [0, 1] and sum to 1.
func (s Split) Validate() error {
	for _, c := range []struct {
		name string
		v    float64
	}{{"x_E", s.E}, {"x_D", s.D}, {"x_A", s.A}} {
		if math.IsNaN(c.v) || c.v < 0 || c.v > 1 {
			return invalid("model: split %s = %g: want 0 to 1", c.name, c.v)
		}
	}
	if sum := s.E + s.D + s.A; math.Abs(sum-1) > 1e-9 {
		return invalid("model: split sums to %g: want 1", sum)
	}
	return nil
}

// ParseSplit parses a forced split in the paper's X-Y-Z notation: percent of
// the memory budget for encoded, decoded and augmented samples, e.g.
// "58-42-0" or "50-25.5-24.5" (splitspec.Parse).
func ParseSplit(text string) (Split, error) {
	e, d, a, err := splitspec.Parse(text)
	if err != nil {
		return Split{}, invalid("%v", err)
	}
	return Split{E: e, D: d, A: a}, nil
}
