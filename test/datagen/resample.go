package datagen

import "math"

// rgb is a packed 8-bit RGB raster (3 bytes per pixel, no padding). Photos are
// kept in this form after loading: it is a quarter smaller than image.RGBA and
// is all the resampler needs.
type rgb struct {
	w, h int
	pix  []uint8
}

// taps holds, for each output coordinate, the first source index and the
// fixed-point weights of a separable triangle filter.
type taps struct {
	start   []int
	weights [][]int32
}

const weightBits = 14

// makeTaps computes a triangle ("bilinear with antialias") filter that maps
// the source span [x0, x0+span) onto n output samples. When downscaling, the
// filter support widens with the scale so every source pixel contributes
// (area-like averaging, no aliasing of fine texture).
func makeTaps(x0, span float64, n, srcLen int) taps {
	scale := span / float64(n)
	support := math.Max(scale, 1)
	t := taps{start: make([]int, n), weights: make([][]int32, n)}
	fw := make([]float64, 0, int(2*support)+3)
	for i := 0; i < n; i++ {
		center := x0 + (float64(i)+0.5)*scale
		lo := int(math.Floor(center - support))
		hi := int(math.Ceil(center + support))
		if lo < 0 {
			lo = 0
		}
		if hi > srcLen {
			hi = srcLen
		}
		fw = fw[:0]
		sum := 0.0
		for j := lo; j < hi; j++ {
			d := math.Abs(float64(j)+0.5-center) / support
			w := 0.0
			if d < 1 {
				w = 1 - d
			}
			fw = append(fw, w)
			sum += w
		}
		if sum == 0 { // degenerate span: nearest pixel
			j := min(max(int(center), 0), srcLen-1)
			t.start[i] = j
			t.weights[i] = []int32{1 << weightBits}
			continue
		}
		// Trim zero weights at both ends, then quantize so the weights sum
		// to exactly 1<<weightBits (no brightness drift).
		a, b := 0, len(fw)
		for a < b && fw[a] == 0 {
			a++
		}
		for b > a && fw[b-1] == 0 {
			b--
		}
		ws := make([]int32, b-a)
		var acc int32
		for k := range ws {
			ws[k] = int32(math.Round(fw[a+k] / sum * (1 << weightBits)))
			acc += ws[k]
		}
		ws[len(ws)/2] += (1 << weightBits) - acc
		t.start[i] = lo + a
		t.weights[i] = ws
	}
	return t
}

func clamp8(v int32) uint8 {
	v = (v + 1<<(weightBits-1)) >> weightBits
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

// resample scales the region (x0, y0, cw, ch) of src, given in source pixels
// and possibly fractional, to a w×h image. It runs a horizontal pass over the
// rows the vertical filter needs, then a vertical pass.
func resample(src *rgb, x0, y0, cw, ch float64, w, h int) *rgb {
	ht := makeTaps(x0, cw, w, src.w)
	vt := makeTaps(y0, ch, h, src.h)
	rowLo := vt.start[0]
	rowHi := vt.start[h-1] + len(vt.weights[h-1])
	// Horizontal pass: rows [rowLo, rowHi) of the source → w columns.
	mid := make([]uint8, (rowHi-rowLo)*w*3)
	for y := rowLo; y < rowHi; y++ {
		srow := src.pix[y*src.w*3 : (y+1)*src.w*3]
		drow := mid[(y-rowLo)*w*3 : (y-rowLo+1)*w*3]
		for x := 0; x < w; x++ {
			var r, g, b int32
			p := ht.start[x] * 3
			for _, wt := range ht.weights[x] {
				r += int32(srow[p]) * wt
				g += int32(srow[p+1]) * wt
				b += int32(srow[p+2]) * wt
				p += 3
			}
			drow[x*3], drow[x*3+1], drow[x*3+2] = clamp8(r), clamp8(g), clamp8(b)
		}
	}
	// Vertical pass.
	dst := &rgb{w: w, h: h, pix: make([]uint8, w*h*3)}
	stride := w * 3
	for y := 0; y < h; y++ {
		drow := dst.pix[y*stride : (y+1)*stride]
		base := (vt.start[y] - rowLo) * stride
		ws := vt.weights[y]
		for x := 0; x < stride; x++ {
			var v int32
			p := base + x
			for _, wt := range ws {
				v += int32(mid[p]) * wt
				p += stride
			}
			drow[x] = clamp8(v)
		}
	}
	return dst
}
