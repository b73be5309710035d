package preprocess

import "errors"

// Sentinel errors. Every error returned by this package wraps one of these
// or an error from the caller (a step, a context).
var (
	// ErrBadSample: the input cannot be made into a sample. The three
	// errors below match it (errors.Is): callers that skip bad samples
	// check this one.
	ErrBadSample = errors.New("bad sample")
	// ErrCorrupt: the input is not a valid image (truncated, garbage,
	// empty, or rejected by the decoder).
	ErrCorrupt error = badSample("corrupt image")
	// ErrTooLarge: the image declares more pixels than Options.MaxPixels.
	// It is returned before any pixel memory is allocated.
	ErrTooLarge error = badSample("image too large")
	// ErrUnsupported: the input is an image format this package does not
	// decode (only JPEG and PNG are).
	ErrUnsupported error = badSample("unsupported image format")
	// ErrClosed: the pool or cache was closed.
	ErrClosed = errors.New("closed")
	// ErrBadOptions: an Options value is invalid.
	ErrBadOptions = errors.New("bad options")
)

// badSample is an error that matches ErrBadSample.
type badSample string

func (e badSample) Error() string        { return string(e) }
func (e badSample) Is(target error) bool { return target == ErrBadSample }
