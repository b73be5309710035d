package preprocess

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"unsafe"

	"github.com/epochfs/epochfs/internal/preprocess/spec"
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
		return nil, fmt.Errorf("preprocess: normalize: %w: %w", err, ErrBadOptions)
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
	// FNV-1a (hash/fnv's New64a), over the string without copying it.
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	return rand.New(rand.NewPCG(seed, h))
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

	scratch      []byte // pooled buffer behind Img, recycled when Img is replaced; never shared
	dataPooled   bool   // Data came from LoadFile: the decode step recycles it
	denom        int    // the image is decoded at 1/denom of fullW×fullH
	fullW, fullH int
	crop         Crop       // drawn before a fused decode (when cropped)
	cropped      bool       // crop was drawn before the decode
	box          [4]float64 // the crop in the coordinates of the decoded region
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

// replace sets the image a step produced (a fresh buffer, which becomes
// the sample's scratch) and recycles the buffer of the one it replaced.
// The decoded form is never scratch (markDecoded lets go of it), so a
// kept or cached decoded form is never recycled.
func (p *Pipeline) replace(s *State, img *Image) {
	if s.scratch != nil && img != s.Img {
		p.dec.bufs.put(s.scratch)
	}
	s.scratch = nil
	if img != nil {
		s.scratch = img.Pix
	}
	s.Img, s.Owned = img, true
}

// LoadFile reads the file at path into s.Data, in a buffer from the
// pipeline's pool that the decode step gives back once it has decoded it
// (so a long-running caller does not allocate a buffer per sample).
func (p *Pipeline) LoadFile(s *State, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("preprocess: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("preprocess: %w", err)
	}
	// One byte more than the size, so that reading the whole file ends
	// with io.EOF and not with a grown buffer; a file that grew since the
	// stat (or that has no size) is still read whole, as os.ReadFile does.
	n := 512
	if sz := fi.Size(); sz > 0 && sz < math.MaxInt32 {
		n = int(sz) + 1
	}
	buf := p.dec.bufs.get(n)
	read := 0
	for {
		if read == len(buf) {
			grown := p.dec.bufs.get(2 * len(buf))
			copy(grown, buf)
			p.dec.bufs.put(buf)
			buf = grown
		}
		m, err := f.Read(buf[read:])
		read += m
		if err == io.EOF {
			break
		}
		if err != nil {
			p.dec.bufs.put(buf)
			return fmt.Errorf("preprocess: %w", err)
		}
	}
	p.releaseData(s)
	s.Data, s.dataPooled = buf[:read], true
	return nil
}

// releaseData recycles s.Data if LoadFile read it.
func (p *Pipeline) releaseData(s *State) {
	if s.dataPooled {
		p.dec.bufs.put(s.Data)
		s.Data, s.dataPooled = nil, false
	}
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
	defer p.releaseData(s)
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
	h, err := p.dec.DecodeHeader(s.Data)
	if err != nil {
		return err
	}
	st := p.augment[0]
	s.fullW, s.fullH = h.W, h.H
	c := RandomResizedCropParams(s.RNG, h.W, h.H, st.Scale, st.Ratio)
	d := 1
	if p.dct && h.Scalable {
		for _, cand := range [...]int{8, 4, 2} {
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
	s.crop, s.cropped = c, true
	img, denom, err := p.dec.decodeRegion(s.Data, h, d, Rect{X: x0, Y: y0, W: x1 - x0, H: y1 - y0})
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
			if out, fresh := doCenterCrop(s.Img, st, p.dec.bufs); fresh {
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
			if s.cropped {
				// Drawn before the decode, which decoded only the crop.
				s.cropped = false
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
					// Shared (the decoded form): flip a copy.
					p.replace(s, copyImage(s.Img, p.dec.bufs))
				}
				flipInPlace(s.Img)
			}
			return nil
		}
	}
	panic("preprocess: unknown step kind " + string(st.Kind))
}

// copyImage returns a compact copy of m in a buffer from bufs.
func copyImage(m *Image, bufs *bufPool) *Image {
	out := &Image{W: m.W, H: m.H, Stride: 3 * m.W, Pix: bufs.get(3 * m.W * m.H)}
	for y := 0; y < m.H; y++ {
		copy(out.Row(y), m.Row(y))
	}
	return out
}

// outputStep converts the image into the output tensor, laid out as its
// .npy file in one pooled buffer (see Tensor), and recycles the image.
func (p *Pipeline) outputStep(_ context.Context, s *State) error {
	img := s.Img
	n := 3 * img.W * img.H
	// The tensor and its shape in one allocation.
	box := &struct {
		t     Tensor
		shape [3]int
	}{shape: [3]int{img.H, img.W, 3}}
	t := &box.t
	t.DType, t.Shape = Uint8, box.shape[:]
	size := n
	if p.float {
		t.DType, box.shape = Float32, [3]int{3, img.H, img.W}
		size = 4 * n
		if !littleEndian {
			// The file's '<f4' is not this machine's float32: keep a
			// plain tensor; NPY encodes it.
			s.Out = toFloatCHW(img, p.lut)
			p.replace(s, nil)
			return nil
		}
	}
	hl := npyHeaderLen(t.DType, t.Shape)
	file := p.dec.bufs.get(hl + size)
	appendNPYHeader(file[:0], t.DType, t.Shape)
	data := file[hl : hl+size : hl+size]
	if p.float {
		t.F32 = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(data))), n)
		toFloatCHWInto(t.F32, img, p.lut)
	} else {
		for y := 0; y < img.H; y++ {
			copy(data[3*img.W*y:], img.Row(y))
		}
		t.U8 = data
	}
	t.file, t.bufs = file, p.dec.bufs
	s.Out = t
	p.replace(s, nil)
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
