// Package splitspec parses a forced split of the DSI model's memory budget,
// written in the paper's X-Y-Z notation. It is a leaf package: config
// validates [model] split with it without importing the model.
package splitspec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Parse parses "ENCODED-DECODED-AUGMENTED" percentages of the memory budget,
// e.g. "58-42-0" or "50-25.5-24.5". Each must be in 0–100 and they must sum
// to 100; the fractions returned sum to 1.
func Parse(text string) (e, d, a float64, err error) {
	parts := strings.Split(strings.TrimSpace(text), "-")
	if len(parts) != 3 {
		return 0, 0, 0, fmt.Errorf("split %q: want ENCODED-DECODED-AUGMENTED percentages, e.g. 58-42-0", text)
	}
	names := [3]string{"encoded", "decoded", "augmented"}
	var v [3]float64
	var sum float64
	for i, p := range parts {
		p = strings.TrimSpace(p)
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || p == "" || strings.ContainsAny(p, "+xXpP_") {
			return 0, 0, 0, fmt.Errorf("split %q: %s percentage %q is not a number", text, names[i], p)
		}
		if math.IsNaN(f) || f < 0 || f > 100 {
			return 0, 0, 0, fmt.Errorf("split %q: %s percentage %s: want 0 to 100", text, names[i], p)
		}
		v[i] = f
		sum += f
	}
	if math.Abs(sum-100) > 1e-6 {
		return 0, 0, 0, fmt.Errorf("split %q: percentages sum to %g, want 100", text, sum)
	}
	return v[0] / sum, v[1] / sum, v[2] / sum, nil
}
