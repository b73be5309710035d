package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/epochfs/epochfs/jobs"
	"github.com/epochfs/epochfs/placement"
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
	case errors.Is(err, placement.ErrClosed):
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

// logOnce logs an unexpected error the first time its text is seen.
func (fsys *FS) logOnce(err error) {
	msg := err.Error()
	if _, loaded := fsys.seenErrs.LoadOrStore(msg, struct{}{}); !loaded {
		fsys.log.Error("unexpected error; answering EIO", zap.Error(err))
	}
}

var _ sync.Locker = (*sync.Mutex)(nil)
