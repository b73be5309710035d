package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"

	"github.com/epochfs/epochfs/config"
	"github.com/epochfs/epochfs/preprocess"
)

// profilePipeline lets the model's profiler time our own preprocessing
// (the [preprocess] pipeline) for T_D+A and T_A.
type profilePipeline struct {
	p   *preprocess.Pipeline
	seq atomic.Uint64
}

func newProfilePipeline(pc config.Preprocess) (*profilePipeline, int, error) {
	p, err := preprocess.New(preprocess.Options{
		Static: pc.Static, Augment: pc.Augment, Normalize: pc.Normalize,
		Output: pc.OutputOrDefault(), MaxPixels: pc.MaxPixels, FastUpsample: pc.FastUpsample,
	})
	if err != nil {
		return nil, 0, fmt.Errorf("preprocess pipeline for the profile: %w", err)
	}
	workers := pc.Workers
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	return &profilePipeline{p: p}, workers, nil
}

func (pp *profilePipeline) state(data []byte) *preprocess.State {
	key := strconv.FormatUint(pp.seq.Add(1), 10)
	return &preprocess.State{Key: key, Data: data, RNG: preprocess.SampleRNG(1, key)}
}

func runSteps(st *preprocess.State, steps []preprocess.Step) error {
	ctx := context.Background()
	for _, s := range steps {
		if err := s(ctx, st); err != nil {
			return err
		}
	}
	return nil
}

// DecodeAugment is a sample from the encoded form to the tensor (T_D+A).
func (pp *profilePipeline) DecodeAugment(encoded []byte) error {
	return runSteps(pp.state(encoded), pp.p.EncodedSteps())
}

// Decode is a sample to its decoded form, the input of Augment.
func (pp *profilePipeline) Decode(encoded []byte) (any, error) {
	st := pp.state(encoded)
	st.Keep = true
	if err := runSteps(st, pp.p.DecodedSteps()); err != nil {
		return nil, err
	}
	return st.Decoded, nil
}

// Augment is a decoded sample to the tensor (T_A); decoded is not modified.
func (pp *profilePipeline) Augment(decoded any) error {
	img, ok := decoded.(*preprocess.Image)
	if !ok || img == nil {
		return fmt.Errorf("profile: not a decoded image")
	}
	st := pp.state(nil)
	st.Img, st.Owned, st.Decoded = img, false, img
	return runSteps(st, pp.p.AugmentSteps())
}

func (pp *profilePipeline) Close() error { return pp.p.Close() }
