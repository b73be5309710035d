package preprocess

import (
	"math"
	"math/rand/v2"

	"github.com/epochfs/epochfs/internal/preprocess/spec"
)

// The transforms, with torchvision's semantics on PIL images
// (torchvision.transforms 0.14: Resize, CenterCrop, RandomResizedCrop,
// RandomHorizontalFlip, ToTensor, Normalize).

// resizeSize is torchvision's _compute_resized_output_size for an int size
// (shorter side) or an exact (h, w).
func resizeSize(s spec.Step, w, h int) (ow, oh int) {
	if !s.Short {
		return s.W, s.H
	}
	if w <= h {
		return s.H, int(float64(s.H) * float64(h) / float64(w))
	}
	return int(float64(s.H) * float64(w) / float64(h)), s.H
}

// doResize resizes img (bilinear, antialiased like PIL).
func doResize(img *Image, s spec.Step, bufs *bufPool) *Image {
	ow, oh := resizeSize(s, img.W, img.H)
	if ow == img.W && oh == img.H {
		return img
	}
	return resample(img, [4]float64{0, 0, float64(img.W), float64(img.H)}, ow, oh, bufs)
}

// roundHalfEven is Python 3's round().
func roundHalfEven(x float64) int { return int(math.RoundToEven(x)) }

// doCenterCrop is torchvision's center_crop: a view when the crop fits,
// a fresh zero-padded image from bufs (fresh = true) when it does not.
func doCenterCrop(img *Image, s spec.Step, bufs *bufPool) (out *Image, fresh bool) {
	cw, ch := s.W, s.H
	if cw <= img.W && ch <= img.H {
		top := roundHalfEven(float64(img.H-ch) / 2)
		left := roundHalfEven(float64(img.W-cw) / 2)
		return img.Sub(left, top, cw, ch), false
	}
	// Pad to at least the crop size (left/top get the smaller half), then
	// crop the centre of the padded image.
	padL, padT := 0, 0
	pw, ph := img.W, img.H
	if cw > img.W {
		padL = (cw - img.W) / 2
		pw = cw
	}
	if ch > img.H {
		padT = (ch - img.H) / 2
		ph = ch
	}
	top := roundHalfEven(float64(ph-ch) / 2)
	left := roundHalfEven(float64(pw-cw) / 2)
	out = &Image{W: cw, H: ch, Stride: 3 * cw, Pix: bufs.get(3 * cw * ch)}
	clear(out.Pix)
	// Source pixel (x, y) lands at (x+padL-left, y+padT-top).
	for y := 0; y < img.H; y++ {
		oy := y + padT - top
		if oy < 0 || oy >= ch {
			continue
		}
		x0, x1 := 0, img.W
		if d := padL - left; d < 0 {
			x0 = -d
		}
		if x1+padL-left > cw {
			x1 = cw - padL + left
		}
		if x0 >= x1 {
			continue
		}
		copy(out.Row(oy)[3*(x0+padL-left):], img.Row(y)[3*x0:3*x1])
	}
	return out, true
}

// Crop is a RandomResizedCrop draw: the rectangle (Left, Top, W, H).
type Crop struct{ Top, Left, H, W int }

// RandomResizedCropParams is torchvision's RandomResizedCrop.get_params
// for an image of width w and height h, drawing from rng.
func RandomResizedCropParams(rng *rand.Rand, w, h int, scale, ratio [2]float64) Crop {
	area := float64(w * h)
	logLo, logHi := math.Log(ratio[0]), math.Log(ratio[1])
	for range 10 {
		target := area * (scale[0] + (scale[1]-scale[0])*rng.Float64())
		ar := math.Exp(logLo + (logHi-logLo)*rng.Float64())
		cw := roundHalfEven(math.Sqrt(target * ar))
		ch := roundHalfEven(math.Sqrt(target / ar))
		if cw > 0 && cw <= w && ch > 0 && ch <= h {
			top := rng.IntN(h - ch + 1)
			left := rng.IntN(w - cw + 1)
			return Crop{Top: top, Left: left, H: ch, W: cw}
		}
	}
	// Fallback to a central crop.
	inRatio := float64(w) / float64(h)
	cw, ch := w, h
	if inRatio < ratio[0] {
		ch = roundHalfEven(float64(cw) / ratio[0])
	} else if inRatio > ratio[1] {
		cw = roundHalfEven(float64(ch) * ratio[1])
	}
	return Crop{Top: (h - ch) / 2, Left: (w - cw) / 2, H: ch, W: cw}
}

// flipInPlace mirrors img left to right.
func flipInPlace(img *Image) {
	for y := 0; y < img.H; y++ {
		row := img.Row(y)
		for l, r := 0, img.W-1; l < r; l, r = l+1, r-1 {
			a, b := row[3*l:3*l+3:3*l+3], row[3*r:3*r+3:3*r+3]
			a[0], b[0] = b[0], a[0]
			a[1], b[1] = b[1], a[1]
			a[2], b[2] = b[2], a[2]
		}
	}
}

// toFloatCHWGo is ToTensor (x/255 as float32) followed by Normalize when
// lut holds the per-channel (x/255 - mean)/std table (the tests' oracle
// for the C version).
func toFloatCHWGo(img *Image, lut *[3][256]float32) *Tensor {
	out := make([]float32, 3*img.W*img.H)
	toFloatCHWIntoGo(out, img, lut)
	return &Tensor{DType: Float32, Shape: []int{3, img.H, img.W}, F32: out}
}

// toFloatCHWIntoGo writes ToTensor (+ Normalize) of img into out
// (3×W×H float32, CHW), in Go (the !cgo build).
func toFloatCHWIntoGo(out []float32, img *Image, lut *[3][256]float32) {
	n := img.W * img.H
	r, g, b := out[:n], out[n:2*n], out[2*n:3*n]
	i := 0
	for y := 0; y < img.H; y++ {
		row := img.Row(y)
		for x := 0; x+2 < len(row); x += 3 {
			r[i] = lut[0][row[x]]
			g[i] = lut[1][row[x+1]]
			b[i] = lut[2][row[x+2]]
			i++
		}
	}
}

// makeLUT precomputes ToTensor+Normalize per channel in float32, in the
// order torchvision computes it (div 255, then sub mean, then div std).
func makeLUT(norm [][]float64) *[3][256]float32 {
	var lut [3][256]float32
	for c := 0; c < 3; c++ {
		for v := 0; v < 256; v++ {
			x := float32(v) / 255
			if len(norm) == 2 {
				x = (x - float32(norm[0][c])) / float32(norm[1][c])
			}
			lut[c][v] = x
		}
	}
	return &lut
}
