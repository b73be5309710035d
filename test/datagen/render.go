package datagen

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"math"
	"math/rand/v2"
)

// Knobs of the size search. Quality stays in the band real photo JPEGs use
// until a target needs more bytes than that gives; then grain (sensor-like
// noise, in 8-bit levels) adds the texture smooth wallpapers lack, and last
// quality rises to its maximum.
const (
	minQuality = 20
	capQuality = 95
	maxQuality = 99
	maxGrain   = 64.0
	// A sample is accepted when its log size is within [-sizeTolLow,
	// +sizeTolHigh] of its target's; the window is symmetric, so the mean
	// size matches the mean target (measured: within ~0.5% over 300 files).
	sizeTolLow  = 0.06
	sizeTolHigh = 0.06
	// Encodes tried per sample before the closest one is kept.
	maxEncodes = 6
	// Log-space spread of per-sample size targets around MeanBytes, and
	// how far (in standard deviations) a target may stray.
	sizeSigma = 0.4
	sizeClip  = 2.0
	// The search starts where the photo's calibration crop (photo.bpp: bytes
	// per pixel at quality 90, grain calGrain) says the sample lands on its
	// target, assuming startSlope in log(size) per unit of the search
	// variable u (knobs). Later steps assume stepSlope until two tries
	// bracket the target.
	calGrain   = 4.0
	startSlope = 0.5
	stepSlope  = 0.5
	// Fraction of grayscale samples (ImageNet has a small share of
	// single-channel JPEGs, and decoders must handle them).
	grayFrac = 0.015
	// Fraction of samples of a class cropped from that class's own photo,
	// so classes differ visibly and a demo model has something to learn.
	homeFrac = 0.6
)

// splitmix64 is the SplitMix64 finalizer, used to turn (seed, index) into
// well-mixed, independent RNG seeds.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// sampleRNG is the random source of sample i: it depends only on the seed
// and i, so workers may render samples in any order.
func sampleRNG(seed int64, i int, stream uint64) *rand.Rand {
	a := splitmix64(uint64(seed) ^ splitmix64(uint64(i)+1))
	b := splitmix64(a ^ stream)
	return rand.New(rand.NewPCG(a, b))
}

// plan is everything about one sample that is drawn from its RNG.
type plan struct {
	photo          int
	w, h           int
	x0, y0, cw, ch float64
	flip, gray     bool
	contrast, sat  float64
	bright         float64
	grain          float64
	target         float64 // bytes
	noiseSeed      uint64
}

// makePlan draws sample i's crop, size, look and byte target.
func makePlan(o *Options, nPhotos int, home []int, i int) plan {
	r := sampleRNG(o.Seed, i, 1)
	class := i % o.Classes
	var p plan
	if r.Float64() < homeFrac {
		p.photo = home[class%len(home)]
	} else {
		p.photo = r.IntN(nPhotos)
	}
	// Dimensions: a common scale and a small per-side jitter, each side kept
	// within ±20% of nominal; one sample in six is portrait.
	// Lognormal byte target with mean MeanBytes. The normal quantile comes
	// from a golden-ratio sequence rather than the RNG, so every prefix of
	// the dataset (and every class) already has the intended spread and
	// mean. Larger targets get somewhat larger pictures, as in real data.
	z := sizeQuantile(o.Seed, i)
	p.target = float64(o.MeanBytes) * math.Exp(sizeSigma*z-sizeSigma*sizeSigma/2) / clippedMean
	s := 1 + 0.09*z + 0.06*(2*r.Float64()-1)
	p.w = jitterSide(o.Width, s*(0.96+0.08*r.Float64()))
	p.h = jitterSide(o.Height, s*(0.96+0.08*r.Float64()))
	if r.IntN(6) == 0 {
		p.w, p.h = p.h, p.w
	}
	p.flip = r.IntN(2) == 0
	p.gray = r.Float64() < grayFrac
	p.contrast = 0.85 + 0.3*r.Float64()
	p.sat = 0.7 + 0.6*r.Float64()
	p.bright = 20 * (r.Float64() - 0.5)
	p.grain = 2 + 4*r.Float64()
	p.noiseSeed = r.Uint64()
	// Crop fraction is chosen later against the photo's size; keep two
	// uniforms for it so the plan is drawn in one fixed order.
	p.x0, p.y0, p.cw = r.Float64(), r.Float64(), r.Float64()
	return p
}

// sizeQuantile is the standard normal quantile of sample i's size target,
// clipped to ±sizeClip: z = Φ⁻¹(frac(offset + i·φ)).
func sizeQuantile(seed int64, i int) float64 {
	const phi = 0.6180339887498949
	off := float64(splitmix64(uint64(seed)^0x5eed)>>11) / (1 << 53)
	u := math.Mod(off+float64(i)*phi, 1)
	u = math.Max(1e-9, math.Min(1-1e-9, u))
	z := math.Sqrt2 * math.Erfinv(2*u-1)
	return math.Max(-sizeClip, math.Min(sizeClip, z))
}

// clippedMean is E[exp(σZ - σ²/2)] for Z standard normal clipped to ±c, the
// factor that keeps the mean target at MeanBytes despite the clipping.
var clippedMean = func() float64 {
	s, c := sizeSigma, sizeClip
	cdf := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	return cdf(c-s) - cdf(-c-s) +
		math.Exp(s*c-s*s/2)*(1-cdf(c)) + math.Exp(-s*c-s*s/2)*cdf(-c)
}()

func jitterSide(nominal int, f float64) int {
	f = math.Max(0.8, math.Min(1.2, f))
	return max(8, int(math.Round(float64(nominal)*f)))
}

// placeCrop turns the plan's uniforms into a crop rectangle of the photo with
// the sample's aspect ratio, covering 35%–100% of the largest such rectangle
// by side, never smaller than the sample itself (no upscaling where avoidable).
func (p *plan) placeCrop(photo *photo) {
	ph := photo.levels[0]
	aspect := float64(p.w) / float64(p.h)
	maxW := math.Min(float64(ph.w), float64(ph.h)*aspect)
	maxH := maxW / aspect
	minF := math.Min(1, math.Max(0.35, float64(p.w)/maxW))
	f := minF + (1-minF)*p.cw
	p.cw, p.ch = maxW*f, maxH*f
	p.x0 = (float64(ph.w) - p.cw) * p.x0
	p.y0 = (float64(ph.h) - p.ch) * p.y0
}

// base renders the sample's pixels before grain: crop (from the smallest
// pyramid level that still has at least the sample's resolution), scale,
// flip, colour. It returns 3 channels, or 1 for a grayscale sample.
func (p *plan) base(photo *photo) []uint8 {
	l0 := photo.levels[0]
	ph := l0
	for _, l := range photo.levels[1:] {
		f := float64(l.w) / float64(l0.w)
		if p.cw*f < float64(p.w) || p.ch*f < float64(p.h) {
			break
		}
		ph = l
	}
	f := float64(ph.w) / float64(l0.w)
	img := resample(ph, p.x0*f, p.y0*f, p.cw*f, p.ch*f, p.w, p.h)
	n := p.w * p.h
	ch := 3
	if p.gray {
		ch = 1
	}
	out := make([]uint8, n*ch)
	for y := 0; y < p.h; y++ {
		for x := 0; x < p.w; x++ {
			sx := x
			if p.flip {
				sx = p.w - 1 - x
			}
			s := img.pix[(y*p.w+sx)*3:]
			r, g, b := float64(s[0]), float64(s[1]), float64(s[2])
			l := 0.299*r + 0.587*g + 0.114*b
			d := (y*p.w + x) * ch
			if p.gray {
				out[d] = u8((l-128)*p.contrast + 128 + p.bright)
				continue
			}
			for c, v := range [3]float64{r, g, b} {
				v = l + (v-l)*p.sat
				out[d+c] = u8((v-128)*p.contrast + 128 + p.bright)
			}
		}
	}
	return out
}

func u8(v float64) uint8 {
	if v <= 0 {
		return 0
	}
	if v >= 255 {
		return 255
	}
	return uint8(v + 0.5)
}

// unitNoise is a fixed triangular noise field in [-1, 1)·128, luma first then
// chroma, so changing the grain amplitude rescales the same pattern.
func unitNoise(seed uint64, n int) []int16 {
	r := rand.New(rand.NewPCG(seed, splitmix64(seed)))
	out := make([]int16, n)
	for i := 0; i < n; i += 4 {
		u := r.Uint64()
		for k := 0; k < 4 && i+k < n; k++ {
			a, b := int16(u&0xff), int16((u>>8)&0xff)
			out[i+k] = a - b // triangular in (-255, 255)
			u >>= 16
		}
	}
	return out
}

// withGrain adds the scaled noise field to base and wraps the result as an
// image the JPEG encoder has a fast path for.
func (p *plan) withGrain(base []uint8, noise []int16, grain float64) image.Image {
	n := p.w * p.h
	k := int32(grain * 256 / 255) // noise units are 1/255 of a level·255
	if p.gray {
		g := image.NewGray(image.Rect(0, 0, p.w, p.h))
		for i := 0; i < n; i++ {
			g.Pix[i] = clampInt(int32(base[i]) + (int32(noise[i])*k)>>8)
		}
		return g
	}
	m := image.NewRGBA(image.Rect(0, 0, p.w, p.h))
	kc := k / 3
	for i := 0; i < n; i++ {
		lum := (int32(noise[i]) * k) >> 8
		cn := (int32(noise[n+i]) * kc) >> 8
		s, d := base[i*3:i*3+3], m.Pix[i*4:i*4+4]
		d[0] = clampInt(int32(s[0]) + lum + cn)
		d[1] = clampInt(int32(s[1]) + lum)
		d[2] = clampInt(int32(s[2]) + lum - cn)
		d[3] = 0xff
	}
	return m
}

func clampInt(v int32) uint8 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

func encode(buf *bytes.Buffer, img image.Image, q int) (int, error) {
	buf.Reset()
	if err := jpeg.Encode(buf, img, &jpeg.Options{Quality: q}); err != nil {
		return 0, fmt.Errorf("datagen: encode: %w", err)
	}
	return buf.Len(), nil
}

// knobs maps the search variable u to (quality, grain). Over each stretch of u
// the JPEG size grows about exponentially, log(size) ≈ a + b·u with b near
// 0.5, which is what makes a secant search converge in two or three encodes:
//
//	u ≤ 0: quality from minQuality to capQuality, u = -log(libjpeg scale)
//	0 < u ≤ uGrain: grain from the sample's own to maxGrain (log scale)
//	u > uGrain: quality from capQuality to maxQuality at maxGrain
func knobs(u, grain0 float64) (q int, grain float64) {
	uGrain := math.Log(maxGrain / grain0)
	switch {
	case u <= 0:
		return qualityAt(jpegScale(capQuality) * math.Exp(-u)), grain0
	case u <= uGrain:
		return capQuality, grain0 * math.Exp(u)
	default:
		return qualityAt(jpegScale(capQuality) * math.Exp(-(u - uGrain))), maxGrain
	}
}

func knobRange(grain0 float64) (lo, hi float64) {
	lo = -math.Log(jpegScale(minQuality) / jpegScale(capQuality))
	hi = math.Log(maxGrain/grain0) + math.Log(jpegScale(capQuality)/jpegScale(maxQuality))
	return lo, hi
}

// jpegScale is libjpeg's (and image/jpeg's) quantization-table scale for a
// quality setting; qualityAt inverts it.
func jpegScale(q int) float64 {
	if q < 50 {
		return 5000 / float64(q)
	}
	return float64(200 - 2*q)
}

func qualityAt(scale float64) int {
	var q float64
	if scale > 100 {
		q = 5000 / scale
	} else {
		q = (200 - scale) / 2
	}
	return min(maxQuality, max(minQuality, int(math.Round(q))))
}

// encodeToTarget renders the sample and searches (quality, grain) for an
// encoding close to the plan's target (see sizeTolLow), keeping the closest of at
// most maxEncodes tries. buf holds the chosen encoding on return.
func (p *plan) encodeToTarget(ph *photo, buf, scratch *bytes.Buffer) (encodes int, err error) {
	base := p.base(ph)
	nNoise := p.w * p.h
	if !p.gray {
		nNoise *= 2
	}
	noise := unitNoise(p.noiseSeed, nNoise)
	lo, hi := knobRange(p.grain)
	want := math.Log(p.target)
	type try struct{ u, logSize float64 }
	var below, above *try // closest tries under and over the target
	var prev *try         // the last try
	bestErr := math.Inf(1)
	// Start where a typical sample would land on target.
	u := -math.Log(jpegScale(90)/jpegScale(capQuality)) + (want-math.Log(ph.bpp*float64(p.w*p.h)))/startSlope
	u = math.Max(lo, math.Min(hi, u))
	lastQ, lastG := -1, -1.0
	for n := 0; n < maxEncodes; n++ {
		q, g := knobs(u, p.grain)
		if q == lastQ && g == lastG {
			break // the knobs cannot move any closer
		}
		lastQ, lastG = q, g
		size, err := encode(scratch, p.withGrain(base, noise, g), q)
		if err != nil {
			return encodes, err
		}
		encodes++
		ls := math.Log(float64(size))
		e0 := math.Abs(ls - want)
		if e0 < bestErr {
			bestErr = e0
			buf.Reset()
			buf.Write(scratch.Bytes())
		}
		if d := ls - want; d > -sizeTolLow && d < sizeTolHigh && e0 == bestErr {
			break
		}
		t := &try{u, ls}
		if ls < want {
			below = t
		} else {
			above = t
		}
		// Regula falsi between the bracketing tries when there are two; else
		// a secant step through the last two tries, or a step along the
		// typical slope after the first. Always inside [lo, hi].
		switch {
		case below != nil && above != nil:
			f := (want - below.logSize) / (above.logSize - below.logSize)
			f = math.Max(0.1, math.Min(0.9, f)) // keep strictly inside the bracket
			u = below.u + f*(above.u-below.u)
		case prev != nil && t.u != prev.u:
			slope := (t.logSize - prev.logSize) / (t.u - prev.u)
			slope = math.Max(0.05, math.Min(2, slope))
			u = t.u + (want-ls)/slope
		default:
			u = t.u + (want-ls)/stepSlope
		}
		prev = t
		u = math.Max(lo, math.Min(hi, u))
	}
	return encodes, nil
}

// calibrate measures a photo's texture as JPEG bytes per pixel of a 500x375
// centre crop (70% of the largest 4:3 rectangle) at quality 90 and grain
// calGrain: the search's starting point for every sample cut from it.
func calibrate(ph *photo) (float64, error) {
	p := plan{w: 500, h: 375, contrast: 1, sat: 1, grain: calGrain, x0: 0.5, y0: 0.5, cw: 0.7}
	p.placeCrop(ph)
	var buf bytes.Buffer
	n, err := encode(&buf, p.withGrain(p.base(ph), unitNoise(1, 2*p.w*p.h), calGrain), 90)
	if err != nil {
		return 0, err
	}
	return float64(n) / float64(p.w*p.h), nil
}
