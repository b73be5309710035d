package preprocess

import "errors"

// Sentinel errors. Every error returned by this package wraps one of these
// or an error from the caller (a step, a context).
var (
	// ErrCorrupt: the input is not a valid image (truncated, garbage,
	// empty, or rejected by the decoder).
	ErrCorrupt = errors.New("corrupt image")
	// ErrTooLarge: the image declares more pixels than Options.MaxPixels.
	// It is returned before any pixel memory is allocated.
	ErrTooLarge = errors.New("image too large")
	// ErrUnsupported: the input is an image format this package does not
	// decode (only JPEG and PNG are).
	ErrUnsupported = errors.New("unsupported image format")
	// ErrClosed: the pool or cache was closed.
	ErrClosed = errors.New("closed")
	// ErrBadOptions: an Options value is invalid.
	ErrBadOptions = errors.New("bad options")
)
