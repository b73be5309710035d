package preprocess

import (
	"image"
	"image/color"
	"testing"
)

func TestProfilerSizesAndSteps(t *testing.T) {
	im := image.NewRGBA(image.Rect(0, 0, 320, 240))
	for y := 0; y < 240; y++ {
		for x := 0; x < 320; x++ {
			im.Set(x, y, color.RGBA{uint8(x), uint8(y), uint8(x + y), 255})
		}
	}
	data := encodeJPEG(t, im, 90)
	for _, c := range []struct {
		out  string
		want int64
	}{{"uint8_hwc", 64 * 64 * 3}, {"float32_chw", 64 * 64 * 3 * 4}} {
		p, err := New(Options{Augment: []string{"random_resized_crop:64", "hflip:0.5"}, Output: c.out})
		if err != nil {
			t.Fatal(err)
		}
		pp := NewProfiler(p)
		if err := pp.DecodeAugment(data); err != nil {
			t.Fatal(err)
		}
		d, err := pp.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if got := pp.DecodedBytes(d); got != 320*240*3 {
			t.Errorf("decoded bytes %d, want %d", got, 320*240*3)
		}
		a, err := pp.AugmentedBytes(d)
		if err != nil || a != c.want {
			t.Errorf("%s: augmented bytes %d (%v), want %d", c.out, a, err, c.want)
		}
		if err := pp.Augment(d); err != nil {
			t.Fatal(err)
		}
		if got := pp.DecodedBytes(d); got != 320*240*3 {
			t.Errorf("Augment changed the decoded sample: %d bytes", got)
		}
		if _, err := pp.AugmentedBytes("not an image"); err == nil {
			t.Error("AugmentedBytes of a non-image: no error")
		}
		p.Close()
	}
	p, _ := New(Options{})
	defer p.Close()
	if _, err := NewProfiler(p).Decode([]byte("not a jpeg")); err == nil {
		t.Error("Decode of garbage: no error")
	}
}
