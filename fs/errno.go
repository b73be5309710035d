package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/jobs"
	"github.com/epochfs/epochfs/placement"
	"github.com/epochfs/epochfs/preprocess"
	"github.com/epochfs/epochfs/tier"
	"go.uber.org/zap"
)

// errInvalid marks a rejected ctl write; it becomes EINVAL.
var errInvalid = errors.New("invalid argument")

// invalidError is a rejected ctl write with its reason.
type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == errInvalid }

// invalid returns an error that becomes EINVAL, with a reason for
// .epochfs/errors.
func invalid(format string, a ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, a...)}
}

// toErrno maps an error from the layers below to the errno the kernel
// gets. It is the only place errors become errnos. Never hand a wrapped
// error to go-fuse's ToErrno: it does not unwrap.
func (fsys *FS) toErrno(err error) syscall.Errno {
	var errno syscall.Errno
	switch {
	case err == nil:
		return 0
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The request was interrupted (fs/ctx.go), also when the wait
		// it ended was on the source.
		return syscall.EINTR
	case errors.Is(err, errInvalid), errors.Is(err, jobs.ErrInvalid):
		return syscall.EINVAL
	case errors.Is(err, jobs.ErrExists):
		return syscall.EEXIST
	case errors.Is(err, jobs.ErrNoJob):
		return syscall.ENOENT
	case errors.Is(err, jobs.ErrTooMany):
		return syscall.ENOSPC
	case errors.Is(err, jobs.ErrNotReady):
		return syscall.EAGAIN
	case errors.Is(err, placement.ErrWalkStopped):
		return syscall.EIO
	case errors.Is(err, placement.ErrWarmupQuota):
		return syscall.EDQUOT
	case errors.Is(err, placement.ErrNoEntry):
		return syscall.ENOENT
	case errors.Is(err, placement.ErrVanished):
		return syscall.ENOENT
	case errors.Is(err, placement.ErrDropHeld):
		// Gone from the source, kept by the mass-deletion guard: not
		// "no such file" while the catalog still lists it.
		return syscall.EIO
	case errors.Is(err, placement.ErrAccessChanged):
		return syscall.EACCES
	case errors.Is(err, tier.ErrSource), errors.Is(err, tier.ErrSourceChanged):
		// Never the source's own errno: ENOTCONN from a dead network
		// file system reads as "the epochfs daemon died". The reason is
		// in the log (placement logs failing sources).
		if ce := fsys.log.Check(zap.DebugLevel, "source error; answering EIO"); ce != nil {
			ce.Write(zap.Error(err))
		}
		return syscall.EIO
	case errors.Is(err, placement.ErrNotFile):
		return syscall.EISDIR
	case errors.Is(err, placement.ErrClosed), errors.Is(err, preprocess.ErrClosed), errors.Is(err, preprocess.ErrEngineClosed):
		// The mount is going down.
		return syscall.EIO
	case errors.Is(err, os.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, os.ErrPermission):
		return syscall.EACCES
	case errors.As(err, &errno):
		return errno
	}
	fsys.logOnce(err)
	return syscall.EIO
}

// logOnce logs an unexpected error the first time its kind is seen: the
// types along its chain (an error text holds paths, so texts would be
// one per file). The kinds remembered are bounded; past the bound, one
// unexpected error is logged every 10 s at most.
func (fsys *FS) logOnce(err error) {
	kind := errKind(err)
	fsys.seenMu.Lock()
	_, seen := fsys.seenErrs[kind]
	log := !seen && len(fsys.seenErrs) < maxErrKinds
	if log {
		if fsys.seenErrs == nil {
			fsys.seenErrs = map[string]struct{}{}
		}
		fsys.seenErrs[kind] = struct{}{}
	} else if !seen && time.Since(fsys.seenLast) >= 10*time.Second {
		log = true
	}
	if log {
		fsys.seenLast = time.Now()
	}
	fsys.seenMu.Unlock()
	if log {
		fsys.log.Error("unexpected error; answering EIO", zap.String("kind", kind), zap.Error(err))
	}
}

// maxErrKinds bounds the unexpected error kinds logOnce remembers.
const maxErrKinds = 64

// errKind names an error by the types along its chain (the first branch
// of a joined error), e.g. "*fmt.wrapError>*fs.PathError>syscall.Errno".
func errKind(err error) string {
	var b strings.Builder
	for depth := 0; err != nil && depth < 8; depth++ {
		if depth > 0 {
			b.WriteByte('>')
		}
		fmt.Fprintf(&b, "%T", err)
		if e, ok := err.(syscall.Errno); ok {
			fmt.Fprintf(&b, "(%d)", int(e))
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			if errs := u.Unwrap(); len(errs) > 0 {
				err = errs[0]
			} else {
				err = nil
			}
		default:
			err = nil
		}
	}
	return b.String()
}
