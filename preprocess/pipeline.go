package preprocess

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/epochfs/epochfs/preprocess/spec"
)

// Options configures a Pipeline. It mirrors the [preprocess] config
// section; see spec for the step syntax.
type Options struct {
	// Static steps are deterministic; their output is the cacheable
	// "decoded" form (Seneca's D).
	Static []string
	// Augment steps are random; their output is the "augmented" form (A).
	Augment []string
	// Normalize is empty or [mean, std], three numbers each; it needs
	// Output float32_chw.
	Normalize [][]float64
	// Output is "uint8_hwc" (default) or "float32_chw" (ToTensor: [0, 1],
	// then Normalize).
	Output string
	// MaxPixels: hostile-input limit, 0 = DefaultMaxPixels.
	MaxPixels int64
	// NoDCTScaling always decodes JPEGs at full size.
	NoDCTScaling bool
	// ForceStdlib decodes JPEGs with Go's image/jpeg.
	ForceStdlib bool
	// FastUpsample: see DecoderOptions.FastUpsample.
	FastUpsample bool
}

// Pipeline is a parsed, validated preprocessing pipeline. It is safe for
// concurrent use; Close releases its decoder.
type Pipeline struct {
	static, augment []spec.Step
	float           bool
	lut             *[3][256]float32
	dec             *Decoder
	dct             bool
}

// New parses and checks opts.
func New(opts Options) (*Pipeline, error) {
	static, err := spec.ParseList("static", opts.Static, false)
	if err != nil {
		return nil, fmt.Errorf("preprocess: %w", err)
	}
	augment, err := spec.ParseList("augment", opts.Augment, true)
	if err != nil {
		return nil, fmt.Errorf("preprocess: %w", err)
	}
	if err := spec.CheckNormalize(opts.Normalize); err != nil {
		return nil, fmt.Errorf("preprocess: normalize: %v: %w", err, ErrBadOptions)
	}
	p := &Pipeline{static: static, augment: augment, dct: !opts.NoDCTScaling}
	switch opts.Output {
	case "", spec.OutputUint8HWC:
		if len(opts.Normalize) > 0 {
			return nil, fmt.Errorf("preprocess: normalize needs output %q: %w", spec.OutputFloat32CHW, ErrBadOptions)
		}
	case spec.OutputFloat32CHW:
		p.float = true
		p.lut = makeLUT(opts.Normalize)
	default:
		return nil, fmt.Errorf("preprocess: output %q: %w: want %q or %q", opts.Output, ErrBadOptions,
			spec.OutputUint8HWC, spec.OutputFloat32CHW)
	}
	p.dec, err = NewDecoder(DecoderOptions{MaxPixels: opts.MaxPixels, ForceStdlib: opts.ForceStdlib, FastUpsample: opts.FastUpsample})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Close releases the decoder.
func (p *Pipeline) Close() error { return p.dec.Close() }

// Decoder returns the pipeline's decoder.
func (p *Pipeline) Decoder() *Decoder { return p.dec }

// SampleRNG returns the random source for one sample: seeded from the
// run's seed and the sample's key, so a sample's augmentation does not
// depend on which worker ran it or in what order.
func SampleRNG(seed uint64, key string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(key))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// State is one sample moving through the steps of a pipeline (or of any
// Task given to a Pool).
type State struct {
	Key  string
	Data []byte     // encoded input
	RNG  *rand.Rand // the sample's random source
	// Img is the current image; Owned says the steps may modify it in
	// place (false while it may be shared, e.g. with the decoded cache).
	Img   *Image
	Owned bool
	// Decoded is the decoded form (decode + static steps), set once the
	// static steps have run.
	Decoded *Image
	// Out is the final tensor.
	Out *Tensor
	// Value is free for steps that are not image steps.
	Value any

	// Keep asks EncodedSteps to set Decoded (for a caller that caches
	// the decoded form); otherwise its buffer is recycled.
	Keep bool

	scratch      []byte // pooled buffer behind Img, recycled when Img is replaced
	denom        int    // the image is decoded at 1/denom of fullW×fullH
	fullW, fullH int
	crop         *Crop      // drawn before a fused decode
	box          [4]float64 // the crop in the coordinates of the decoded region // drawn before the decode when the crop drives DCT scaling
}

// Step is one unit of work on a sample. The pool times samples between
// steps; a long step may finish in the background.
type Step func(ctx context.Context, s *State) error

// EncodedSteps returns the steps from encoded bytes (State.Data) to the
// output tensor (State.Out): decode, static steps, augment steps, output.
// State.RNG must be set if the pipeline has augment steps.
func (p *Pipeline) EncodedSteps() []Step {
	steps := []Step{p.decodeStep}
	for _, st := range p.static {
		steps = append(steps, p.imageStep(st))
	}
	steps = append(steps, p.markDecoded(false))
	return append(steps, p.AugmentSteps()...)
}

// replace sets the image a step produced and recycles the buffer of the
// one it replaced, unless the decoded form is being kept.
func (p *Pipeline) replace(s *State, img *Image) {
	if s.scratch != nil && s.Decoded == nil && img != s.Img {
		p.dec.bufs.put(s.scratch)
	}
	s.scratch = nil
	s.Img, s.Owned = img, true
}

// DecodedSteps returns the steps from encoded bytes to the decoded form
// (State.Decoded), for filling the decoded cache.
func (p *Pipeline) DecodedSteps() []Step {
	steps := []Step{p.decodeStep}
	for _, st := range p.static {
		steps = append(steps, p.imageStep(st))
	}
	return append(steps, p.markDecoded(true))
}

// AugmentSteps returns the steps from the decoded form (State.Img, not
// modified) to the output tensor (State.Out).
func (p *Pipeline) AugmentSteps() []Step {
	var steps []Step
	for _, st := range p.augment {
		steps = append(steps, p.imageStep(st))
	}
	return append(steps, p.outputStep)
}

// markDecoded ends the static steps: with keep (or State.Keep) the image
// becomes the decoded form, compact and shared from then on.
func (p *Pipeline) markDecoded(keep bool) Step {
	return func(_ context.Context, s *State) error {
		if !keep && !s.Keep {
			return nil
		}
		if c := s.Img.Compact(); c != s.Img {
			p.replace(s, c)
		}
		s.scratch = nil // owned by the decoded form now
		s.Owned = false // the decoded form may be cached and shared
		s.Decoded = s.Img
		if s.denom != 1 {
			// Decoded small for a crop drawn in advance: not the
			// canonical decoded form, so not cacheable.
			s.Decoded = nil
		}
		return nil
	}
}

func (p *Pipeline) decodeStep(_ context.Context, s *State) error {
	if p.fusedCrop(s) {
		return p.decodeCrop(s)
	}
	var pick ScaleFunc
	if p.dct {
		pick = p.scaleFor(s)
	}
	scale := func(h Header) int {
		s.fullW, s.fullH = h.W, h.H
		if pick == nil {
			return 1
		}
		return pick(h)
	}
	img, denom, err := p.dec.Decode(s.Data, scale)
	if err != nil {
		return err
	}
	if denom == 1 {
		s.fullW, s.fullH = img.W, img.H
	}
	s.Img, s.Owned, s.denom, s.scratch = img, true, denom, img.Pix
	return nil
}

// scaleFor picks the DCT scale from the first static step when it is a
// Resize, like PIL's draft(): the largest 1/2, 1/4 or 1/8 that keeps the
// image at least dctMargin times as large as the resize's output.
func (p *Pipeline) scaleFor(s *State) ScaleFunc {
	if len(p.static) == 0 || p.static[0].Kind != spec.Resize {
		return nil
	}
	first := p.static[0]
	return func(h Header) int {
		ow, oh := resizeSize(first, h.W, h.H)
		return bestDenom(h.W, h.H, float64(ow), float64(oh))
	}
}

// fusedCrop reports whether the decode can be fused with a leading
// RandomResizedCrop: no static steps, and the full decoded form is not
// wanted.
func (p *Pipeline) fusedCrop(s *State) bool {
	return len(p.static) == 0 && len(p.augment) > 0 && p.augment[0].Kind == spec.RandomResizedCrop &&
		s.RNG != nil && !s.Keep
}

// decodeCrop draws the RandomResizedCrop from the header (as torchvision
// draws it from the full image), picks the DCT scale that keeps the crop
// at least dctMargin times the output size, and decodes only the crop.
func (p *Pipeline) decodeCrop(s *State) error {
	st := p.augment[0]
	img, denom, err := p.dec.DecodeRegion(s.Data, func(h Header) (int, Rect) {
		s.fullW, s.fullH = h.W, h.H
		c := RandomResizedCropParams(s.RNG, h.W, h.H, st.Scale, st.Ratio)
		d := 1
		if p.dct && h.Scalable {
			for _, cand := range []int{8, 4, 2} {
				if float64(c.W)/float64(cand) >= dctMargin*float64(st.W) && float64(c.H)/float64(cand) >= dctMargin*float64(st.H) {
					d = cand
					break
				}
			}
		}
		df := float64(d)
		bx0, by0 := float64(c.Left)/df, float64(c.Top)/df
		bx1, by1 := float64(c.Left+c.W)/df, float64(c.Top+c.H)/df
		x0, y0 := int(bx0), int(by0)
		x1 := min(int(math.Ceil(bx1)), scaled(h.W, d))
		y1 := min(int(math.Ceil(by1)), scaled(h.H, d))
		s.box = [4]float64{bx0 - float64(x0), by0 - float64(y0), bx1 - float64(x0), by1 - float64(y0)}
		s.crop = &c
		return d, Rect{X: x0, Y: y0, W: x1 - x0, H: y1 - y0}
	})
	if err != nil {
		return err
	}
	s.Img, s.Owned, s.denom, s.scratch = img, true, denom, img.Pix
	return nil
}

// dctMargin: a DCT-scaled image must stay this much larger than the next
// step's target. PIL's draft() uses 1; with it a sharp photo scaled to
// within a few percent of the target (so the bilinear filter hardly
// low-passes) differed from torchvision by a mean of 2.6 on the uint8
// scale; with 1.25 the worst measured was about 1.
const dctMargin = 1.25

func bestDenom(w, h int, needW, needH float64) int {
	for _, d := range []int{8, 4, 2} {
		if float64(scaled(w, d)) >= dctMargin*needW && float64(scaled(h, d)) >= dctMargin*needH {
			return d
		}
	}
	return 1
}

func (p *Pipeline) imageStep(st spec.Step) Step {
	switch st.Kind {
	case spec.Resize:
		return func(_ context.Context, s *State) error {
			if s.denom > 1 {
				// Decoded at 1/denom: the output size comes from the
				// full-size image, as torchvision computes it, and the box
				// is the full image in scaled coordinates.
				ow, oh := resizeSize(st, s.fullW, s.fullH)
				d := float64(s.denom)
				p.replace(s, resample(s.Img, [4]float64{0, 0, float64(s.fullW) / d, float64(s.fullH) / d}, ow, oh, p.dec.bufs))
				s.denom = 1
				return nil
			}
			if out := doResize(s.Img, st, p.dec.bufs); out != s.Img {
				p.replace(s, out)
			}
			return nil
		}
	case spec.CenterCrop:
		return func(_ context.Context, s *State) error {
			// A view keeps the scratch buffer alive; a padded crop
			// replaces it.
			if out, fresh := doCenterCrop(s.Img, st); fresh {
				p.replace(s, out)
			} else {
				s.Img = out
			}
			s.denom = 1
			return nil
		}
	case spec.RandomResizedCrop:
		return func(_ context.Context, s *State) error {
			if s.RNG == nil {
				return fmt.Errorf("preprocess: %s: no random source: %w", st.Text, ErrBadOptions)
			}
			if s.crop != nil {
				// Drawn before the decode, which decoded only the crop.
				s.crop = nil
				p.replace(s, resample(s.Img, s.box, st.W, st.H, p.dec.bufs))
				s.denom = 1
				return nil
			}
			c := RandomResizedCropParams(s.RNG, s.Img.W, s.Img.H, st.Scale, st.Ratio)
			p.replace(s, resample(s.Img.Sub(c.Left, c.Top, c.W, c.H),
				[4]float64{0, 0, float64(c.W), float64(c.H)}, st.W, st.H, p.dec.bufs))
			return nil
		}
	case spec.HFlip:
		return func(_ context.Context, s *State) error {
			if s.RNG == nil {
				return fmt.Errorf("preprocess: %s: no random source: %w", st.Text, ErrBadOptions)
			}
			if s.RNG.Float64() < st.P {
				if !s.Owned {
					s.Img, s.Owned = s.Img.Compact(), true
					if s.Img == s.Decoded {
						s.Img = copyImage(s.Img)
					}
				}
				flipInPlace(s.Img)
			}
			return nil
		}
	}
	panic("preprocess: unknown step kind " + string(st.Kind))
}

func copyImage(m *Image) *Image {
	out := NewImage(m.W, m.H)
	for y := 0; y < m.H; y++ {
		copy(out.Row(y), m.Row(y))
	}
	return out
}

func (p *Pipeline) outputStep(_ context.Context, s *State) error {
	if p.float {
		s.Out = toFloatCHW(s.Img, p.lut)
		p.replace(s, nil)
		return nil
	}
	img := s.Img
	if !s.Owned || img.Stride != 3*img.W || len(img.Pix) != 3*img.W*img.H {
		img = copyImage(img)
	}
	s.Out = &Tensor{DType: Uint8, Shape: []int{img.H, img.W, 3}, U8: img.Pix}
	return nil
}

// RunSteps runs steps over s in order.
func RunSteps(ctx context.Context, steps []Step, s *State) error {
	for _, st := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := st(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// Run preprocesses one encoded image: decode, static, augment, output.
func (p *Pipeline) Run(data []byte, rng *rand.Rand) (*Tensor, error) {
	s := &State{Data: data, RNG: rng}
	if err := RunSteps(context.Background(), p.EncodedSteps(), s); err != nil {
		return nil, err
	}
	return s.Out, nil
}

// Decode returns the decoded form (decode + static steps) of an image.
func (p *Pipeline) Decode(data []byte) (*Image, error) {
	s := &State{Data: data}
	if err := RunSteps(context.Background(), p.DecodedSteps(), s); err != nil {
		return nil, err
	}
	return s.Decoded, nil
}

// Augment turns a decoded form into the output tensor. img is not
// modified.
func (p *Pipeline) Augment(img *Image, rng *rand.Rand) (*Tensor, error) {
	s := &State{Img: img, Decoded: img, RNG: rng}
	if err := RunSteps(context.Background(), p.AugmentSteps(), s); err != nil {
		return nil, err
	}
	return s.Out, nil
}
