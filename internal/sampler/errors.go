package sampler

import "errors"

// Sentinel errors. Every error returned by this package wraps one of these.
var (
	// ErrBadConfig: a job configuration is invalid.
	ErrBadConfig = errors.New("sampler: bad job config")
	// ErrBadOptions: an Options value is invalid.
	ErrBadOptions = errors.New("sampler: bad options")
	// ErrNoJob: no live job has this name.
	ErrNoJob = errors.New("sampler: no such job")
	// ErrNoRank: the job has no rank of this number.
	ErrNoRank = errors.New("sampler: no such rank")
	// ErrLeaseExpired: the job was dropped because none of its ranks read
	// for the lease; it must register again.
	ErrLeaseExpired = errors.New("sampler: job lease expired")
	// ErrJobExists: RegisterJob of a name that is live.
	ErrJobExists = errors.New("sampler: job exists")
	// ErrTooManyJobs: MaxJobs jobs are live.
	ErrTooManyJobs = errors.New("sampler: too many jobs")
	// ErrRankAhead: the rank ended its epoch, and starting the next would
	// put it two epochs ahead of the slowest live rank of its job. Not a
	// failure: call NextRank again once another rank has read.
	ErrRankAhead = errors.New("sampler: rank is an epoch ahead of the slowest")
	// ErrStarted: Resume of a job a rank of which has read: a job
	// continues an interrupted run only from its start.
	ErrStarted = errors.New("sampler: the job has read already; resume a new job, before its first read")
	// ErrClaimPending: a cluster job's rank has nothing to read until
	// a claim made by another read of it (or of a rank of the job on this
	// node) returns. Not a failure: call NextRank again.
	ErrClaimPending = errors.New("sampler: a claim of the rank's samples is out")
)
