package config

// Preprocess is the [preprocess] section: the decode and augment pipeline.
// (Filled in by the preprocessing issue.)
type Preprocess struct{}

// DefaultPreprocess returns the [preprocess] defaults.
func DefaultPreprocess() Preprocess { return Preprocess{} }

// Validate checks the [preprocess] section.
func (p *Preprocess) Validate() error { return nil }
