package preprocess

import (
	"bytes"

	"image"
	"math/rand/v2"
	"testing"
)

// DecodeRegion gives exactly the pixels of the same rectangle of a full
// decode, at every DCT scale, for 4:2:0 colour and grayscale JPEGs and
// for PNG (decoded whole, then cropped).
func TestDecodeRegionEqualsCropOfFullDecode(t *testing.T) {
	d, err := NewDecoder(DecoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	color := cropJPEG(t, 4, 517, 389, 3)
	src := photo(t, 5).Sub(0, 0, 300, 221)
	gray := image.NewGray(image.Rect(0, 0, src.W, src.H))
	for y := 0; y < src.H; y++ {
		for x := 0; x < src.W; x++ {
			gray.Pix[y*gray.Stride+x] = src.Row(y)[3*x+1]
		}
	}
	grayJPEG := encodeJPEG(t, gray, 90)
	rng := rand.New(rand.NewPCG(5, 5))
	for name, data := range map[string][]byte{"420": color, "gray": grayJPEG, "png": pngOf(t, src)} {
		for _, denom := range []int{1, 2, 4, 8} {
			full, got, err := d.Decode(data, func(Header) int { return denom })
			if err != nil {
				t.Fatal(err)
			}
			if (name == "png" || !d.UsesTurbo()) && denom != 1 {
				continue
			}
			if got != denom {
				t.Fatalf("%s: decoded at 1/%d, asked 1/%d", name, got, denom)
			}
			for k := range 12 {
				r := Rect{W: 1 + rng.IntN(full.W), H: 1 + rng.IntN(full.H)}
				if k == 0 {
					r = Rect{W: full.W, H: full.H}
				}
				r.X, r.Y = rng.IntN(full.W-r.W+1), rng.IntN(full.H-r.H+1)
				img, gd, err := d.DecodeRegion(data, func(Header) (int, Rect) { return denom, r })
				if err != nil || gd != denom {
					t.Fatalf("%s 1/%d %+v: %v (scale 1/%d)", name, denom, r, err, gd)
				}
				want := full.Sub(r.X, r.Y, r.W, r.H)
				for y := 0; y < r.H; y++ {
					if !bytes.Equal(img.Row(y), want.Row(y)) {
						t.Fatalf("%s 1/%d %+v: row %d differs from the full decode", name, denom, r, y)
					}
				}
			}
		}
	}
	if _, _, err := d.DecodeRegion(color, func(h Header) (int, Rect) { return 1, Rect{X: h.W - 5, W: 10, H: 1} }); err == nil {
		t.Error("a region outside the image gave no error")
	}
	// Truncated inside the region: an error, as for a full decode.
	if _, _, err := d.DecodeRegion(color[:len(color)/3], func(h Header) (int, Rect) { return 1, Rect{W: h.W, H: h.H} }); err == nil {
		t.Error("a truncated region gave no error")
	}
}

func pngOf(t *testing.T, m *Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := encodePNG(&buf, goImage(m)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
