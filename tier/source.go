package tier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// The source is a shared network file system that may fail or hang. Every
// operation on it (stat, open, read, close, directory read) runs under a
// deadline: a call that does not return within SourceOptions.Timeout is
// abandoned and its caller gets ErrSourceTimeout. The goroutine stuck in the
// system call is left behind (a syscall cannot be interrupted) and counted
// as "stuck" until the call returns; whatever it returns then is cleaned up
// (a late open is closed). At most MaxStuck calls may be stuck at once: past
// that, new calls fail at once with ErrSourceStuck instead of pinning more
// threads on a dead server.
//
// Every error of a source operation is a *SourceError: it matches
// ErrSource with errors.Is (the fs layer answers EIO, never the source's own
// errno such as ENOTCONN, which users would take for a dead epochfs daemon)
// and unwraps to the underlying error (os.ErrNotExist stays detectable).

// Errors of source operations.
var (
	// ErrSource matches every error of a source operation.
	ErrSource = errors.New("tier: source")
	// ErrSourceTimeout means the source did not answer within the timeout.
	ErrSourceTimeout = errors.New("no answer within the source timeout")
	// ErrSourceStuck means too many source calls are stuck already.
	ErrSourceStuck = errors.New("too many source operations are stuck; failing fast")
	// ErrSourceChanged means a source file's size or mtime differs from the
	// catalog's record.
	ErrSourceChanged = errors.New("tier: source file changed")
)

// SourceError is a failed source operation.
type SourceError struct {
	Op   string // stat, open, read, close, readdir
	Path string // dataset-relative
	Err  error
}

func (e *SourceError) Error() string {
	return fmt.Sprintf("tier: source: %s %s: %v", e.Op, e.Path, e.Err)
}
func (e *SourceError) Unwrap() error        { return e.Err }
func (e *SourceError) Is(target error) bool { return target == ErrSource }

// SourceStats are the exact counts of what the daemon took from the source.
type SourceStats struct {
	Opens    int64 // files opened
	Reads    int64 // read calls
	Bytes    int64 // bytes read
	Stats    int64 // metadata calls (stat, readdir) after the first walk
	Errors   int64 // operations that failed, "does not exist" excluded
	Timeouts int64 // operations abandoned at the timeout
	Stuck    int64 // abandoned operations still blocked in the source now
}

// SourceOptions configure a Source.
type SourceOptions struct {
	Root      string
	Bandwidth float64 // bytes/s cap on reads; 0 = none
	// Timeout bounds every operation (default DefaultSourceTimeout).
	Timeout time.Duration
	// MaxStuck bounds the abandoned calls still blocked (default 256).
	MaxStuck int
	// ErrorBackoff is how long after a failed call, with no call succeeding
	// since, Failing reports true (default 2 s).
	ErrorBackoff time.Duration
}

// DefaultSourceTimeout is placement.source_timeout's default.
const DefaultSourceTimeout = 30 * time.Second

// Source is the read-only dataset root on the shared file system. Every
// open, read and byte taken from it is counted, reads share one bandwidth
// cap, and every operation has a deadline.
type Source struct {
	o     SourceOptions
	limit *Limiter

	opens, reads, bytes, stats  atomic.Int64
	errs, timeouts, stuck, slow atomic.Int64
	lastFail, lastOK            atomic.Int64 // unix nanos of the last failed and succeeded calls
	bufs                        sync.Pool    // read buffers (see ReadAt)
}

// NewSource returns the source rooted at root with a read cap in bytes/s
// (0 = none) and the default deadlines.
func NewSource(root string, bytesPerSec float64) *Source {
	return OpenSource(SourceOptions{Root: root, Bandwidth: bytesPerSec})
}

// OpenSource returns the source described by o.
func OpenSource(o SourceOptions) *Source {
	if o.Timeout <= 0 {
		o.Timeout = DefaultSourceTimeout
	}
	if o.MaxStuck <= 0 {
		o.MaxStuck = 256
	}
	if o.ErrorBackoff <= 0 {
		o.ErrorBackoff = 2 * time.Second
	}
	return &Source{o: o, limit: NewLimiter(o.Bandwidth)}
}

// Root is the source directory.
func (s *Source) Root() string { return s.o.Root }

// Timeout is the deadline of one operation.
func (s *Source) Timeout() time.Duration { return s.o.Timeout }

// Path is the absolute source path of the dataset file rel.
func (s *Source) Path(rel string) string { return filepath.Join(s.o.Root, rel) }

// Stats returns the counters.
func (s *Source) Stats() SourceStats {
	return SourceStats{Opens: s.opens.Load(), Reads: s.reads.Load(), Bytes: s.bytes.Load(), Stats: s.stats.Load(),
		Errors: s.errs.Load(), Timeouts: s.timeouts.Load(), Stuck: s.stuck.Load()}
}

// Hung reports whether a call to the source is blocked past the timeout
// now, or past a caller's patience (see Slow): the source is not answering.
func (s *Source) Hung() bool { return s.stuck.Load() > 0 || s.slow.Load() > 0 }

// Failing reports whether the source hangs (Hung) or a call failed less
// than ErrorBackoff ago with none succeeding since. Callers that can do
// without the source (a resident file's validation) skip it meanwhile; at
// most one such call per ErrorBackoff finds out whether it is back.
func (s *Source) Failing() bool {
	if s.Hung() {
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
		return &SourceError{Op: op, Path: rel, Err: ErrSourceStuck}, false
	}
	if err := ctx.Err(); err != nil {
		return &SourceError{Op: op, Path: rel, Err: err}, false
	}
	done := make(chan error, 1)
	go func() { done <- fn() }()
	t := time.NewTimer(s.o.Timeout)
	defer t.Stop()
	select {
	case err = <-done:
		if err == nil || errors.Is(err, io.EOF) || errors.Is(err, os.ErrNotExist) {
			s.lastOK.Store(time.Now().UnixNano())
		} else {
			s.errs.Add(1)
			s.lastFail.Store(time.Now().UnixNano())
		}
		if err == nil || errors.Is(err, io.EOF) {
			return err, true
		}
		return &SourceError{Op: op, Path: rel, Err: err}, true
	case <-t.C:
		s.timeouts.Add(1)
		s.errs.Add(1)
		s.lastFail.Store(time.Now().UnixNano())
		err = ErrSourceTimeout
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.stuck.Add(1)
	go func() {
		<-done
		s.stuck.Add(-1)
		if late != nil {
			late()
		}
	}()
	return &SourceError{Op: op, Path: rel, Err: err}, false
}

// Slow marks the source as not answering while a caller has stopped
// waiting for a call that is still running (a validation stat past its
// grace period); the returned func ends the mark.
func (s *Source) Slow() (end func()) {
	s.slow.Add(1)
	var once sync.Once
	return func() { once.Do(func() { s.slow.Add(-1) }) }
}

// Stat lstats the source file rel (counted as a metadata call).
func (s *Source) Stat(ctx context.Context, rel string) (os.FileInfo, error) {
	s.stats.Add(1)
	var fi os.FileInfo
	err, _ := s.call(ctx, "stat", rel, func() error {
		var err error
		fi, err = os.Lstat(s.Path(rel))
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	return fi, nil
}

// ReadDir reads the names and types of the source directory rel (counted
// as a metadata call), sorted by name.
func (s *Source) ReadDir(ctx context.Context, rel string) ([]os.DirEntry, error) {
	s.stats.Add(1)
	var des []os.DirEntry
	err, _ := s.call(ctx, "readdir", rel, func() error {
		var err error
		des, err = os.ReadDir(s.Path(rel))
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	return des, nil
}

// Readlink reads the target of the source symlink rel.
func (s *Source) Readlink(ctx context.Context, rel string) (string, error) {
	s.stats.Add(1)
	var target string
	err, _ := s.call(ctx, "readlink", rel, func() error {
		var err error
		target, err = os.Readlink(s.Path(rel))
		return err
	}, nil)
	return target, err
}

// Open opens the source file rel for reading.
func (s *Source) Open(ctx context.Context, rel string) (*SourceFile, error) {
	s.opens.Add(1)
	var f *os.File
	err, _ := s.call(ctx, "open", rel, func() error {
		var err error
		f, err = os.Open(s.Path(rel))
		return err
	}, func() {
		// Opened after the caller gave up: nobody will close it.
		if f != nil {
			f.Close()
		}
	})
	if err != nil {
		return nil, err
	}
	return &SourceFile{s: s, f: f, rel: rel}, nil
}

// SourceFile is an open source file whose reads are counted, capped and
// bounded by the source's deadline.
type SourceFile struct {
	s   *Source
	f   *os.File
	rel string
}

// ReadAt reads like os.File.ReadAt, waiting for the bandwidth cap first
// (the wait is not part of the deadline: it is ours, not the source's) and
// charging the cap with the bytes the read returned (see Limiter).
// The read goes into a buffer of the source's own, copied to p when it
// returns in time: a read abandoned at the deadline may still write when
// the source wakes up, and p is the caller's again by then.
func (sf *SourceFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := sf.s.limit.Wait(ctx); err != nil {
		return 0, &SourceError{Op: "read", Path: sf.rel, Err: err}
	}
	sf.s.reads.Add(1)
	bp := sf.s.getReadBuf(len(p))
	var n int
	start := time.Now()
	err, finished := sf.s.call(ctx, "read", sf.rel, func() error {
		var err error
		n, err = sf.f.ReadAt(*bp, off)
		return err
	}, func() {
		// What a late read took from the source counts against the cap.
		sf.s.limit.Done(n, time.Since(start))
		sf.s.putReadBuf(bp)
	})
	if !finished {
		return 0, err
	}
	sf.s.limit.Done(n, time.Since(start))
	copy(p, (*bp)[:n])
	sf.s.putReadBuf(bp)
	sf.s.bytes.Add(int64(n))
	return n, err
}

// readBufSize is the size of the pooled read buffers; larger reads
// allocate.
const readBufSize = 1 << 20

func (s *Source) getReadBuf(n int) *[]byte {
	if n > readBufSize {
		b := make([]byte, n)
		return &b
	}
	bp, _ := s.bufs.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, readBufSize)
		bp = &b
	}
	*bp = (*bp)[:n]
	return bp
}

func (s *Source) putReadBuf(bp *[]byte) {
	if cap(*bp) == readBufSize {
		*bp = (*bp)[:readBufSize]
		s.bufs.Put(bp)
	}
}

// Stat stats the open file (fstat: not counted as a metadata call).
func (sf *SourceFile) Stat(ctx context.Context) (os.FileInfo, error) {
	var fi os.FileInfo
	err, _ := sf.s.call(ctx, "fstat", sf.rel, func() error {
		var err error
		fi, err = sf.f.Stat()
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	return fi, nil
}

// Close closes the file in the background: nothing waits for it (a close
// of a read-only file has nothing to report, and on a hung source its
// FLUSH would block the caller; it is abandoned at the deadline like any
// other call and counted as stuck until the source answers).
func (sf *SourceFile) Close() error {
	go sf.s.call(context.Background(), "close", sf.rel, sf.f.Close, nil)
	return nil
}

// CopyTo copies the whole file to w in chunks of bufSize, returning the
// bytes copied. progress, if set, is called after each chunk.
func (sf *SourceFile) CopyTo(ctx context.Context, w io.Writer, buf []byte, progress func(n int64)) (int64, error) {
	var off int64
	for {
		if err := ctx.Err(); err != nil {
			return off, err
		}
		n, err := sf.ReadAt(ctx, buf, off)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return off, werr
			}
			off += int64(n)
			if progress != nil {
				progress(off)
			}
		}
		if errors.Is(err, io.EOF) {
			return off, nil
		}
		if err != nil {
			return off, err
		}
	}
}

// Limiter is the bandwidth cap of source reads: a token bucket over bytes,
// charged after each read with the bytes it returned. A read of a small
// file through a large copy buffer costs what it read, not the buffer's
// size (charging the buffer capped 100 KB files at 1 MB/s to one file a
// second). A read waits only until the reads before it are paid for (the
// bucket is not in debt); it does not know its size in advance. Over any
// window the bytes read are at most the burst, plus the rate times the
// window, plus the reads already admitted at its start (one buffer per
// reader); in the long run the rate is the cap whatever the read sizes.
// A zero rate means no limit.
//
// The limiter also sees every read's duration (Done): an observer set
// with SetObserver gets it, e.g. a latency histogram.
type Limiter struct {
	rate  float64 // bytes per second
	burst float64

	mu     sync.Mutex
	tokens float64 // negative: the debt of reads already done
	last   time.Time

	observe atomic.Pointer[func(n int, took time.Duration)]
}

// NewLimiter returns a limiter of rate bytes/s with a burst of 1/4 s of
// traffic (at least 1 MiB).
func NewLimiter(rate float64) *Limiter {
	if rate <= 0 {
		return &Limiter{}
	}
	burst := rate / 4
	if burst < 1<<20 {
		burst = 1 << 20
	}
	return &Limiter{rate: rate, burst: burst, tokens: burst, last: time.Now()}
}

// refill adds the tokens earned since the last call; l.mu is held.
func (l *Limiter) refill(now time.Time) {
	l.tokens += now.Sub(l.last).Seconds() * l.rate
	if l.tokens > l.burst {
		l.tokens = l.burst
	}
	l.last = now
}

// Wait blocks until the bytes of earlier reads are paid for, or ctx ends.
func (l *Limiter) Wait(ctx context.Context) error {
	if l.rate <= 0 {
		return nil
	}
	for {
		l.mu.Lock()
		l.refill(time.Now())
		debt := -l.tokens
		l.mu.Unlock()
		if debt <= 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		tm := time.NewTimer(time.Duration(debt / l.rate * float64(time.Second)))
		select {
		case <-tm.C:
			// Other readers may have run up a new debt meanwhile: look again.
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		}
	}
}

// Done charges a read of n bytes that took took, and reports it to the
// observer.
func (l *Limiter) Done(n int, took time.Duration) {
	if fn := l.observe.Load(); fn != nil {
		(*fn)(n, took)
	}
	if l.rate <= 0 || n <= 0 {
		return
	}
	l.mu.Lock()
	l.refill(time.Now())
	l.tokens -= float64(n)
	l.mu.Unlock()
}

// SetObserver has fn called after every read with its bytes and duration
// (nil: none). fn runs on the reader's goroutine: keep it cheap.
func (l *Limiter) SetObserver(fn func(n int, took time.Duration)) {
	if fn == nil {
		l.observe.Store(nil)
		return
	}
	l.observe.Store(&fn)
}

// Limiter is the source's bandwidth cap, which also times its reads.
func (s *Source) Limiter() *Limiter { return s.limit }
