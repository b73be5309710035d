package sampler

import "errors"

// Sentinel errors. Every error returned by this package wraps one of these.
var (
	// ErrBadConfig: a job configuration or ctl config text is invalid.
	ErrBadConfig = errors.New("sampler: bad job config")
	// ErrBadOptions: an Options value is invalid.
	ErrBadOptions = errors.New("sampler: bad options")
	// ErrNoJob: no live job has this name.
	ErrNoJob = errors.New("sampler: no such job")
	// ErrLeaseExpired: the job was dropped because it did not read for the
	// lease; it must register again.
	ErrLeaseExpired = errors.New("sampler: job lease expired")
	// ErrJobExists: RegisterJob of a name that is live.
	ErrJobExists = errors.New("sampler: job exists")
	// ErrTooManyJobs: MaxJobs jobs are live.
	ErrTooManyJobs = errors.New("sampler: too many jobs")
)
