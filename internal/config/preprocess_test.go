package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestPreprocessSectionParses(t *testing.T) {
	cfg, err := Parse(Default(), `
[preprocess]
static = ["resize:256", "center_crop:224"]
augment = ["random_resized_crop:224", "hflip:0.5"]
normalize = [[0.485, 0.456, 0.406], [0.229, 0.224, 0.225]]
output = "float32_chw"
workers = 3
max_pixels = 1000000
fast_upsample = true
`, "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Preprocess
	if fmt.Sprint(p.Static) != "[resize:256 center_crop:224]" || fmt.Sprint(p.Augment) != "[random_resized_crop:224 hflip:0.5]" {
		t.Errorf("steps %v %v", p.Static, p.Augment)
	}
	if fmt.Sprint(p.Normalize) != "[[0.485 0.456 0.406] [0.229 0.224 0.225]]" || p.Output != "float32_chw" ||
		p.Workers != 3 || p.MaxPixels != 1000000 || !p.FastUpsample {
		t.Errorf("parsed %+v", p)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("valid section: %v", err)
	}
}

func TestPreprocessDefaultsAreValidAndEmptyListsAllowed(t *testing.T) {
	d := DefaultPreprocess()
	if err := d.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	var zero Preprocess // a Config built in code without the section
	if err := zero.Validate(); err != nil || zero.OutputOrDefault() != "uint8_hwc" {
		t.Fatalf("zero section: %v, output %q", err, zero.OutputOrDefault())
	}
	cfg, err := Parse(Default(), "[preprocess]\nstatic = []\naugment = []\n", "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Preprocess.Static) != 0 || len(cfg.Preprocess.Augment) != 0 {
		t.Errorf("empty lists parsed as %+v", cfg.Preprocess)
	}
	if err := cfg.Preprocess.Validate(); err != nil {
		t.Errorf("empty pipeline: %v", err)
	}
}

// Every validation error names the key and the bad step or value.
func TestPreprocessValidationNamesTheBadStep(t *testing.T) {
	for _, tc := range []struct {
		toml string
		want []string
	}{
		{`static = ["resize:256", "resiz:224"]`, []string{"preprocess.static[1]", `"resiz:224"`, "unknown step"}},
		{`static = ["hflip:0.5"]`, []string{"preprocess.static[0]", `"hflip:0.5"`, "augment"}},
		{`augment = ["random_resized_crop"]`, []string{"preprocess.augment[0]", "missing size"}},
		{`augment = ["hflip:1.5"]`, []string{"preprocess.augment[0]", `"hflip:1.5"`, "0 to 1"}},
		{`augment = ["random_resized_crop:224,scale=0.5-0.1"]`, []string{"preprocess.augment[0]", "scale"}},
		{`static = ["center_crop:0"]`, []string{"preprocess.static[0]", "size"}},
		{`output = "float16"`, []string{"preprocess.output", "float16"}},
		{"normalize = [[0.5, 0.5, 0.5], [0.2, 0.0, 0.2]]\noutput = \"float32_chw\"", []string{"preprocess.normalize", "std[1]"}},
		{`normalize = [[0.5, 0.5, 0.5], [0.2, 0.2, 0.2]]`, []string{"preprocess.normalize", "float32_chw"}},
		{`normalize = [[0.5, 0.5], [0.2, 0.2]]` + "\noutput = \"float32_chw\"", []string{"preprocess.normalize"}},
		{`workers = -1`, []string{"preprocess.workers", "-1"}},
		{`max_pixels = -5`, []string{"preprocess.max_pixels", "-5"}},
	} {
		cfg, err := Parse(Default(), "[preprocess]\n"+tc.toml+"\n", "t")
		if err != nil {
			t.Fatalf("%s: parse: %v", tc.toml, err)
		}
		err = cfg.Validate()
		if err == nil {
			t.Errorf("%s: no error", tc.toml)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %s", tc.toml, err, w)
			}
		}
	}
	if _, err := Parse(Default(), "[preprocess]\nstatik = []\n", "t"); err == nil || !strings.Contains(err.Error(), "preprocess.statik") {
		t.Errorf("unknown key: %v", err)
	}
}
