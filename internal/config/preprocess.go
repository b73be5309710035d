package config

import (
	"fmt"

	"github.com/epochfs/epochfs/internal/preprocess/spec"
)

// Preprocess is the [preprocess] section: the decode and augment pipeline
// behind the preprocessed views and `epochfs preprocess`. Step syntax is
// in internal/preprocess/spec ("resize:256", "center_crop:224",
// "random_resized_crop:224", "hflip:0.5").
type Preprocess struct {
	// Static steps are deterministic (the cacheable "decoded" form).
	Static []string `toml:"static"`
	// Augment steps are random (the "augmented" form).
	Augment []string `toml:"augment"`
	// Normalize is [[mean_r, mean_g, mean_b], [std_r, std_g, std_b]] or
	// empty; it needs output = "float32_chw".
	Normalize [][]float64 `toml:"normalize"`
	// Output is "uint8_hwc" (also when empty) or "float32_chw" (ToTensor:
	// [0, 1], then Normalize).
	Output string `toml:"output"`
	// Workers is the number of preprocessing workers, 0 = one per core.
	Workers int `toml:"workers"`
	// FastUpsample turns off libjpeg's fancy chroma upsampling: JPEG
	// decoding gets about 13 % faster, and pixels differ from PIL's by a
	// mean of under 1 (uint8) instead of not at all.
	FastUpsample bool `toml:"fast_upsample"`
	// MaxPixels: images declaring more pixels are refused before
	// decoding; 0 means DefaultMaxPixels.
	MaxPixels int64 `toml:"max_pixels"`
	// Seed seeds the augmentations of the mount's views: generation g of a
	// sample equals `epochfs preprocess --seed SEED+g` of its file.
	Seed uint64 `toml:"seed"`
	// DecodedCache and AugmentedCache are the views' cache budgets. Unset:
	// the DSI model's split of model.memory_budget when it is set, else
	// DefaultDecodedCache and DefaultAugmentedCache.
	DecodedCache   Size `toml:"decoded_cache"`
	AugmentedCache Size `toml:"augmented_cache"`
	// Views turns the preprocessed views of the mount on (default).
	Views *bool `toml:"views"`
	// MaxBatchBytes bounds one batch of a job (jobs/NAME/batch): a job
	// config whose batches would be larger is refused when it is written.
	MaxBatchBytes Size `toml:"max_batch_bytes"`
}

// The views' cache budgets when neither the config nor the model sets them:
// no decoded cache, and an augmented cache that holds what concurrent jobs
// with one pipeline share while the slower ones catch up.
const (
	DefaultDecodedCache   = 0
	DefaultAugmentedCache = 1 << 30
)

// ViewsOn reports whether the mount serves views.
func (p *Preprocess) ViewsOn() bool { return p.Views == nil || *p.Views }

// DefaultMaxPixels is PIL's Image.MAX_IMAGE_PIXELS.
const DefaultMaxPixels = 89478485

// DefaultPreprocess returns the [preprocess] defaults: torchvision's
// ImageNet training augmentation on the full decoded image.
func DefaultPreprocess() Preprocess {
	return Preprocess{
		Static:    []string{},
		Augment:   []string{"random_resized_crop:224", "hflip:0.5"},
		Output:    spec.OutputUint8HWC,
		Workers:   0,
		MaxPixels: DefaultMaxPixels,
	}
}

// Validate checks the [preprocess] section. Errors name the key and the
// bad step or value.
func (p *Preprocess) Validate() error {
	if _, err := spec.ParseList("preprocess.static", p.Static, false); err != nil {
		return err
	}
	if _, err := spec.ParseList("preprocess.augment", p.Augment, true); err != nil {
		return err
	}
	switch p.Output {
	case "", spec.OutputUint8HWC, spec.OutputFloat32CHW:
	default:
		return fmt.Errorf("preprocess.output = %q: want %q or %q", p.Output, spec.OutputUint8HWC, spec.OutputFloat32CHW)
	}
	if err := p.MaxBatchBytes.Err(); err != nil {
		return fmt.Errorf("preprocess.max_batch_bytes: %w", err)
	}
	if p.MaxBatchBytes.Raw != "" && p.MaxBatchBytes.Bytes < 1<<20 {
		return fmt.Errorf("preprocess.max_batch_bytes = %q: want at least 1MiB", p.MaxBatchBytes.Raw)
	}
	if err := spec.CheckNormalize(p.Normalize); err != nil {
		return fmt.Errorf("preprocess.normalize = %v: %w", p.Normalize, err)
	}
	if len(p.Normalize) > 0 && p.Output != spec.OutputFloat32CHW {
		return fmt.Errorf("preprocess.normalize: needs output = %q (output is %q)", spec.OutputFloat32CHW, p.OutputOrDefault())
	}
	if p.Workers < 0 || p.Workers > 1024 {
		return fmt.Errorf("preprocess.workers = %d: want 0 (one per core) to 1024", p.Workers)
	}
	for _, c := range []struct {
		key string
		v   Size
	}{{"decoded_cache", p.DecodedCache}, {"augmented_cache", p.AugmentedCache}} {
		if c.v.Raw == "" {
			continue
		}
		if err := c.v.Err(); err != nil {
			return fmt.Errorf("preprocess.%s: %w", c.key, err)
		}
		if c.v.Bytes < 0 {
			return fmt.Errorf("preprocess.%s = %q: must be 0 or more", c.key, c.v.Raw)
		}
	}
	if p.MaxPixels < 0 {
		return fmt.Errorf("preprocess.max_pixels = %d: want a number of pixels, or 0 for the default %d", p.MaxPixels, DefaultMaxPixels)
	}
	return nil
}

// OutputOrDefault is Output, or "uint8_hwc" when it is empty.
func (p *Preprocess) OutputOrDefault() string {
	if p.Output == "" {
		return spec.OutputUint8HWC
	}
	return p.Output
}
