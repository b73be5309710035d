//go:build cgo

package preprocess

/*
#cgo CFLAGS: -O3
#include <stdint.h>
#include <stddef.h>
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#define PRECISION_BITS (32 - 8 - 2)

static inline unsigned char epochfs_clip8(int32_t v) {
	v >>= PRECISION_BITS;
	return v < 0 ? 0 : (v > 255 ? 255 : (unsigned char)v);
}

// One output pixel of the horizontal pass: n taps of packed RGB from p.
static inline void epochfs_h_pixel(unsigned char *d, const unsigned char *p, const int32_t *k, int n) {
	int32_t r = 1 << (PRECISION_BITS - 1), g = r, b = r;
	for (int i = 0; i < n; i++) {
		r += p[3 * i] * k[i];
		g += p[3 * i + 1] * k[i];
		b += p[3 * i + 2] * k[i];
	}
	d[0] = epochfs_clip8(r);
	d[1] = epochfs_clip8(g);
	d[2] = epochfs_clip8(b);
}

// Horizontal pass of Pillow's ImagingResampleHorizontal_8bpc on packed RGB.
static void epochfs_resample_h(unsigned char *dst, int dst_stride, int out_w, int rows,
		const unsigned char *src, int src_stride, int ksize,
		const int32_t *bounds, const int32_t *kk) {
	for (int y = 0; y < rows; y++) {
		const unsigned char *s = src + (size_t)y * src_stride;
		unsigned char *d = dst + (size_t)y * dst_stride;
		for (int x = 0; x < out_w; x++) {
			int xmin = bounds[2 * x], n = bounds[2 * x + 1];
			const int32_t *k = kk + (size_t)x * ksize;
			const unsigned char *p = s + 3 * xmin;
			epochfs_h_pixel(d + 3 * x, p, k, n);
		}
	}
}

// The same horizontal pass with SSE4.1, two taps at a time: the 6 bytes
// of two neighbouring pixels are shuffled into 16-bit lanes (r0 r1 g0 g1
// b0 b1 0 0) and pmaddwd multiplies and adds each channel's pair at once.
// pmaddwd takes 16-bit factors and the taps have 22 fractional bits, so
// each tap k is split exactly as k = hi·2^11 + lo (0 <= lo < 2^11, |hi| <=
// 2^11): two pmaddwd, and hi's sum shifted by 11 at the end. Every sum is
// an exact integer below 2^31, so the result is the scalar loop's, bit for
// bit; the clamp is a vector shift and two saturating packs. The 8-byte
// load reads 2 bytes past the pair, so pixels whose taps reach a row's
// end use the scalar loop. Returns -1 if the table cannot be allocated.
__attribute__((target("sse4.1")))
static int epochfs_resample_h_sse41(unsigned char *dst, int dst_stride, int out_w, int rows,
		const unsigned char *src, int src_stride, int src_w, int ksize,
		const int32_t *bounds, const int32_t *kk) {
	int npmax = (ksize + 1) / 2;
	// Per output pixel and tap pair: the lo and the hi factors.
	__m128i *tab = malloc((size_t)out_w * npmax * 2 * sizeof(__m128i));
	if (tab == NULL) {
		return -1;
	}
	for (int x = 0; x < out_w; x++) {
		int n = bounds[2 * x + 1];
		const int32_t *k = kk + (size_t)x * ksize;
		for (int j = 0; j < (n + 1) / 2; j++) {
			int32_t k0 = k[2 * j], k1 = 2 * j + 1 < n ? k[2 * j + 1] : 0;
			int16_t l0 = k0 & 2047, l1 = k1 & 2047, h0 = k0 >> 11, h1 = k1 >> 11;
			tab[((size_t)x * npmax + j) * 2] = _mm_setr_epi16(l0, l1, l0, l1, l0, l1, 0, 0);
			tab[((size_t)x * npmax + j) * 2 + 1] = _mm_setr_epi16(h0, h1, h0, h1, h0, h1, 0, 0);
		}
	}
	const __m128i init = _mm_set1_epi32(1 << (PRECISION_BITS - 1));
	const __m128i shuf = _mm_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
	for (int y = 0; y < rows; y++) {
		const unsigned char *s = src + (size_t)y * src_stride;
		unsigned char *d = dst + (size_t)y * dst_stride;
		for (int x = 0; x < out_w; x++) {
			int xmin = bounds[2 * x], n = bounds[2 * x + 1], np = (n + 1) / 2;
			const unsigned char *p = s + 3 * xmin;
			if (3 * xmin + 6 * np + 2 > 3 * src_w) {
				epochfs_h_pixel(d + 3 * x, p, kk + (size_t)x * ksize, n);
				continue;
			}
			const __m128i *t = tab + (size_t)x * npmax * 2;
			__m128i lo = init, hi = _mm_setzero_si128();
			for (int j = 0; j < np; j++) {
				__m128i v = _mm_shuffle_epi8(_mm_loadl_epi64((const __m128i *)(p + 6 * j)), shuf);
				lo = _mm_add_epi32(lo, _mm_madd_epi16(v, t[2 * j]));
				hi = _mm_add_epi32(hi, _mm_madd_epi16(v, t[2 * j + 1]));
			}
			__m128i acc = _mm_srai_epi32(_mm_add_epi32(lo, _mm_slli_epi32(hi, 11)), PRECISION_BITS);
			acc = _mm_packus_epi16(_mm_packs_epi32(acc, acc), acc);
			int32_t px = _mm_cvtsi128_si32(acc);
			if (x + 1 < out_w) {
				// The fourth byte lands on the next pixel, written next.
				memcpy(d + 3 * x, &px, 4);
			} else {
				d[3 * x] = px & 255;
				d[3 * x + 1] = (px >> 8) & 255;
				d[3 * x + 2] = (px >> 16) & 255;
			}
		}
	}
	free(tab);
	return 0;
}

static int epochfs_have_sse41(void) {
	__builtin_cpu_init();
	return __builtin_cpu_supports("sse4.1");
}

static int epochfs_have_avx2(void) {
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2");
}

// Vertical pass (Pillow's ImagingResampleVertical_8bpc), accumulating
// whole rows so the inner loop vectorises. acc holds n3 int32. This is
// the baseline build (SSE2, whose 32-bit multiply the compiler emulates).
static void epochfs_resample_v(unsigned char *dst, int dst_stride, int n3, int out_h,
		const unsigned char *src, int src_stride, int ksize,
		const int32_t *bounds, const int32_t *kk, int32_t *acc) {
	for (int y = 0; y < out_h; y++) {
		int ymin = bounds[2 * y], n = bounds[2 * y + 1];
		const int32_t *k = kk + (size_t)y * ksize;
		for (int x = 0; x < n3; x++) acc[x] = 1 << (PRECISION_BITS - 1);
		for (int i = 0; i < n; i++) {
			const unsigned char *row = src + (size_t)(ymin + i) * src_stride;
			int32_t w = k[i];
			for (int x = 0; x < n3; x++) acc[x] += row[x] * w;
		}
		unsigned char *d = dst + (size_t)y * dst_stride;
		for (int x = 0; x < n3; x++) d[x] = epochfs_clip8(acc[x]);
	}
}

// The vertical pass with AVX2, 32 bytes of an output row at a time: the
// four accumulators (8 lanes of vpmulld each) stay in registers over all
// the taps, then a shift and two saturating packs clamp them, as
// epochfs_clip8 does, and a permute undoes the packs' lane order. The
// same integer arithmetic as the scalar loop, which does the row's tail.
__attribute__((target("avx2")))
static void epochfs_resample_v_avx2(unsigned char *dst, int dst_stride, int n3, int out_h,
		const unsigned char *src, int src_stride, int ksize,
		const int32_t *bounds, const int32_t *kk) {
	const __m256i init = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
	const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	for (int y = 0; y < out_h; y++) {
		int ymin = bounds[2 * y], n = bounds[2 * y + 1];
		const int32_t *k = kk + (size_t)y * ksize;
		const unsigned char *top = src + (size_t)ymin * src_stride;
		unsigned char *d = dst + (size_t)y * dst_stride;
		int x = 0;
		for (; x + 32 <= n3; x += 32) {
			__m256i a0 = init, a1 = init, a2 = init, a3 = init;
			const unsigned char *row = top + x;
			for (int i = 0; i < n; i++, row += src_stride) {
				__m256i w = _mm256_set1_epi32(k[i]);
				a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)row)), w));
				a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + 8))), w));
				a2 = _mm256_add_epi32(a2, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + 16))), w));
				a3 = _mm256_add_epi32(a3, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + 24))), w));
			}
			a0 = _mm256_srai_epi32(a0, PRECISION_BITS);
			a1 = _mm256_srai_epi32(a1, PRECISION_BITS);
			a2 = _mm256_srai_epi32(a2, PRECISION_BITS);
			a3 = _mm256_srai_epi32(a3, PRECISION_BITS);
			__m256i b = _mm256_packus_epi16(_mm256_packs_epi32(a0, a1), _mm256_packs_epi32(a2, a3));
			_mm256_storeu_si256((__m256i *)(d + x), _mm256_permutevar8x32_epi32(b, order));
		}
		for (; x < n3; x++) {
			int32_t acc = 1 << (PRECISION_BITS - 1);
			const unsigned char *row = top + x;
			for (int i = 0; i < n; i++, row += src_stride) acc += *row * k[i];
			d[x] = epochfs_clip8(acc);
		}
	}
}

// The vertical pass: AVX2 when the CPU has it, else the baseline with its
// row accumulator (n3 int32, from malloc so that Go does not allocate it
// per sample). Returns -1 if malloc fails.
static int epochfs_resample_v_any(int avx2, unsigned char *dst, int dst_stride, int n3, int out_h,
		const unsigned char *src, int src_stride, int ksize,
		const int32_t *bounds, const int32_t *kk) {
	if (avx2) {
		epochfs_resample_v_avx2(dst, dst_stride, n3, out_h, src, src_stride, ksize, bounds, kk);
		return 0;
	}
	int32_t *acc = malloc((size_t)n3 * sizeof(int32_t));
	if (acc == NULL) {
		return -1;
	}
	epochfs_resample_v(dst, dst_stride, n3, out_h, src, src_stride, ksize, bounds, kk, acc);
	free(acc);
	return 0;
}

// ToTensor (+ Normalize) through per-channel tables: packed RGB rows to
// planar float32. (An AVX2 build of this loop was slower here: the
// compiler's gathers cost more than the scalar table lookups.)
#define EPOCHFS_TO_FLOAT_BODY \
	size_t n = (size_t)w * h; \
	float *r = dst, *g = dst + n, *b = dst + 2 * n; \
	const float *l0 = lut, *l1 = lut + 256, *l2 = lut + 512; \
	for (int y = 0; y < h; y++) { \
		const unsigned char *s = src + (size_t)y * stride; \
		size_t o = (size_t)y * w; \
		for (int x = 0; x < w; x++) { \
			r[o + x] = l0[s[3 * x]]; \
			g[o + x] = l1[s[3 * x + 1]]; \
			b[o + x] = l2[s[3 * x + 2]]; \
		} \
	}

static void epochfs_to_float_chw(const unsigned char *src, int stride, int w, int h,
		const float *lut, float *dst) {
	EPOCHFS_TO_FLOAT_BODY
}
*/
import "C"

import "unsafe"

// haveSSE41 is fixed at start-up by the CPU (a constant fact, not state).
var (
	haveSSE41 = C.epochfs_have_sse41() != 0
	haveAVX2  = C.epochfs_have_avx2() != 0
)

// The passes run in C (the same arithmetic as resampleHGo/resampleVGo,
// which the tests compare byte for byte): Go's compiler neither
// vectorises nor drops the bounds checks of these loops, and they are
// most of the time of a resize.

func resampleH(dst, src *Image, yOff int, c coeffs) {
	if dst.H == 0 || dst.W == 0 {
		return
	}
	// Bounds are checked by precompute (xmin+n <= src.W) and by the
	// callers (rows yOff..yOff+dst.H exist in src).
	_ = src.Row(yOff + dst.H - 1)
	if haveSSE41 {
		if C.epochfs_resample_h_sse41((*C.uchar)(unsafe.Pointer(&dst.Pix[0])), C.int(dst.Stride), C.int(dst.W), C.int(dst.H),
			(*C.uchar)(unsafe.Pointer(&src.Row(yOff)[0])), C.int(src.Stride), C.int(src.W), C.int(c.ksize),
			(*C.int32_t)(unsafe.Pointer(&c.bounds[0])), (*C.int32_t)(unsafe.Pointer(&c.kk[0]))) != 0 {
			panic("preprocess: resample: out of C memory")
		}
		return
	}
	C.epochfs_resample_h((*C.uchar)(unsafe.Pointer(&dst.Pix[0])), C.int(dst.Stride), C.int(dst.W), C.int(dst.H),
		(*C.uchar)(unsafe.Pointer(&src.Row(yOff)[0])), C.int(src.Stride), C.int(c.ksize),
		(*C.int32_t)(unsafe.Pointer(&c.bounds[0])), (*C.int32_t)(unsafe.Pointer(&c.kk[0])))
}

func resampleV(dst, src *Image, c coeffs) {
	if dst.H == 0 || dst.W == 0 {
		return
	}
	if C.epochfs_resample_v_any(C.int(b2i(haveAVX2)), (*C.uchar)(unsafe.Pointer(&dst.Pix[0])), C.int(dst.Stride), C.int(3*dst.W), C.int(dst.H),
		(*C.uchar)(unsafe.Pointer(&src.Pix[0])), C.int(src.Stride), C.int(c.ksize),
		(*C.int32_t)(unsafe.Pointer(&c.bounds[0])), (*C.int32_t)(unsafe.Pointer(&c.kk[0]))) != 0 {
		panic("preprocess: resample: out of C memory")
	}
}

func toFloatCHW(img *Image, lut *[3][256]float32) *Tensor {
	out := make([]float32, 3*img.W*img.H)
	toFloatCHWInto(out, img, lut)
	return &Tensor{DType: Float32, Shape: []int{3, img.H, img.W}, F32: out}
}

// toFloatCHWInto writes ToTensor (+ Normalize) of img into out (3×W×H
// float32, CHW).
func toFloatCHWInto(out []float32, img *Image, lut *[3][256]float32) {
	n := img.W * img.H
	if n == 0 {
		return
	}
	_ = img.Row(img.H - 1)
	_ = out[3*n-1]
	C.epochfs_to_float_chw((*C.uchar)(unsafe.Pointer(&img.Pix[0])), C.int(img.Stride), C.int(img.W), C.int(img.H),
		(*C.float)(unsafe.Pointer(&lut[0][0])), (*C.float)(unsafe.Pointer(&out[0])))
}
