//go:build !cgo

package preprocess

func resampleH(dst, src *Image, yOff int, c coeffs) { resampleHGo(dst, src, yOff, c) }
func resampleV(dst, src *Image, c coeffs)           { resampleVGo(dst, src, c) }
