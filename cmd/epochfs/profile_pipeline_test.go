package main

import (
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With JPEGs in the source, --profile times our own preprocessing for
// T_D+A and T_A.
func TestModelProfilesTDAAndTAWithOurPipeline(t *testing.T) {
	src := t.TempDir()
	for i := 0; i < 12; i++ {
		img := image.NewRGBA(image.Rect(0, 0, 320, 240))
		for y := 0; y < 240; y++ {
			for x := 0; x < 320; x++ {
				img.Set(x, y, color.RGBA{uint8(x * i), uint8(y + i), uint8(x ^ y), 255})
			}
		}
		f, err := os.Create(filepath.Join(src, fmt.Sprintf("img%02d.jpg", i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := jpeg.Encode(f, img, &jpeg.Options{Quality: 85}); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	cfg := writeConfig(t, fmt.Sprintf("source = %q\n[model]\nmemory_budget = \"1GiB\"\nt_gpu = 2000\n[preprocess]\naugment = [\"random_resized_crop:64\", \"hflip:0.5\"]\n", src))
	m := modelRunJSON(t, "--config", cfg, "--profile")
	tda, ta := m.Inputs["t_decode_augment"], m.Inputs["t_augment"]
	for name, in := range map[string]struct {
		Value  *float64
		Source string
	}{"t_decode_augment": {tda.Value, tda.Source}, "t_augment": {ta.Value, ta.Source}} {
		if in.Value == nil || *in.Value <= 0 || !strings.Contains(in.Source, "measured: our pipeline") {
			t.Fatalf("%s: %+v, want measured by our pipeline", name, in)
		}
	}
	t.Logf("T_D+A %.0f/s, T_A %.0f/s", *tda.Value, *ta.Value)
}
