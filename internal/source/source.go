// Package source reads the dataset's source, read-only: the directory a
// mount caches, on a shared parallel or network file system (Lustre, GPFS,
// NFS). It is not a tier: nothing is written to it, and every call counts
// (opens, reads, bytes) and shares one bandwidth cap (Limiter).
//
// The source may fail or hang. Every operation on it (stat, open, read,
// close, directory read) runs under a deadline: a call that does not
// return within Options.Timeout is abandoned and its caller gets
// ErrTimeout. The goroutine stuck in the
// system call is left behind (a syscall cannot be interrupted) and counted
// as "stuck" until the call returns; whatever it returns then is cleaned up
// (a late open is closed). At most MaxStuck calls may be stuck at once: past
// that, new calls fail at once with ErrStuck instead of pinning more
// threads on a dead server.
//
// Paths are resolved beneath a descriptor of the source root opened at
// Open, never through a symlink (beneath.go).
//
// An outage is not a deletion. When a PFS client goes away under a live
// mount (an admin remounts Lustre, autofs expires, sshfs dies), the source
// path becomes an empty directory of another file system, or the held root
// descriptor fails (ENOTCONN), and every file would look deleted. So the
// source records its root's identity (device, inode, file system type) at
// Open, and believes "does not exist" only while the root path still
// has that identity and the file's parent directory still exists; otherwise
// the source is unavailable: the operation fails with ErrUnavailable
// (an I/O error, never "does not exist"), and so does every operation after
// it, at once, until a check finds the identity back (at most one check per
// RecheckInterval). The identity is also checked, lazily, once per
// IdentityInterval by the next operation, and by Available. When it comes
// back, a root descriptor that died with the old client is opened again,
// and everything reads without a remount.
//
// Every error of a source operation is a *Error: it matches
// ErrSource with errors.Is (the fs layer answers EIO, never the source's own
// errno such as ENOTCONN, which users would take for a dead epochfs daemon)
// and unwraps to the underlying error (os.ErrNotExist stays detectable).
package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Errors of source operations.
var (
	// ErrSource matches every error of a source operation.
	ErrSource = errors.New("source")
	// ErrTimeout means the source did not answer within the timeout.
	ErrTimeout = errors.New("no answer within the source timeout")
	// ErrStuck means too many source calls are stuck already.
	ErrStuck = errors.New("too many source operations are stuck; failing fast")
	// ErrChanged means a source file's size or mtime differs from the
	// catalog's record.
	ErrChanged = errors.New("source: file changed")
	// ErrUnavailable means the source root no longer has the
	// identity it had at mount (its client went away): nothing it says
	// about a file's absence is believed.
	ErrUnavailable = errors.New("the source is unavailable")
	errRootChanged = fmt.Errorf("%w (its root is not the file system it was at mount)", ErrUnavailable)
)

// Error is a failed source operation.
type Error struct {
	Op   string // stat, open, read, close, readdir
	Path string // dataset-relative
	Err  error
}

func (e *Error) Error() string {
	return fmt.Sprintf("source: %s %s: %v", e.Op, e.Path, e.Err)
}
func (e *Error) Unwrap() error        { return e.Err }
func (e *Error) Is(target error) bool { return target == ErrSource }

// Stats are the exact counts of what the daemon took from the source.
type Stats struct {
	Opens    int64 // files opened
	Reads    int64 // read calls
	Bytes    int64 // bytes read
	Stats    int64 // metadata calls (stat, readdir) after the first walk
	Errors   int64 // operations that failed, "does not exist" excluded
	Timeouts int64 // operations abandoned at the timeout
	Stuck    int64 // abandoned operations still blocked in the source now
}

// Options configure a Source.
type Options struct {
	Root      string
	Bandwidth float64 // bytes/s cap on reads; 0 = none
	// Timeout bounds every operation (default DefaultTimeout).
	Timeout time.Duration
	// MaxStuck bounds the abandoned calls still blocked (default 256).
	MaxStuck int
	// MaxStuckPerUser bounds those of one user other than root (the
	// caller's uid comes with the context: WithUser), so that one user's
	// reads of a hung corner of the source never take the whole budget
	// (default a quarter of MaxStuck).
	MaxStuckPerUser int
	// ErrorBackoff is how long after a failed call, with no call succeeding
	// since, Failing reports true (default 2 s).
	ErrorBackoff time.Duration
	// IdentityInterval is how often, at most, an operation checks the
	// root's identity while nothing fails (default 1 s); RecheckInterval
	// how often, at most, one does while the source is unavailable or
	// failing (default 1 s).
	IdentityInterval, RecheckInterval time.Duration
	// ProbeInterval, if set, starts a prober that checks the root's
	// identity that often in the background (health.go); HungAfter is
	// how long a check may go unanswered before Health says
	// "unresponsive" (default the smaller of Timeout and 5 s).
	ProbeInterval, HungAfter time.Duration
	// OnNewMount, if set, is called (from its own goroutine) when the
	// root is found to be another mount of the source than the one held
	// (mounted again, or its client died and came back): the files it has
	// may differ from the old mount's.
	OnNewMount func()
	// Expect, if set, is the root's identity at an earlier mount: a
	// root that does not answer within Patience (default DefaultPatience),
	// fails, or is another file system, starts the source unavailable
	// instead of failing Open (resident copies are served; the
	// source is found again when its root answers as that file system).
	// Without it Open waits up to Timeout and fails.
	Expect   *RootIdentity
	Patience time.Duration
	// Logger logs the source going unavailable and coming back (once
	// each); nil logs nothing.
	Logger *zap.Logger
	// noOpenat2 resolves with the per-component walk (tests).
	noOpenat2 bool
	// testHook, if set, runs in every call before the operation; an error
	// fails the call (tests: a source that hangs or fails).
	testHook func(op, rel string) error
}

// DefaultTimeout is placement.source_timeout's default.
const DefaultTimeout = 30 * time.Second

// Source is the read-only dataset root on the shared file system. Every
// open, read and byte taken from it is counted, reads share one bandwidth
// cap, and every operation has a deadline.
type Source struct {
	o     Options
	log   *zap.Logger
	limit *Limiter

	// root resolves dataset paths; replaced when the root comes back after
	// its client died (the old descriptors are closed by Close: a call may
	// still hold one).
	root atomic.Pointer[beneath]
	id   rootID // the mount's identity; checkMu
	// found: the root answered at Open (id is the one it had then;
	// otherwise the earlier mount's, Options.Expect).
	found bool
	// mounts counts the new mounts of the source found since Open,
	// mountedAt (unix nanos) the last.
	mounts, mountedAt atomic.Int64
	oldMu             sync.Mutex
	oldRoots          []*beneath

	// Availability (see the package comment): unavailableSince is unix
	// nanos (0: available); lastCheck the last identity check.
	unavailableSince atomic.Int64
	lastCheck        atomic.Int64
	checkMu          sync.Mutex
	// checkStarted (unix nanos) is when the oldest identity check still
	// in the source began (0: none); lastAnswer when one last answered
	// (health.go).
	checkStarted, lastAnswer atomic.Int64
	probe                    *prober

	opens, reads, bytes, stats  atomic.Int64
	errs, timeouts, stuck, slow atomic.Int64
	stuckBy                     *xsync.MapOf[uint32, *atomic.Int64] // per user but root
	stuckPaths                  *xsync.MapOf[string, int32]         // abandoned calls still running, per file
	lastFail, lastOK            atomic.Int64                        // unix nanos of the last failed and succeeded calls
	bufs                        sync.Pool                           // read buffers (see ReadAt)
}

// Open opens the source described by o: a descriptor of its root
// directory, held until Close, and the root's identity.
func Open(o Options) (*Source, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxStuck <= 0 {
		o.MaxStuck = 256
	}
	if o.MaxStuckPerUser <= 0 {
		o.MaxStuckPerUser = max(1, o.MaxStuck/4)
	}
	if o.ErrorBackoff <= 0 {
		o.ErrorBackoff = 2 * time.Second
	}
	if o.IdentityInterval <= 0 {
		o.IdentityInterval = time.Second
	}
	if o.RecheckInterval <= 0 {
		o.RecheckInterval = time.Second
	}
	if o.HungAfter <= 0 {
		o.HungAfter = min(o.Timeout, 5*time.Second)
	}
	s := &Source{o: o, log: o.Logger, limit: NewLimiter(o.Bandwidth), stuckBy: xsync.NewMapOf[uint32, *atomic.Int64](), stuckPaths: xsync.NewMapOf[string, int32]()}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	wait := o.Timeout
	if o.Expect != nil {
		wait = min(wait, o.Patience)
		if wait <= 0 {
			wait = min(o.Timeout, DefaultPatience)
		}
	}
	b, id, err := openRootWithin(o.Root, o.noOpenat2, wait)
	now := time.Now().UnixNano()
	s.lastCheck.Store(now)
	switch {
	case err == nil && (o.Expect == nil || id.same(o.Expect.id())):
		s.root.Store(b)
		s.id, s.found = id, true
		s.lastAnswer.Store(now)
	case o.Expect == nil:
		return nil, fmt.Errorf("source %s: %w", o.Root, err)
	default:
		// An earlier mount knew the source: serve what it left
		// (resident copies, the catalog) and find the source when it
		// answers as the file system it was (checkIdentity).
		why := "the root is another file system than at the last mount (its client is not mounted?)"
		if err != nil {
			why = err.Error()
		} else {
			unix.Close(b.fd)
			s.lastAnswer.Store(now)
		}
		s.id = o.Expect.id()
		s.unavailableSince.Store(now)
		s.log.Error("the source is unavailable at mount: serving resident copies, failing other reads with EIO, dropping nothing",
			zap.String("source", o.Root), zap.String("why", why))
	}
	if o.ProbeInterval > 0 {
		s.startProber()
	}
	return s, nil
}

// Close closes the root descriptors. Calls still running may fail.
func (s *Source) Close() error {
	s.stopProber()
	s.oldMu.Lock()
	defer s.oldMu.Unlock()
	if b := s.root.Swap(nil); b != nil {
		unix.Close(b.fd)
	}
	for _, b := range s.oldRoots {
		unix.Close(b.fd)
	}
	s.oldRoots = nil
	return nil
}

// checkIdentity compares the root path's identity and the held
// descriptor's with the mount's, reopens a dead descriptor when the path is
// back, and records the outcome. It reports whether the source is
// available. One check runs at a time; a caller that finds one running, or
// one still stuck in the source, takes the state as it is.
func (s *Source) checkIdentity(ctx context.Context) bool {
	// A check still stuck in the source (a hung PFS), or one running now
	// (the prober's), answers for this one: no caller waits on another's
	// check, and a hung source holds one stuck check, not one per caller.
	if s.checkStarted.Load() != 0 || !s.checkMu.TryLock() {
		return s.unavailableSince.Load() == 0
	}
	defer s.checkMu.Unlock()
	return s.checkIdentityLocked(ctx)
}

// confirmIdentity is checkIdentity for a decision that needs a fresh
// answer ("does not exist" is believed only on one): it waits for a
// check running now, and a source with a check stuck in it is not
// available.
func (s *Source) confirmIdentity(ctx context.Context) bool {
	if s.checkStarted.Load() != 0 {
		return false
	}
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	return s.checkIdentityLocked(ctx)
}

// checkIdentityLocked is the check itself (checkMu held).
func (s *Source) checkIdentityLocked(ctx context.Context) bool {
	want := s.id // written only under checkMu; the call may outlive its wait
	var pathOK, fdOK bool
	var perr error
	s.checkStarted.CompareAndSwap(0, time.Now().UnixNano())
	err, _ := s.call(ctx, "check", "", func() error {
		defer func() {
			s.lastAnswer.Store(time.Now().UnixNano())
			s.checkStarted.Store(0)
		}()
		id, err := pathID(s.o.Root)
		perr = err
		pathOK = err == nil && id.same(want)
		if b := s.root.Load(); b != nil {
			fid, ferr := fdID(b.fd)
			// The held root must be the path's mount: a file system
			// mounted again there (the old one detached) is read anew.
			fdOK = ferr == nil && fid.same(want) && (err != nil || fid.sameMount(id))
		}
		return nil
	}, nil)
	s.lastCheck.Store(time.Now().UnixNano())
	if err != nil {
		// The check itself hung or the budget is spent: say nothing new.
		return s.unavailableSince.Load() == 0
	}
	if pathOK && !fdOK {
		b, id, err := openRoot(s.o.Root, s.o.noOpenat2)
		if err == nil && id.same(want) {
			s.oldMu.Lock()
			if old := s.root.Swap(b); old != nil {
				s.oldRoots = append(s.oldRoots, old)
			}
			s.oldMu.Unlock()
			if !id.sameMount(want) || id.dev != want.dev {
				s.newMount(id)
			}
		} else {
			if err == nil {
				unix.Close(b.fd)
			}
			pathOK = false
		}
	}
	if !pathOK {
		if s.unavailableSince.CompareAndSwap(0, time.Now().UnixNano()) {
			why := "the root is another file system now"
			if perr != nil {
				why = perr.Error()
			}
			s.log.Error("the source is unavailable: serving resident copies, failing other reads with EIO, dropping nothing",
				zap.String("source", s.o.Root), zap.String("why", why))
		}
		return false
	}
	if since := s.unavailableSince.Swap(0); since != 0 {
		s.log.Warn("the source is available again", zap.String("source", s.o.Root),
			zap.Duration("after", time.Since(time.Unix(0, since))))
	}
	return true
}

// usable is called before every operation: it fails fast while the source
// is unavailable (rechecking at most once per RecheckInterval) and checks
// the identity when the last check is older than IdentityInterval.
func (s *Source) usable(ctx context.Context, op, rel string) error {
	age := time.Now().UnixNano() - s.lastCheck.Load()
	if s.unavailableSince.Load() != 0 {
		if age < int64(s.o.RecheckInterval) || !s.checkIdentity(ctx) {
			s.errs.Add(1)
			return &Error{Op: op, Path: rel, Err: errRootChanged}
		}
		return nil
	}
	if age > int64(s.o.IdentityInterval) && !s.checkIdentity(ctx) {
		s.errs.Add(1)
		return &Error{Op: op, Path: rel, Err: errRootChanged}
	}
	return nil
}

// believe decides whether a failure of op on rel may be taken at its word.
// "Does not exist" is believed only while the root has its identity and
// rel's parent directory resolves; any other failure checks the identity
// (at most once per RecheckInterval), so that a dead client is noticed and
// a dead root descriptor replaced.
func (s *Source) believe(ctx context.Context, op, rel string, err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	if !errors.Is(err, fs.ErrNotExist) {
		if errors.Is(err, ErrStuck) || errors.Is(err, ErrTimeout) || ctx.Err() != nil {
			return err
		}
		if time.Now().UnixNano()-s.lastCheck.Load() > int64(s.o.RecheckInterval) {
			s.checkIdentity(ctx)
		}
		return err
	}
	if !s.confirmIdentity(ctx) {
		return &Error{Op: op, Path: rel, Err: errRootChanged}
	}
	if dir, _ := splitRel(rel); rel != "" && dir != "" {
		perr, _ := s.call(ctx, op, rel, func() error {
			b := s.root.Load()
			if b == nil {
				return ErrUnavailable
			}
			fd, err := b.open(dir, unix.O_PATH|unix.O_DIRECTORY)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}, nil)
		if perr != nil && !errors.Is(perr, ErrSymlinkInPath) {
			// The parent is gone too (or cannot be checked): a whole
			// directory vanishing is what a broken client looks like;
			// only a listing of its own parent (a refresh) drops it.
			return &Error{Op: op, Path: rel, Err: fmt.Errorf("%w here: the file's directory is missing too (a refresh of its parent removes it)", ErrUnavailable)}
		}
	}
	return err
}

// rootOf returns the root resolver, or an error after Close.
func (s *Source) rootOf() (*beneath, error) {
	if b := s.root.Load(); b != nil {
		return b, nil
	}
	return nil, ErrUnavailable
}

// Root is the source directory.
func (s *Source) Root() string { return s.o.Root }

// Timeout is the deadline of one operation.
func (s *Source) Timeout() time.Duration { return s.o.Timeout }

// Path is the absolute source path of the dataset file rel.
func (s *Source) Path(rel string) string { return filepath.Join(s.o.Root, rel) }

// Stats returns the counters.
func (s *Source) Stats() Stats {
	return Stats{Opens: s.opens.Load(), Reads: s.reads.Load(), Bytes: s.bytes.Load(), Stats: s.stats.Load(),
		Errors: s.errs.Load(), Timeouts: s.timeouts.Load(), Stuck: s.stuck.Load()}
}

// Hung reports whether a call to the source is blocked past the timeout
// now, or past a caller's patience (see Slow): the source is not answering.
func (s *Source) Hung() bool { return s.stuck.Load() > 0 || s.slow.Load() > 0 }

// Failing reports whether the source hangs (Hung), is unavailable, or a
// call failed less
// than ErrorBackoff ago with none succeeding since. Callers that can do
// without the source (a resident file's validation) skip it meanwhile; at
// most one such call per ErrorBackoff finds out whether it is back.
func (s *Source) Failing() bool {
	if s.Hung() || s.unavailableSince.Load() != 0 {
		return true
	}
	f := s.lastFail.Load()
	return f != 0 && f > s.lastOK.Load() && time.Now().UnixNano()-f < int64(s.o.ErrorBackoff)
}

// call runs fn under the deadline. When the deadline or ctx ends first, fn
// keeps running in its goroutine, counted as stuck, and late (if set) is
// called once fn is done, with nobody left to return to: it releases what
// fn produced. finished reports whether fn returned in time (its results
// may be used).
func (s *Source) call(ctx context.Context, op, rel string, fn func() error, late func()) (err error, finished bool) {
	if s.stuck.Load() >= int64(s.o.MaxStuck) {
		s.errs.Add(1)
		return &Error{Op: op, Path: rel, Err: ErrStuck}, false
	}
	uid, user := userOf(ctx)
	var mine *atomic.Int64
	if user {
		mine, _ = s.stuckBy.LoadOrCompute(uid, func() *atomic.Int64 { return new(atomic.Int64) })
		if mine.Load() >= int64(s.o.MaxStuckPerUser) {
			s.errs.Add(1)
			return &Error{Op: op, Path: rel, Err: fmt.Errorf("%w (uid %d has %d)", ErrStuck, uid, mine.Load())}, false
		}
	}
	if err := ctx.Err(); err != nil {
		return &Error{Op: op, Path: rel, Err: err}, false
	}
	done := make(chan error, 1)
	if h := s.o.testHook; h != nil {
		inner := fn
		fn = func() error {
			if err := h(op, rel); err != nil {
				return err
			}
			return inner()
		}
	}
	if rel != "" && op != "close" {
		// An operation of the file still stuck from an earlier request
		// (a hung source): do not start another one behind it.
		if n, ok := s.stuckPaths.Load(rel); ok && n > 0 {
			s.errs.Add(1)
			return &Error{Op: op, Path: rel, Err: fmt.Errorf("%w: an earlier operation on this file has not returned", ErrStuck)}, false
		}
	}
	go func() { done <- fn() }()
	// One budget per request: a caller's deadline (fs gives each request
	// the timeout as a whole) shortens the operation's own.
	timeout := s.o.Timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(dl), 0))
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err = <-done:
		if err == nil || errors.Is(err, io.EOF) || errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrChanged) {
			// An answer, not a failure of the source.
			s.lastOK.Store(time.Now().UnixNano())
		} else {
			s.errs.Add(1)
			s.lastFail.Store(time.Now().UnixNano())
		}
		if err == nil || errors.Is(err, io.EOF) {
			return err, true
		}
		return &Error{Op: op, Path: rel, Err: err}, true
	case <-t.C:
		s.timeouts.Add(1)
		s.errs.Add(1)
		s.lastFail.Store(time.Now().UnixNano())
		err = ErrTimeout
	case <-ctx.Done():
		err = ctx.Err()
		if errors.Is(err, context.DeadlineExceeded) {
			// The request's budget ended: a timeout like the operation's.
			s.timeouts.Add(1)
			s.errs.Add(1)
			s.lastFail.Store(time.Now().UnixNano())
			err = ErrTimeout
		}
	}
	s.stuck.Add(1)
	if mine != nil {
		mine.Add(1)
	}
	tracked := rel != "" && op != "close"
	if tracked {
		s.stuckPaths.Compute(rel, func(n int32, _ bool) (int32, bool) { return n + 1, false })
	}
	go func() {
		<-done
		s.stuck.Add(-1)
		if mine != nil {
			mine.Add(-1)
		}
		if tracked {
			s.stuckPaths.Compute(rel, func(n int32, _ bool) (int32, bool) { return n - 1, n <= 1 })
		}
		if late != nil {
			late()
		}
	}()
	return &Error{Op: op, Path: rel, Err: err}, false
}

// Slow marks the source as not answering while a caller has stopped
// waiting for a call that is still running (a validation stat past its
// grace period); the returned func ends the mark.
func (s *Source) Slow() (end func()) {
	s.slow.Add(1)
	var once sync.Once
	return func() { once.Do(func() { s.slow.Add(-1) }) }
}
