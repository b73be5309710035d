//go:build cgo

package preprocess

/*
#cgo LDFLAGS: -lturbojpeg
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#ifndef TJFLAG_LIMITSCANS
#define TJFLAG_LIMITSCANS 0
#endif

// The results come back by value, not through pointers to Go variables:
// those would escape to the heap, an allocation per call. On an error the
// caller reads tjGetErrorStr2(h) before the handle is reused.
typedef struct {
	int rc, w, h, cs, warned;
} epochfs_tj_hdr;

// epochfs_tj_header reads the header. rc is 0 or -1; warned is set when
// libjpeg warned (the header may still be read).
static epochfs_tj_hdr epochfs_tj_header(tjhandle h, const unsigned char *buf, unsigned long len) {
	epochfs_tj_hdr r = {0, 0, 0, 0, 0};
	int subsamp = 0;
	if (tjDecompressHeader3(h, buf, len, &r.w, &r.h, &subsamp, &r.cs) != 0) {
		r.rc = -1;
	}
	r.warned = tjGetErrorCode(h) == TJERR_WARNING;
	return r;
}

// epochfs_tj_decode decodes into dst (w*h*bpp bytes, w and h already
// scaled). Returns 0 on success, 1 on a warning, -1 on a fatal error.
static int epochfs_tj_decode(tjhandle h, const unsigned char *buf, unsigned long len,
		unsigned char *dst, int w, int hh, int pf, int fast) {
	int flags = TJFLAG_LIMITSCANS | (fast ? TJFLAG_FASTUPSAMPLE : 0);
	if (tjDecompress2(h, buf, len, dst, w, 0, hh, pf, flags) == 0) {
		return 0;
	}
	return tjGetErrorCode(h) == TJERR_WARNING ? 1 : -1;
}
*/
import "C"

import (
	"bytes"
	"fmt"
	"sync"
	"unsafe"
)

const haveTurbo = true

// turboPool keeps up to cap idle decompression handles. A handle is used
// by one goroutine at a time; extra handles made under load are destroyed
// when returned to a full pool.
type turboPool struct {
	mu     sync.Mutex
	idle   []C.tjhandle
	max    int
	closed bool
}

func newTurboPool(max int) *turboPool { return &turboPool{max: max} }

func (p *turboPool) get() (C.tjhandle, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		h := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return h, nil
	}
	p.mu.Unlock()
	h := C.tjInitDecompress()
	if h == nil {
		return nil, fmt.Errorf("preprocess: tjInitDecompress failed")
	}
	return h, nil
}

func (p *turboPool) put(h C.tjhandle) {
	p.mu.Lock()
	if !p.closed && len(p.idle) < p.max {
		p.idle = append(p.idle, h)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	C.tjDestroy(h)
}

func (p *turboPool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, h := range idle {
		C.tjDestroy(h)
	}
}

const errLen = 200

// header returns the header and the libjpeg colour space.
func (p *turboPool) header(data []byte) (Header, int, error) {
	h, err := p.get()
	if err != nil {
		return Header{Format: JPEG}, 0, err
	}
	hdr, cs, warned, err := headerWith(h, data)
	if warned && err == nil {
		C.tjDestroy(h) // its warnings would hide the next decode's (decode)
	} else {
		p.release(h, err)
	}
	return hdr, cs, err
}

// release returns h to the pool, or destroys it after an error: TurboJPEG
// 2.x leaves a handle that failed in the middle of a header in a state
// where the next image's header fails too.
func (p *turboPool) release(h C.tjhandle, err error) {
	if err != nil {
		C.tjDestroy(h)
		return
	}
	p.put(h)
}

// endsScans reports whether the JPEG stream data has an end-of-image
// marker (FF D9) after its last start-of-scan marker (FF DA): a file cut
// short does not. Inside a scan's entropy-coded data a 0xFF byte is always
// stuffed (FF 00) or a restart marker (FF D0..D7), so neither marker can
// appear there by chance; an EXIF thumbnail's markers come before the
// image's first scan.
func endsScans(data []byte) bool {
	sos := bytes.LastIndex(data, []byte{0xFF, 0xDA})
	return sos >= 0 && bytes.Index(data[sos:], []byte{0xFF, 0xD9}) > 0
}

func headerWith(h C.tjhandle, data []byte) (Header, int, bool, error) {
	r := C.epochfs_tj_header(h, (*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)))
	if r.rc != 0 {
		return Header{Format: JPEG}, 0, r.warned != 0, fmt.Errorf("preprocess: jpeg header: %s: %w",
			C.GoString(C.tjGetErrorStr2(h)), ErrCorrupt)
	}
	return Header{Format: JPEG, W: int(r.w), H: int(r.h), Scalable: true}, int(r.cs), r.warned != 0, nil
}

// decode decodes a JPEG. The header is checked against the pixel limit
// before any pixel buffer exists.
func (p *turboPool) decode(data []byte, d *Decoder, scale ScaleFunc) (img *Image, denom int, err error) {
	h, err := p.get()
	if err != nil {
		return nil, 1, err
	}
	var warned bool
	defer func() {
		if warned && err == nil {
			C.tjDestroy(h) // see below: its warnings would hide the next decode's
			return
		}
		p.release(h, err)
	}()
	hdr, cs, warned, err := headerWith(h, data)
	if err != nil {
		return nil, 1, err
	}
	if err := d.checkSize(hdr); err != nil {
		return nil, 1, err
	}
	denom = 1
	if scale != nil {
		denom = scale(hdr)
		if !validDenom(denom) {
			return nil, 1, fmt.Errorf("preprocess: jpeg scale 1/%d: %w: want 1, 2, 4 or 8", denom, ErrBadOptions)
		}
	}
	w, hh := scaled(hdr.W, denom), scaled(hdr.H, denom)
	cmyk := cs == C.TJCS_CMYK || cs == C.TJCS_YCCK
	bpp, pf := 3, C.int(C.TJPF_RGB)
	if cmyk {
		bpp, pf = 4, C.TJPF_CMYK
	}
	buf := d.bufs.get(w * hh * bpp)
	rc := C.epochfs_tj_decode(h, (*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)),
		(*C.uchar)(unsafe.Pointer(&buf[0])), C.int(w), C.int(hh), pf, C.int(b2i(d.fastUpsample)))
	if rc != 0 {
		msg := C.GoString(C.tjGetErrorStr2(h))
		// A handle that warned is not used again: libjpeg reports only
		// the first warning of a handle's life (jerror.c, num_warnings),
		// so its next decode's message would be this one.
		warned = true
		// Like PIL: a truncated file is an error, other libjpeg warnings
		// ("extraneous bytes before marker", seen in ImageNet) are not.
		// Truncation is told from the bytes: the image's last scan must be
		// followed by its end marker.
		// The warning's message is not relied on: a reused handle's may be
		// an older decode's.
		if rc < 0 || !endsScans(data) {
			d.bufs.put(buf)
			if rc > 0 {
				msg = "Premature end of JPEG file (no end marker after the last scan)"
			}
			return nil, denom, fmt.Errorf("preprocess: jpeg decode: %s: %w", msg, ErrCorrupt)
		}
	}
	if !cmyk {
		return &Image{W: w, H: hh, Stride: 3 * w, Pix: buf}, denom, nil
	}
	// libjpeg returns Adobe CMYK inverted (255 = no ink); cmykRow takes
	// 0 = no ink.
	for i := range buf {
		buf[i] = 255 - buf[i]
	}
	out := NewImage(w, hh)
	for y := 0; y < hh; y++ {
		cmykRow(out.Row(y), buf[y*4*w:(y+1)*4*w])
	}
	d.bufs.put(buf)
	return out, denom, nil
}
