package spec

import (
	"errors"
	"fmt"
	"testing"
)

func TestParseSteps(t *testing.T) {
	for text, want := range map[string]string{
		"resize:256":              "resize 256x256 short=true",
		"resize:200x300":          "resize 200x300 short=false",
		"center_crop:224":         "center_crop 224x224 short=false",
		"center_crop:10x20":       "center_crop 10x20 short=false",
		"hflip":                   "hflip p=0.5",
		"hflip:0.25":              "hflip p=0.25",
		"random_resized_crop:224": "random_resized_crop 224x224 [0.08 1] [0.75 1.3333333333333333]",
		"random_resized_crop:96,scale=0.5-1,ratio=0.9-1.1": "random_resized_crop 96x96 [0.5 1] [0.9 1.1]",
	} {
		s, err := Parse(text)
		if err != nil {
			t.Errorf("%s: %v", text, err)
			continue
		}
		var got string
		switch s.Kind {
		case HFlip:
			got = fmt.Sprintf("%s p=%v", s.Kind, s.P)
		case RandomResizedCrop:
			got = fmt.Sprintf("%s %dx%d %v %v", s.Kind, s.H, s.W, s.Scale, s.Ratio)
		default:
			got = fmt.Sprintf("%s %dx%d short=%v", s.Kind, s.H, s.W, s.Short)
		}
		if got != want {
			t.Errorf("%s: parsed as %q, want %q", text, got, want)
		}
	}
}

func TestParseRejectsBadSteps(t *testing.T) {
	for _, text := range []string{"", "resize", "resize:0", "resize:abc", "resize:99999999", "resize:10x",
		"blur:3", "hflip:2", "hflip:-0.1", "hflip:nan", "center_crop:224,scale=0.1-1",
		"random_resized_crop:224,scale=0-1", "random_resized_crop:224,scale=0.5-1.5",
		"random_resized_crop:224,ratio=2-1", "random_resized_crop:224,foo=1", "random_resized_crop:224,scale"} {
		if _, err := Parse(text); !errors.Is(err, ErrSyntax) {
			t.Errorf("%q: %v, want a syntax error", text, err)
		}
	}
	if _, err := ParseList("static", []string{"resize:8", "hflip"}, false); err == nil {
		t.Error("a random step in a static list was accepted")
	}
}
