//go:build !cgo

package preprocess

func (d *Decoder) decodeRegionTurbo(data []byte, hdr Header, denom int, r Rect) (*Image, bool, error) {
	return nil, false, nil
}
