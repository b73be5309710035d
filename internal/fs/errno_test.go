package fs

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/preprocess"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// oddError is a wrapper of its own type.
type oddError struct{ err error }

func (e oddError) Error() string { return "odd: " + e.err.Error() }
func (e oddError) Unwrap() error { return e.err }

// Unexpected errors are logged once per kind, not once per text (a text
// holds a path: one per file), and the kinds remembered are bounded.
func TestUnexpectedErrorsAreLoggedOncePerKindWithinABound(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	fsys := &FS{log: zap.New(core)}
	for i := range 1000 {
		err := fmt.Errorf("read %d: %w", i, &fs.PathError{Op: "read", Path: fmt.Sprintf("f%d", i), Err: errors.New("odd")})
		if got := fsys.toErrno(err); got != syscall.EIO {
			t.Fatalf("an unexpected error: %v, want EIO", got)
		}
	}
	if n := logs.Len(); n != 1 {
		t.Fatalf("1000 errors of one kind logged %d times, want once", n)
	}
	// 128 kinds (chains of 7 wrappers of two types): maxErrKinds are
	// remembered (and logged at once), the rest within the rate limit.
	for i := range 128 {
		var err error = errors.New("x")
		for bit := range 7 {
			if i&(1<<bit) != 0 {
				err = oddError{err}
			} else {
				err = fmt.Errorf("w: %w", err)
			}
		}
		fsys.toErrno(err)
	}
	if len(fsys.seenErrs) != maxErrKinds {
		t.Errorf("%d error kinds remembered, want the bound %d", len(fsys.seenErrs), maxErrKinds)
	}
	if n := logs.Len(); n > maxErrKinds+1 {
		t.Errorf("%d lines logged for many kinds, want at most %d", n, maxErrKinds+1)
	}
}

// The errors of a mount going down are EIO without a log line.
func TestClosedErrorsAreMappedNotLogged(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	fsys := &FS{log: zap.New(core)}
	for _, err := range []error{placement.ErrClosed, fmt.Errorf("submit: %w", preprocess.ErrClosed), preprocess.ErrEngineClosed} {
		if got := fsys.toErrno(err); got != syscall.EIO {
			t.Errorf("%v: %v, want EIO", err, got)
		}
	}
	if logs.Len() != 0 {
		t.Errorf("closed errors logged as unexpected: %v", logs.All())
	}
}
