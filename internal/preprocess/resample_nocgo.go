//go:build !cgo

package preprocess

func resampleH(dst, src *Image, yOff int, c coeffs) { resampleHGo(dst, src, yOff, c) }
func resampleV(dst, src *Image, c coeffs)           { resampleVGo(dst, src, c) }

func toFloatCHW(img *Image, lut *[3][256]float32) *Tensor { return toFloatCHWGo(img, lut) }
func toFloatCHWInto(out []float32, img *Image, lut *[3][256]float32) {
	toFloatCHWIntoGo(out, img, lut)
}

// haveSSE41 and haveAVX2 exist for the tests shared with the cgo build.
var haveSSE41, haveAVX2 = false, false
