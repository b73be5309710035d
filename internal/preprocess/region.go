package preprocess

import "fmt"

// Rect is a pixel rectangle.
type Rect struct{ X, Y, W, H int }

// RegionFunc chooses, from an image's header, the DCT scale (1, 2, 4 or
// 8) and the rectangle of the scaled image to decode.
type RegionFunc func(h Header) (denom int, r Rect)

// DecodeRegion decodes only a rectangle of an image: for a JPEG through
// libjpeg-turbo, the rows above it are skipped without IDCT, the columns
// outside it without IDCT or colour conversion, and the rows below it
// are not read at all (so a file truncated below the rectangle decodes).
// The pixels equal those of the same rectangle of a full decode. Other
// formats (and CMYK JPEGs) are decoded whole and cropped.
func (d *Decoder) DecodeRegion(data []byte, pick RegionFunc) (*Image, int, error) {
	h, err := d.DecodeHeader(data)
	if err != nil {
		return nil, 1, err
	}
	denom, r := pick(h)
	return d.decodeRegion(data, h, denom, r)
}

// decodeRegion is DecodeRegion once the header is read and the region
// chosen.
func (d *Decoder) decodeRegion(data []byte, h Header, denom int, r Rect) (*Image, int, error) {
	if !validDenom(denom) || (denom != 1 && !h.Scalable) {
		return nil, 1, fmt.Errorf("preprocess: region scale 1/%d for %s: %w", denom, h.Format, ErrBadOptions)
	}
	sw, sh := scaled(h.W, denom), scaled(h.H, denom)
	if r.X < 0 || r.Y < 0 || r.W <= 0 || r.H <= 0 || r.X+r.W > sw || r.Y+r.H > sh {
		return nil, denom, fmt.Errorf("preprocess: region %+v outside %dx%d: %w", r, sw, sh, ErrBadOptions)
	}
	if h.Format == JPEG && !d.stdlib {
		img, ok, err := d.decodeRegionTurbo(data, h, denom, r)
		if ok {
			return img, denom, err
		}
	}
	full, got, err := d.Decode(data, func(Header) int { return denom })
	if err != nil {
		return nil, got, err
	}
	if got != denom {
		return nil, got, fmt.Errorf("preprocess: region decode at 1/%d got 1/%d: %w", denom, got, ErrUnsupported)
	}
	return full.Sub(r.X, r.Y, r.W, r.H), denom, nil
}
