package preprocess

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
)

// DefaultMaxPixels is the default hostile-input limit: PIL's
// Image.MAX_IMAGE_PIXELS (89,478,485 pixels, about 256 MiB of RGB).
const DefaultMaxPixels = 89478485

// Format is an encoded image format.
type Format string

// Formats the decoder knows.
const (
	JPEG Format = "jpeg"
	PNG  Format = "png"
)

// Header is what an image declares about itself before any pixel is
// decoded.
type Header struct {
	Format Format
	W, H   int
	// Scalable: the decoder can scale this image by 1/2, 1/4 or 1/8 in
	// the DCT domain (libjpeg-turbo JPEGs).
	Scalable bool
}

// ScaleFunc chooses the DCT-domain scale for a JPEG from its header: it
// returns a denominator 1, 2, 4 or 8 (decode at 1/denom of the full size,
// rounded up like libjpeg). Other formats ignore it.
type ScaleFunc func(h Header) int

// DecoderOptions configures a Decoder.
type DecoderOptions struct {
	// MaxPixels rejects images declaring more than this many pixels
	// (width×height at full size) with ErrTooLarge, before allocating.
	// 0 means DefaultMaxPixels.
	MaxPixels int64
	// Handles bounds the pool of libjpeg-turbo handles kept for reuse;
	// 0 means 16.
	Handles int
	// ForceStdlib decodes JPEG with Go's image/jpeg instead of
	// libjpeg-turbo (about 4× slower; for comparison and as the fallback
	// in builds without cgo).
	ForceStdlib bool
	// FastUpsample turns off libjpeg's "fancy" (triangle) chroma
	// upsampling: region decodes get about 13 % faster, but the pixels
	// then differ slightly from PIL's, which upsamples fancily.
	FastUpsample bool
}

// Decoder decodes JPEG (libjpeg-turbo through cgo, with DCT-domain
// scaling) and PNG (Go's image/png) into RGB. It is safe for concurrent
// use. Close releases the libjpeg-turbo handles.
type Decoder struct {
	maxPixels int64
	stdlib    bool
	tj        *turboPool
	bufs      *bufPool

	fastUpsample bool
}

// NewDecoder returns a Decoder.
func NewDecoder(opts DecoderOptions) (*Decoder, error) {
	if opts.MaxPixels < 0 {
		return nil, fmt.Errorf("preprocess: max pixels %d: %w: want >= 0", opts.MaxPixels, ErrBadOptions)
	}
	if opts.MaxPixels == 0 {
		opts.MaxPixels = DefaultMaxPixels
	}
	if opts.Handles <= 0 {
		opts.Handles = 16
	}
	d := &Decoder{maxPixels: opts.MaxPixels, stdlib: opts.ForceStdlib || !haveTurbo, bufs: &bufPool{}, fastUpsample: opts.FastUpsample}
	if !d.stdlib {
		d.tj = newTurboPool(opts.Handles)
	}
	return d, nil
}

// Close releases the decoder's libjpeg-turbo handles. Decode after Close
// still works (with fresh handles that are freed after use).
func (d *Decoder) Close() error {
	if d.tj != nil {
		d.tj.close()
	}
	return nil
}

// MaxPixels is the decoder's pixel limit.
func (d *Decoder) MaxPixels() int64 { return d.maxPixels }

// UsesTurbo reports whether JPEGs are decoded by libjpeg-turbo.
func (d *Decoder) UsesTurbo() bool { return !d.stdlib }

func sniff(data []byte) (Format, error) {
	switch {
	case len(data) == 0:
		return "", fmt.Errorf("preprocess: empty input: %w", ErrCorrupt)
	case len(data) >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF:
		return JPEG, nil
	case len(data) >= 8 && string(data[:8]) == "\x89PNG\r\n\x1a\n":
		return PNG, nil
	}
	return "", fmt.Errorf("preprocess: not JPEG or PNG: %w", ErrUnsupported)
}

// DecodeHeader reads an image's format and size without decoding pixels.
func (d *Decoder) DecodeHeader(data []byte) (Header, error) {
	f, err := sniff(data)
	if err != nil {
		return Header{}, err
	}
	var h Header
	if f == JPEG && !d.stdlib {
		h, _, err = d.tj.header(data)
		h.Scalable = true
	} else {
		h, err = stdHeader(f, data)
	}
	if err != nil {
		return h, err
	}
	return h, d.checkSize(h)
}

func (d *Decoder) checkSize(h Header) error {
	if h.W <= 0 || h.H <= 0 {
		return fmt.Errorf("preprocess: %s header: size %dx%d: %w", h.Format, h.W, h.H, ErrCorrupt)
	}
	if int64(h.W)*int64(h.H) > d.maxPixels {
		return fmt.Errorf("preprocess: %s header: %dx%d = %d pixels, limit %d: %w",
			h.Format, h.W, h.H, int64(h.W)*int64(h.H), d.maxPixels, ErrTooLarge)
	}
	return nil
}

// Decode decodes an image to RGB. scale (may be nil) picks a DCT-domain
// scale for JPEGs; the returned denominator is the one applied (always 1
// for PNG and for the stdlib fallback).
func (d *Decoder) Decode(data []byte, scale ScaleFunc) (*Image, int, error) {
	f, err := sniff(data)
	if err != nil {
		return nil, 1, err
	}
	if f == JPEG && !d.stdlib {
		return d.tj.decode(data, d, scale)
	}
	h, err := stdHeader(f, data)
	if err != nil {
		return nil, 1, err
	}
	if err := d.checkSize(h); err != nil {
		return nil, 1, err
	}
	img, err := stdDecode(f, data)
	return img, 1, err
}

// validDenom reports whether n is a DCT scale denominator we use.
func validDenom(n int) bool { return n == 1 || n == 2 || n == 4 || n == 8 }

// scaled is libjpeg's TJSCALED(dim, 1/denom).
func scaled(dim, denom int) int { return (dim + denom - 1) / denom }

func stdHeader(f Format, data []byte) (Header, error) {
	cfg, err := decodeConfig(f, data)
	if err != nil {
		return Header{Format: f}, fmt.Errorf("preprocess: %s header: %w: %w", f, err, ErrCorrupt)
	}
	return Header{Format: f, W: cfg.Width, H: cfg.Height}, nil
}

func decodeConfig(f Format, data []byte) (image.Config, error) {
	if f == PNG {
		return png.DecodeConfig(bytes.NewReader(data))
	}
	return stdJPEGConfig(data)
}

func stdDecode(f Format, data []byte) (*Image, error) {
	var (
		im  image.Image
		err error
	)
	if f == PNG {
		im, err = png.Decode(bytes.NewReader(data))
	} else {
		im, err = stdJPEGDecode(data)
	}
	if err != nil {
		return nil, fmt.Errorf("preprocess: %s decode: %w: %w", f, err, ErrCorrupt)
	}
	return toRGB(im), nil
}

// toRGB converts any decoded image to RGB the way PIL's convert("RGB")
// does: alpha is dropped (not composited), gray is replicated, CMYK and
// YCbCr are converted, 16-bit samples keep their high byte.
func toRGB(im image.Image) *Image {
	b := im.Bounds()
	out := NewImage(b.Dx(), b.Dy())
	switch src := im.(type) {
	case *image.Gray:
		for y := 0; y < out.H; y++ {
			row := out.Row(y)
			s := src.Pix[y*src.Stride : y*src.Stride+out.W]
			for x, v := range s {
				row[3*x], row[3*x+1], row[3*x+2] = v, v, v
			}
		}
	case *image.NRGBA:
		for y := 0; y < out.H; y++ {
			row := out.Row(y)
			s := src.Pix[y*src.Stride : y*src.Stride+4*out.W]
			for x := 0; x < out.W; x++ {
				row[3*x], row[3*x+1], row[3*x+2] = s[4*x], s[4*x+1], s[4*x+2]
			}
		}
	case *image.RGBA:
		// Opaque PNGs decode to RGBA; premultiplied only matters where
		// alpha < 255, which PIL would keep unmultiplied: undo it.
		for y := 0; y < out.H; y++ {
			row := out.Row(y)
			s := src.Pix[y*src.Stride : y*src.Stride+4*out.W]
			for x := 0; x < out.W; x++ {
				r, g, bb, a := s[4*x], s[4*x+1], s[4*x+2], s[4*x+3]
				if a != 255 && a != 0 {
					r = uint8((uint32(r)*255 + uint32(a)/2) / uint32(a))
					g = uint8((uint32(g)*255 + uint32(a)/2) / uint32(a))
					bb = uint8((uint32(bb)*255 + uint32(a)/2) / uint32(a))
				}
				row[3*x], row[3*x+1], row[3*x+2] = r, g, bb
			}
		}
	case *image.YCbCr:
		for y := 0; y < out.H; y++ {
			row := out.Row(y)
			for x := 0; x < out.W; x++ {
				yi := src.YOffset(b.Min.X+x, b.Min.Y+y)
				ci := src.COffset(b.Min.X+x, b.Min.Y+y)
				r, g, bb := color.YCbCrToRGB(src.Y[yi], src.Cb[ci], src.Cr[ci])
				row[3*x], row[3*x+1], row[3*x+2] = r, g, bb
			}
		}
	case *image.CMYK:
		for y := 0; y < out.H; y++ {
			row := out.Row(y)
			s := src.Pix[y*src.Stride : y*src.Stride+4*out.W]
			cmykRow(row, s)
		}
	default:
		for y := 0; y < out.H; y++ {
			row := out.Row(y)
			for x := 0; x < out.W; x++ {
				c := color.NRGBAModel.Convert(im.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
				row[3*x], row[3*x+1], row[3*x+2] = c.R, c.G, c.B
			}
		}
	}
	return out
}

// cmykRow converts Adobe-style CMYK (as libjpeg and Go's image.CMYK
// deliver it: 255 = no ink for libjpeg, 0 = no ink for image.CMYK) to RGB.
// Both callers pass data in Go's convention (0 = no ink).
func cmykRow(dst, src []byte) {
	n := len(dst) / 3
	for x := 0; x < n; x++ {
		c, m, y, k := uint32(src[4*x]), uint32(src[4*x+1]), uint32(src[4*x+2]), uint32(src[4*x+3])
		w := 255 - k
		dst[3*x] = uint8(((255-c)*w + 127) / 255)
		dst[3*x+1] = uint8(((255-m)*w + 127) / 255)
		dst[3*x+2] = uint8(((255-y)*w + 127) / 255)
	}
}
