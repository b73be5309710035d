package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/internal/ctlpath"
	"github.com/epochfs/epochfs/internal/jobs"
	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/preprocess"
	"github.com/epochfs/epochfs/internal/source"
	"github.com/epochfs/epochfs/internal/views"
	"go.uber.org/zap"
)

// errInvalid marks a rejected ctl write; it becomes EINVAL.
var errInvalid = errors.New("invalid argument")

// errCtlRead marks a ctl file that could not be rendered (a cluster job's
// state while the cluster is unreachable): EIO, whatever the cause's own
// errno.
var errCtlRead = errors.New("cannot be read now")

// invalidError is a rejected ctl write with its reason.
type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == errInvalid }

// invalid returns an error that becomes EINVAL, with a reason for
// .epochfs/errors.
func invalid(format string, a ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, a...)}
}

// errnos is the one table of errors to errnos: an error gets the errno of
// the first entry with a sentinel it matches (errors.Is), so the order
// matters where an error matches two (a source error about a file that is
// gone is EIO, not ENOENT). TestEveryExportedErrorIsInTheErrnoTable
// checks that every exported Err* of the packages fs imports is here or
// on its list of errors that never reach a request, with the reason.
// Never hand a wrapped error to go-fuse's ToErrno: it does not unwrap.
var errnos = []struct {
	errs  []error
	errno syscall.Errno
	// quiet: the reason is logged where it happened; here at debug
	// level only.
	quiet bool
}{
	// A request past its source budget (internal/fs/ctx.go) fails as the source
	// did: before the interrupts, whose DeadlineExceeded it matches.
	{errs: []error{errBudget}, errno: syscall.EIO},
	// The request was interrupted (internal/fs/ctx.go), also when the wait it
	// ended was on the source.
	{errs: []error{context.Canceled, context.DeadlineExceeded}, errno: syscall.EINTR},
	{errs: []error{errCtlRead}, errno: syscall.EIO},
	{errs: []error{errInvalid, jobs.ErrInvalid, views.ErrInvalid, ctlpath.ErrBadQuote}, errno: syscall.EINVAL},
	{errs: []error{jobs.ErrExists}, errno: syscall.EEXIST},
	{errs: []error{jobs.ErrNoJob}, errno: syscall.ENOENT},
	{errs: []error{jobs.ErrTooMany, views.ErrTooMany}, errno: syscall.ENOSPC},
	// Not yet: the source is still walked.
	{errs: []error{jobs.ErrNotReady, jobs.ErrAttrsPending}, errno: syscall.EAGAIN},
	{errs: []error{catalog.ErrWalkStopped}, errno: syscall.EIO},
	{errs: []error{placement.ErrWarmupQuota, errDocBudget}, errno: syscall.EDQUOT},
	{errs: []error{placement.ErrNoEntry, catalog.ErrNoEntry, placement.ErrVanished}, errno: syscall.ENOENT},
	// Gone from the source, kept by the mass-deletion guard: not "no
	// such file" while the catalog still lists it.
	{errs: []error{placement.ErrDropHeld}, errno: syscall.EIO},
	{errs: []error{placement.ErrAccessChanged}, errno: syscall.EACCES},
	// Never the source's own errno: ENOTCONN from a dead network file
	// system reads as "the epochfs daemon died". The reason is in the
	// log (placement logs failing sources).
	{errs: []error{source.ErrSource, source.ErrChanged, source.ErrStuck, source.ErrTimeout,
		source.ErrUnavailable}, errno: syscall.EIO, quiet: true},
	{errs: []error{placement.ErrNotFile}, errno: syscall.EISDIR},
	// The mount is going down.
	{errs: []error{placement.ErrClosed, preprocess.ErrClosed, preprocess.ErrEngineClosed}, errno: syscall.EIO, quiet: true},
	// A sample the views' pipeline cannot make: its reason is in the
	// view's errors.
	{errs: []error{preprocess.ErrBadSample, preprocess.ErrCorrupt, preprocess.ErrTooLarge, preprocess.ErrUnsupported}, errno: syscall.EIO, quiet: true},
	// A directory on the file's source path became a symlink: the file
	// is gone from the dataset.
	{errs: []error{source.ErrSymlinkInPath, os.ErrNotExist}, errno: syscall.ENOENT},
	{errs: []error{os.ErrPermission}, errno: syscall.EACCES},
}

// toErrno maps an error from the layers below to the errno the kernel
// gets (the table errnos). It is the only place errors become errnos.
// An error the table does not know is EIO, logged once per kind.
func (fsys *FS) toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	for _, m := range errnos {
		for _, target := range m.errs {
			if errors.Is(err, target) {
				if m.quiet {
					if ce := fsys.log.Check(zap.DebugLevel, "answering "+m.errno.Error()); ce != nil {
						ce.Write(zap.Error(err))
					}
				}
				return m.errno
			}
		}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	fsys.logOnce(err)
	return syscall.EIO
}

// ioError is toErrno for a file's open or read: a failure of the source
// (or of the request's budget) is kept for .epochfs/errors, the caller's
// and root's, so that an EIO says why.
func (fsys *FS) ioError(ctx context.Context, path string, err error) syscall.Errno {
	if errors.Is(err, source.ErrSource) || errors.Is(err, errBudget) {
		fsys.errs.add(callerUID(ctx), path+": "+strings.ReplaceAll(err.Error(), "\n", " "))
		fsys.server.InodeNotify(inoErrors, -1, 0)
	}
	return fsys.toErrno(err)
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
