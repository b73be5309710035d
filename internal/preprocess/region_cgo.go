//go:build cgo

package preprocess

/*
#cgo LDFLAGS: -ljpeg
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <jpeglib.h>
#include <jerror.h>

typedef struct {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
	int eof;
	char msg[JMSG_LENGTH_MAX];
} epochfs_jerr;

static void epochfs_error_exit(j_common_ptr c) {
	epochfs_jerr *e = (epochfs_jerr *)c->err;
	(*c->err->format_message)(c, e->msg);
	longjmp(e->jb, 1);
}

static void epochfs_emit_message(j_common_ptr c, int level) {
	epochfs_jerr *e = (epochfs_jerr *)c->err;
	if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) {
		e->eof = 1;
	}
}

static void epochfs_output_message(j_common_ptr c) { (void)c; }

// epochfs_decode_region decodes rows [y0, y0+h) and columns [x0, x0+w) of
// the image scaled by 1/denom into dst (w*h*3 bytes, RGB), skipping the
// IDCT of the columns outside (jpeg_crop_scanline), the IDCT of the rows
// above (jpeg_skip_scanlines) and everything below. rowbuf holds one
// full scaled row (>= width*3 bytes). Expects the image to be
// exp_w × exp_h (checked against the pixel limit by the caller); returns
// 0, or -1 with msg set.
static int epochfs_decode_region(const unsigned char *buf, unsigned long len, int denom,
		int exp_w, int exp_h, int fast, int x0, int y0, int w, int h,
		unsigned char *dst, unsigned char *rowbuf, int rowbuf_len, char *msg, int msglen) {
	struct jpeg_decompress_struct cinfo;
	epochfs_jerr jerr;
	memset(&cinfo, 0, sizeof cinfo);
	cinfo.err = jpeg_std_error(&jerr.pub);
	jerr.pub.error_exit = epochfs_error_exit;
	jerr.pub.emit_message = epochfs_emit_message;
	jerr.pub.output_message = epochfs_output_message;
	jerr.eof = 0;
	jerr.msg[0] = 0;
	if (setjmp(jerr.jb)) {
		strncpy(msg, jerr.msg, msglen - 1);
		msg[msglen - 1] = 0;
		jpeg_destroy_decompress(&cinfo);
		return -1;
	}
	jpeg_create_decompress(&cinfo);
	jpeg_mem_src(&cinfo, buf, len);
	jpeg_read_header(&cinfo, TRUE);
	if ((int)cinfo.image_width != exp_w || (int)cinfo.image_height != exp_h) {
		snprintf(msg, msglen, "header %ux%u, expected %dx%d", cinfo.image_width, cinfo.image_height, exp_w, exp_h);
		jpeg_destroy_decompress(&cinfo);
		return -1;
	}
	if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
		snprintf(msg, msglen, "CMYK");
		jpeg_destroy_decompress(&cinfo);
		return -2;
	}
	cinfo.out_color_space = JCS_RGB;
	cinfo.scale_num = 1;
	cinfo.scale_denom = denom;
	if (fast) {
		cinfo.do_fancy_upsampling = FALSE;
	}
	jpeg_start_decompress(&cinfo);
	if (x0 < 0 || y0 < 0 || w <= 0 || h <= 0 || x0 + w > (int)cinfo.output_width ||
			y0 + h > (int)cinfo.output_height || (int)cinfo.output_width * 3 > rowbuf_len ||
			cinfo.output_components != 3) {
		snprintf(msg, msglen, "region %d,%d %dx%d outside %ux%u", x0, y0, w, h, cinfo.output_width, cinfo.output_height);
		jpeg_destroy_decompress(&cinfo);
		return -1;
	}
	// Crop columns with a margin: fancy upsampling at the edge of a
	// cropped region differs from a full decode, so keep the requested
	// columns 16 pixels inside it (or at the image's own edges).
	int mx0 = x0 - 16 < 0 ? 0 : x0 - 16;
	int mx1 = x0 + w + 16 > (int)cinfo.output_width ? (int)cinfo.output_width : x0 + w + 16;
	JDIMENSION xoff = mx0, cw = mx1 - mx0;
	if (mx0 > 0 || mx1 < (int)cinfo.output_width) {
		jpeg_crop_scanline(&cinfo, &xoff, &cw);
	}
	if (y0 > 0) {
		jpeg_skip_scanlines(&cinfo, y0);
	}
	int shift = (x0 - (int)xoff) * 3;
	JSAMPROW row = rowbuf;
	for (int r = 0; r < h; r++) {
		if (jpeg_read_scanlines(&cinfo, &row, 1) != 1) {
			snprintf(msg, msglen, "no scanline %d", y0 + r);
			jpeg_destroy_decompress(&cinfo);
			return -1;
		}
		memcpy(dst + (size_t)r * w * 3, rowbuf + shift, (size_t)w * 3);
	}
	if (jerr.eof) {
		snprintf(msg, msglen, "Premature end of JPEG file");
		jpeg_destroy_decompress(&cinfo);
		return -1;
	}
	jpeg_abort_decompress(&cinfo);
	jpeg_destroy_decompress(&cinfo);
	return 0;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// decodeRegionTurbo decodes only rect r of the image scaled by 1/denom.
// ok is false when this path does not apply (CMYK); the caller then
// decodes the whole image.
func (d *Decoder) decodeRegionTurbo(data []byte, hdr Header, denom int, r Rect) (img *Image, ok bool, err error) {
	fullW := scaled(hdr.W, denom)
	out := d.bufs.get(3 * r.W * r.H)
	// One pooled buffer for the scaled row and, after it, the error
	// message (a Go array passed to C would be allocated per call).
	rowLen := 3 * fullW
	scratch := d.bufs.get(rowLen + errLen)
	defer d.bufs.put(scratch)
	msg := scratch[rowLen:]
	msg[0] = 0
	rc := C.epochfs_decode_region((*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)), C.int(denom),
		C.int(hdr.W), C.int(hdr.H), C.int(b2i(d.fastUpsample)), C.int(r.X), C.int(r.Y), C.int(r.W), C.int(r.H),
		(*C.uchar)(unsafe.Pointer(&out[0])), (*C.uchar)(unsafe.Pointer(&scratch[0])), C.int(rowLen),
		(*C.char)(unsafe.Pointer(&msg[0])), errLen)
	switch rc {
	case 0:
		return &Image{W: r.W, H: r.H, Stride: 3 * r.W, Pix: out}, true, nil
	case -2:
		d.bufs.put(out)
		return nil, false, nil
	}
	d.bufs.put(out)
	return nil, true, fmt.Errorf("preprocess: jpeg decode: %s: %w", C.GoString((*C.char)(unsafe.Pointer(&msg[0]))), ErrCorrupt)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
