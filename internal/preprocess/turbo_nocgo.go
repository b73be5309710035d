//go:build !cgo

package preprocess

// Without cgo, JPEGs are decoded by Go's image/jpeg.
const haveTurbo = false

type turboPool struct{}

func newTurboPool(int) *turboPool { return nil }
func (*turboPool) close()         {}
func (*turboPool) header([]byte) (Header, int, error) {
	panic("preprocess: libjpeg-turbo not built in")
}
func (*turboPool) decode([]byte, *Decoder, ScaleFunc) (*Image, int, error) {
	panic("preprocess: libjpeg-turbo not built in")
}
