package spec

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

// format renders a parsed step in the grammar's canonical form.
func format(s Step) string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	switch s.Kind {
	case HFlip:
		return "hflip:" + f(s.P)
	case RandomResizedCrop:
		return fmt.Sprintf("random_resized_crop:%dx%d,scale=%s-%s,ratio=%s-%s", s.H, s.W, f(s.Scale[0]), f(s.Scale[1]), f(s.Ratio[0]), f(s.Ratio[1]))
	}
	if s.Short {
		return fmt.Sprintf("%s:%d", s.Kind, s.H)
	}
	return fmt.Sprintf("%s:%dx%d", s.Kind, s.H, s.W)
}

// Steps come from config files. A parse either fails with ErrSyntax
// quoting the step, or yields a step within the documented bounds whose
// canonical form parses back to the same step.
func FuzzParseStep(f *testing.F) {
	for _, s := range []string{
		"resize:256", "resize:200x300", "center_crop:224", "hflip", "hflip:0.25", "random_resized_crop:224",
		"random_resized_crop:96,scale=0.5-1,ratio=0.9-1.1", "resize:0", "hflip:nan", "random_resized_crop:1,scale=1e-300-1",
		"random_resized_crop:224,ratio=1e308-1e308", " resize:8 ", "resize:8,", "resize:1x32768", "blur:3", ":", ",=",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(text)
		if err != nil {
			if !errors.Is(err, ErrSyntax) || !strings.HasPrefix(err.Error(), fmt.Sprintf("spec: step %q", text)) {
				t.Fatalf("Parse(%q): error %v does not wrap ErrSyntax and quote the step", text, err)
			}
			return
		}
		switch s.Kind {
		case Resize, CenterCrop, RandomResizedCrop:
			if s.H < 1 || s.W < 1 || s.H > MaxSide || s.W > MaxSide {
				t.Fatalf("Parse(%q): size %dx%d outside 1..%d", text, s.H, s.W, MaxSide)
			}
			if s.Short && (s.Kind != Resize || s.H != s.W) {
				t.Fatalf("Parse(%q): Short on %s %dx%d", text, s.Kind, s.H, s.W)
			}
		case HFlip:
			if !(s.P >= 0 && s.P <= 1) {
				t.Fatalf("Parse(%q): p = %v", text, s.P)
			}
		default:
			t.Fatalf("Parse(%q): kind %q accepted", text, s.Kind)
		}
		if s.Kind == RandomResizedCrop {
			for _, r := range [][2]float64{s.Scale, s.Ratio} {
				if !(r[0] > 0 && r[0] <= r[1]) || math.IsInf(r[1], 0) {
					t.Fatalf("Parse(%q): range %v", text, r)
				}
			}
			if s.Scale[1] > 1 {
				t.Fatalf("Parse(%q): scale %v above 1", text, s.Scale)
			}
		}
		canon := format(s)
		back, err := Parse(canon)
		if err != nil {
			t.Fatalf("Parse(%q) = %+v; its canonical form %q does not parse: %v", text, s, canon, err)
		}
		back.Text, s.Text = "", ""
		if back != s {
			t.Fatalf("Parse(%q) = %+v, but Parse(%q) = %+v", text, s, canon, back)
		}
	})
}
