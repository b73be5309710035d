package jobs

import (
	"errors"
	"fmt"

	"github.com/epochfs/epochfs/internal/sampler"
)

// Errors the fs layer maps to errnos. Every error of this package wraps one
// of these, and the sampler's error it comes from, if any, or is the views
// package's (views.ErrInvalid, views.ErrTooMany: a job's views config or
// batch).
var (
	// ErrInvalid marks bad input (a job name or config): EINVAL.
	ErrInvalid = errors.New("jobs: invalid")
	// ErrExists: a job of that name is live (EEXIST).
	ErrExists = errors.New("jobs: job exists")
	// ErrNoJob: no live job or rank of that name (ENOENT).
	ErrNoJob = errors.New("jobs: no such job")
	// ErrTooMany: sampler.MaxJobs jobs are live (ENOSPC).
	ErrTooMany = errors.New("jobs: too many jobs")
)

// wrap gives a sampler error the sentinel of this package it maps to.
func wrap(err error) error {
	switch {
	case errors.Is(err, sampler.ErrNoJob), errors.Is(err, sampler.ErrLeaseExpired), errors.Is(err, sampler.ErrNoRank):
		return fmt.Errorf("%w (%w)", ErrNoJob, err)
	case errors.Is(err, sampler.ErrJobExists):
		return fmt.Errorf("%w (%w)", ErrExists, err)
	case errors.Is(err, sampler.ErrTooManyJobs):
		return fmt.Errorf("%w (%w)", ErrTooMany, err)
	case errors.Is(err, sampler.ErrBadConfig):
		return fmt.Errorf("%w (%w)", ErrInvalid, err)
	}
	return fmt.Errorf("jobs: %w", err)
}
