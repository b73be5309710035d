// Package spec parses the text form of preprocessing steps, as written in
// the [preprocess] section of the config ("resize:256", "center_crop:224",
// "random_resized_crop:224", "hflip:0.5"). It is pure Go with no
// dependencies so that config can validate a pipeline without linking the
// decoder.
//
// Grammar: NAME[:ARG][,KEY=VALUE]...
//
//	resize:S | resize:HxW                 shorter side to S (bilinear), or exactly H×W
//	center_crop:S | center_crop:HxW       torchvision CenterCrop (zero-pads if larger)
//	random_resized_crop:S[,scale=A-B][,ratio=A-B]
//	                                      torchvision RandomResizedCrop, defaults
//	                                      scale=0.08-1, ratio=0.75-1.3333333
//	hflip[:P]                             RandomHorizontalFlip(p=P), default 0.5
package spec

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Kind names a step.
type Kind string

// The step kinds.
const (
	Resize            Kind = "resize"
	CenterCrop        Kind = "center_crop"
	RandomResizedCrop Kind = "random_resized_crop"
	HFlip             Kind = "hflip"
)

// Random reports whether a step of this kind draws random numbers (and so
// belongs in the augment list, not the static one).
func (k Kind) Random() bool { return k == RandomResizedCrop || k == HFlip }

// MaxSide bounds every size in a step (a typo like resize:2560000 is an
// error, not a 20 GB allocation).
const MaxSide = 1 << 15

// Step is one parsed step.
type Step struct {
	Kind Kind
	// H, W: target size. For resize with one number (shorter side) H == W
	// and Short is true.
	H, W  int
	Short bool
	// P: flip probability.
	P float64
	// Scale and Ratio: RandomResizedCrop ranges.
	Scale, Ratio [2]float64
	// Text is the step as written.
	Text string
}

// ErrSyntax is wrapped by every parse error.
var ErrSyntax = errors.New("bad step")

func fail(text, format string, a ...any) error {
	return fmt.Errorf("spec: step %q: %w: %s", text, ErrSyntax, fmt.Sprintf(format, a...))
}

// Parse parses one step.
func Parse(text string) (Step, error) {
	s := Step{Text: text}
	parts := strings.Split(strings.TrimSpace(text), ",")
	head := parts[0]
	name, arg, hasArg := strings.Cut(head, ":")
	s.Kind = Kind(name)
	opts := map[string]string{}
	for _, kv := range parts[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" || v == "" {
			return s, fail(text, "option %q: want KEY=VALUE", kv)
		}
		if _, dup := opts[k]; dup {
			return s, fail(text, "option %q given twice", k)
		}
		opts[k] = v
	}
	switch s.Kind {
	case Resize, CenterCrop, RandomResizedCrop:
		if !hasArg {
			return s, fail(text, "missing size (e.g. %s:224)", name)
		}
		h, w, short, err := parseSize(arg)
		if err != nil {
			return s, fail(text, "%v", err)
		}
		s.H, s.W = h, w
		s.Short = short && s.Kind == Resize
	case HFlip:
		s.P = 0.5
		if hasArg {
			p, err := strconv.ParseFloat(arg, 64)
			if err != nil || math.IsNaN(p) || p < 0 || p > 1 {
				return s, fail(text, "probability %q: want a number from 0 to 1", arg)
			}
			s.P = p
		}
	case "":
		return s, fail(text, "empty step")
	default:
		return s, fail(text, "unknown step %q (want resize, center_crop, random_resized_crop or hflip)", name)
	}
	if s.Kind == RandomResizedCrop {
		s.Scale = [2]float64{0.08, 1}
		s.Ratio = [2]float64{3.0 / 4.0, 4.0 / 3.0}
		for k, v := range opts {
			var err error
			switch k {
			case "scale":
				s.Scale, err = parseRange(v, false)
			case "ratio":
				s.Ratio, err = parseRange(v, true)
			default:
				err = fmt.Errorf("unknown option %q (want scale or ratio)", k)
			}
			if err != nil {
				return s, fail(text, "%s: %v", k, err)
			}
		}
	} else if len(opts) > 0 {
		return s, fail(text, "%s takes no options", name)
	}
	return s, nil
}

func parseSize(arg string) (h, w int, short bool, err error) {
	hs, ws, two := strings.Cut(arg, "x")
	h, err = parseSide(hs)
	if err != nil {
		return 0, 0, false, err
	}
	if !two {
		return h, h, true, nil
	}
	w, err = parseSide(ws)
	return h, w, false, err
}

func parseSide(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxSide {
		return 0, fmt.Errorf("size %q: want an integer from 1 to %d", s, MaxSide)
	}
	return n, nil
}

func parseRange(v string, positive bool) ([2]float64, error) {
	a, b, ok := strings.Cut(v, "-")
	if !ok {
		return [2]float64{}, fmt.Errorf("%q: want LOW-HIGH", v)
	}
	lo, err1 := strconv.ParseFloat(a, 64)
	hi, err2 := strconv.ParseFloat(b, 64)
	if err1 != nil || err2 != nil || math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || lo > hi || lo <= 0 {
		return [2]float64{}, fmt.Errorf("%q: want 0 < LOW <= HIGH", v)
	}
	if !positive && hi > 1 {
		return [2]float64{}, fmt.Errorf("%q: HIGH must be at most 1", v)
	}
	return [2]float64{lo, hi}, nil
}

// ParseList parses a list of steps. key names the list in errors
// ("preprocess.static"); random says whether random steps are allowed
// (augment) or required to be absent (static).
func ParseList(key string, texts []string, random bool) ([]Step, error) {
	steps := make([]Step, 0, len(texts))
	for i, t := range texts {
		s, err := Parse(t)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", key, i, err)
		}
		if s.Kind.Random() && !random {
			return nil, fmt.Errorf("%s[%d]: step %q is random: put it in the augment list", key, i, t)
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// Output formats.
const (
	OutputUint8HWC   = "uint8_hwc"
	OutputFloat32CHW = "float32_chw"
)

// CheckNormalize checks a normalize value: empty, or [mean, std] with three
// numbers each and std > 0.
func CheckNormalize(n [][]float64) error {
	if len(n) == 0 {
		return nil
	}
	if len(n) != 2 || len(n[0]) != 3 || len(n[1]) != 3 {
		return fmt.Errorf("want [[mean_r, mean_g, mean_b], [std_r, std_g, std_b]]")
	}
	for c := 0; c < 3; c++ {
		m, sd := n[0][c], n[1][c]
		if math.IsNaN(m) || math.IsInf(m, 0) {
			return fmt.Errorf("mean[%d] = %v: want a finite number", c, m)
		}
		if !(sd > 0) || math.IsInf(sd, 0) {
			return fmt.Errorf("std[%d] = %v: want a finite number > 0", c, sd)
		}
	}
	return nil
}
