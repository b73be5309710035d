package preprocess

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
)

// Profiler lets the model's profiler (internal/model/profile) time a pipeline for
// T_D+A and T_A, and measure the bytes of a decoded and an augmented
// sample (M and M_A of the views rules). It satisfies profile.Pipeline and
// profile.Sizer without either package importing the other.
type Profiler struct {
	p   *Pipeline
	seq atomic.Uint64
}

// NewProfiler profiles p; closing p is the caller's.
func NewProfiler(p *Pipeline) *Profiler { return &Profiler{p: p} }

func (pp *Profiler) state(data []byte) *State {
	key := strconv.FormatUint(pp.seq.Add(1), 10)
	return &State{Key: key, Data: data, RNG: SampleRNG(1, key)}
}

func runSteps(st *State, steps []Step) error {
	ctx := context.Background()
	for _, s := range steps {
		if err := s(ctx, st); err != nil {
			return err
		}
	}
	return nil
}

// DecodeAugment is a sample from the encoded form to the tensor (T_D+A).
func (pp *Profiler) DecodeAugment(encoded []byte) error {
	return runSteps(pp.state(encoded), pp.p.EncodedSteps())
}

// Decode is a sample to its decoded form, the input of Augment.
func (pp *Profiler) Decode(encoded []byte) (any, error) {
	st := pp.state(encoded)
	st.Keep = true
	if err := runSteps(st, pp.p.DecodedSteps()); err != nil {
		return nil, err
	}
	return st.Decoded, nil
}

func (pp *Profiler) augment(decoded any) (*State, error) {
	img, ok := decoded.(*Image)
	if !ok || img == nil {
		return nil, fmt.Errorf("preprocess: profile: not a decoded image")
	}
	st := pp.state(nil)
	st.Img, st.Owned, st.Decoded = img, false, img
	return st, runSteps(st, pp.p.AugmentSteps())
}

// Augment is a decoded sample to the tensor (T_A); decoded is not modified.
func (pp *Profiler) Augment(decoded any) error {
	_, err := pp.augment(decoded)
	return err
}

// DecodedBytes is the memory of a decoded sample in the decoded cache.
func (pp *Profiler) DecodedBytes(decoded any) int64 {
	if img, ok := decoded.(*Image); ok && img != nil {
		return img.Compact().Bytes()
	}
	return 0
}

// AugmentedBytes is the memory of the tensor made of a decoded sample.
func (pp *Profiler) AugmentedBytes(decoded any) (int64, error) {
	st, err := pp.augment(decoded)
	if err != nil {
		return 0, err
	}
	if st.Out == nil {
		return 0, fmt.Errorf("preprocess: profile: the pipeline made no tensor")
	}
	return st.Out.Bytes(), nil
}
