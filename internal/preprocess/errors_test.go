package preprocess

import (
	"errors"
	"fmt"
	"testing"
)

// The errors of a sample that cannot be made match ErrBadSample, wrapped
// or not, and stay distinct from each other and from the other errors.
func TestBadSampleErrorsMatchErrBadSample(t *testing.T) {
	for _, err := range []error{ErrCorrupt, ErrTooLarge, ErrUnsupported} {
		wrapped := fmt.Errorf("preprocess: decode a.jpg: %w", err)
		if !errors.Is(err, ErrBadSample) || !errors.Is(wrapped, ErrBadSample) || !errors.Is(wrapped, err) {
			t.Errorf("%v: does not match ErrBadSample or itself when wrapped", err)
		}
	}
	if errors.Is(ErrCorrupt, ErrTooLarge) || errors.Is(ErrClosed, ErrBadSample) || errors.Is(ErrBadOptions, ErrBadSample) {
		t.Error("distinct errors match each other")
	}
}
