package preprocess

import "math"

// Bilinear resampling with PIL's exact algorithm (Pillow's
// libImaging/Resample.c): a triangle filter whose support grows with the
// downscale factor (antialiasing), coefficients normalised per output
// pixel and quantised to 22-bit fixed point, a horizontal pass into an
// 8-bit intermediate over only the rows the vertical pass needs, then a
// vertical pass. torchvision's Resize on PIL images calls exactly this,
// so outputs agree to rounding.

const precisionBits = 32 - 8 - 2

// coeffs are the fixed-point filter taps of one axis.
type coeffs struct {
	ksize  int
	bounds []int32 // per output pixel: first input index, tap count
	kk     []int32 // ksize taps per output pixel
	k      []float64
}

func bilinearFilter(x float64) float64 {
	if x < 0 {
		x = -x
	}
	if x < 1 {
		return 1 - x
	}
	return 0
}

// precompute mirrors precompute_coeffs + normalize_coeffs_8bpc.
func precompute(inSize int, in0, in1 float64, outSize int) coeffs {
	var c coeffs
	c.compute(inSize, in0, in1, outSize)
	return c
}

// grow returns s with length n, reusing its memory when it can.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// compute is precompute into c's memory (reused across samples).
func (c *coeffs) compute(inSize int, in0, in1 float64, outSize int) {
	scale := (in1 - in0) / float64(outSize)
	filterscale := scale
	if filterscale < 1 {
		filterscale = 1
	}
	support := 1.0 * filterscale
	ksize := int(math.Ceil(support))*2 + 1
	c.ksize = ksize
	c.bounds = grow(c.bounds, 2*outSize)
	c.kk = grow(c.kk, ksize*outSize)
	clear(c.kk)
	c.k = grow(c.k, ksize)
	k := c.k
	ss := 1 / filterscale
	for xx := 0; xx < outSize; xx++ {
		center := in0 + (float64(xx)+0.5)*scale
		ww := 0.0
		xmin := int(center - support + 0.5) // truncates toward zero, like C
		if xmin < 0 {
			xmin = 0
		}
		xmax := int(center + support + 0.5)
		if xmax > inSize {
			xmax = inSize
		}
		xmax -= xmin
		if xmax < 0 {
			xmax = 0
		}
		for x := 0; x < xmax; x++ {
			w := bilinearFilter((float64(x+xmin) - center + 0.5) * ss)
			k[x] = w
			ww += w
		}
		kk := c.kk[xx*ksize : (xx+1)*ksize]
		for x := 0; x < xmax; x++ {
			v := k[x]
			if ww != 0 {
				v /= ww
			}
			if v < 0 {
				kk[x] = int32(-0.5 + v*(1<<precisionBits))
			} else {
				kk[x] = int32(0.5 + v*(1<<precisionBits))
			}
		}
		c.bounds[2*xx] = int32(xmin)
		c.bounds[2*xx+1] = int32(xmax)
	}
}

func clip8(v int32) byte {
	v >>= precisionBits
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return byte(v)
}

// resample resizes the box (x0, y0, x1, y1), in src's pixel coordinates,
// to outW×outH. The filter never reads outside src, so pass the crop as a
// view to get torchvision's crop-then-resize. The output is a fresh
// compact image in a buffer from bufs.
func resample(src *Image, box [4]float64, outW, outH int, bufs *bufPool) *Image {
	needH := outW != src.W || box[0] != 0 || box[2] != float64(outW)
	needV := outH != src.H || box[1] != 0 || box[3] != float64(outH)
	if !needH && !needV {
		return copyImage(src, bufs)
	}
	cv := bufs.getCoeffs()
	defer bufs.putCoeffs(cv)
	cv.compute(src.H, box[1], box[3], outH)
	first := int(cv.bounds[0])
	last := int(cv.bounds[2*outH-2] + cv.bounds[2*outH-1])
	cur := src
	if needH {
		ch := bufs.getCoeffs()
		ch.compute(src.W, box[0], box[2], outW)
		tmp := Image{W: outW, H: last - first, Stride: 3 * outW, Pix: bufs.get(3 * outW * (last - first))}
		resampleH(&tmp, src, first, *ch)
		bufs.putCoeffs(ch)
		if !needV {
			out := tmp
			return &out
		}
		for i := 0; i < outH; i++ {
			cv.bounds[2*i] -= int32(first)
		}
		cur = &tmp
	} else {
		// Vertical only: rows first..last of src, same indices.
		for i := 0; i < outH; i++ {
			cv.bounds[2*i] -= int32(first)
		}
		cur = src.Sub(0, first, src.W, last-first)
	}
	out := &Image{W: outW, H: outH, Stride: 3 * outW, Pix: bufs.get(3 * outW * outH)}
	resampleV(out, cur, *cv)
	if needH {
		bufs.put(cur.Pix)
	}
	return out
}

// resampleHGo is the horizontal pass in Go (the !cgo build and the
// tests' oracle).
func resampleHGo(dst, src *Image, yOff int, c coeffs) {
	ks := c.ksize
	for y := 0; y < dst.H; y++ {
		srow := src.Row(y + yOff)
		drow := dst.Row(y)
		for x := 0; x < dst.W; x++ {
			xmin := int(c.bounds[2*x])
			n := int(c.bounds[2*x+1])
			k := c.kk[x*ks : x*ks+n]
			s := srow[3*xmin : 3*(xmin+n)]
			r, g, b := int32(1<<(precisionBits-1)), int32(1<<(precisionBits-1)), int32(1<<(precisionBits-1))
			for i, w := range k {
				p := s[3*i : 3*i+3 : 3*i+3]
				r += int32(p[0]) * w
				g += int32(p[1]) * w
				b += int32(p[2]) * w
			}
			d := drow[3*x : 3*x+3 : 3*x+3]
			d[0], d[1], d[2] = clip8(r), clip8(g), clip8(b)
		}
	}
}

// resampleVGo is the vertical pass in Go.
func resampleVGo(dst, src *Image, c coeffs) {
	ks := c.ksize
	n3 := 3 * dst.W
	acc := make([]int32, n3)
	for y := 0; y < dst.H; y++ {
		ymin := int(c.bounds[2*y])
		n := int(c.bounds[2*y+1])
		k := c.kk[y*ks : y*ks+n]
		for i := range acc {
			acc[i] = 1 << (precisionBits - 1)
		}
		for i, w := range k {
			row := src.Row(ymin + i)
			row = row[:len(acc)]
			for x, v := range row {
				acc[x] += int32(v) * w
			}
		}
		drow := dst.Row(y)[:n3]
		for x, v := range acc {
			drow[x] = clip8(v)
		}
	}
}
