package preprocess

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// The C passes (AVX2, SSE4.1 and scalar) compute exactly what the Go passes
// (the build without cgo) compute, for up- and downscaling, fractional
// boxes and strided views; the C ToTensor equals the Go one.
func TestResampleAndToTensorImplementationsAgree(t *testing.T) {
	src := photo(t, 1)
	rng := rand.New(rand.NewPCG(8, 8))
	lut := makeLUT([][]float64{{0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}})
	for k := range 40 {
		w, h := 1+rng.IntN(400), 1+rng.IntN(300)
		view := src.Sub(rng.IntN(src.W-w+1), rng.IntN(src.H-h+1), w, h)
		box := [4]float64{0, 0, float64(w), float64(h)}
		if k%2 == 1 {
			box = [4]float64{rng.Float64() * float64(w) / 3, rng.Float64() * float64(h) / 3, float64(w) - rng.Float64()*float64(w)/3, float64(h) - rng.Float64()*float64(h)/3}
		}
		ow, oh := 1+rng.IntN(300), 1+rng.IntN(300)
		got := resample(view, box, ow, oh, nil)
		saved, savedAVX2 := haveSSE41, haveAVX2
		haveSSE41, haveAVX2 = false, false
		scalar := resample(view, box, ow, oh, nil)
		haveSSE41, haveAVX2 = saved, savedAVX2
		want := goResample(view, box, ow, oh)
		if !bytes.Equal(got.Pix, want.Pix) || !bytes.Equal(scalar.Pix, want.Pix) {
			t.Fatalf("%dx%d box %v -> %dx%d: C and Go resampling differ", w, h, box, ow, oh)
		}
		a, b := toFloatCHW(view, lut), toFloatCHWGo(view, lut)
		for i := range a.F32 {
			if a.F32[i] != b.F32[i] {
				t.Fatalf("ToTensor differs at %d: %v vs %v", i, a.F32[i], b.F32[i])
			}
		}
	}
}

// goResample is resample with the Go passes.
func goResample(src *Image, box [4]float64, outW, outH int) *Image {
	needH := outW != src.W || box[0] != 0 || box[2] != float64(outW)
	needV := outH != src.H || box[1] != 0 || box[3] != float64(outH)
	cv := precompute(src.H, box[1], box[3], outH)
	first := int(cv.bounds[0])
	last := int(cv.bounds[2*outH-2] + cv.bounds[2*outH-1])
	for i := 0; i < outH; i++ {
		cv.bounds[2*i] -= int32(first)
	}
	cur := src.Sub(0, first, src.W, last-first)
	if needH {
		tmp := NewImage(outW, last-first)
		resampleHGo(tmp, src, first, precompute(src.W, box[0], box[2], outW))
		cur = tmp
		if !needV {
			return tmp
		}
	}
	if !needV {
		return cur.Compact()
	}
	out := NewImage(outW, outH)
	resampleVGo(out, cur, cv)
	return out
}
