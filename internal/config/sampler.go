package config

import (
	"fmt"
	"time"
)

// Sampler is the [sampler] section: the shared RAM buffer and the jobs of
// .epochfs/jobs/.
type Sampler struct {
	// Buffer is the shared buffer's RAM budget for whole files of
	// non-resident samples; "0" turns the buffer (prefetch and
	// substitution) off.
	Buffer Size `toml:"buffer"`
	// Lease: a job that has not read its next file for this long is
	// dropped (a Go duration, e.g. "2m"; "-1s" or any negative: never).
	Lease string `toml:"lease"`
	// Lookahead is the number of batches drawn ahead of each job's reads
	// and prefetched.
	Lookahead int `toml:"lookahead"`
	// MaxJobsPerUser bounds the live jobs of one user other than root; 0
	// means the default (a quarter of the mount's 63 job slots).
	MaxJobsPerUser int `toml:"max_jobs_per_user"`
}

// DefaultSampler returns the [sampler] defaults.
func DefaultSampler() Sampler {
	return Sampler{Buffer: NewSize("1GiB"), Lease: "2m", Lookahead: 2}
}

// LeaseDuration is Lease parsed (Validate first); 0 when unset (the
// sampler's default).
func (s *Sampler) LeaseDuration() time.Duration {
	d, _ := time.ParseDuration(s.Lease)
	return d
}

// Validate checks the [sampler] section.
func (s *Sampler) Validate() error {
	if err := s.Buffer.Err(); err != nil {
		return fmt.Errorf("sampler.buffer: %w", err)
	}
	if s.Buffer.Bytes < 0 {
		return fmt.Errorf("sampler.buffer = %q: must not be negative", s.Buffer.Raw)
	}
	d, err := time.ParseDuration(s.Lease)
	if err != nil {
		return fmt.Errorf("sampler.lease = %q: want a duration such as \"2m\" or \"90s\"", s.Lease)
	}
	if d == 0 {
		return fmt.Errorf("sampler.lease = %q: must not be zero (negative means never)", s.Lease)
	}
	if s.Lookahead < 1 || s.Lookahead > 64 {
		return fmt.Errorf("sampler.lookahead = %d: want 1 to 64", s.Lookahead)
	}
	if s.MaxJobsPerUser < 0 || s.MaxJobsPerUser > 63 {
		return fmt.Errorf("sampler.max_jobs_per_user = %d: want 1 to 63 (0: the default, 16)", s.MaxJobsPerUser)
	}
	return nil
}
