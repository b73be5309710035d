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

// ErrSourceChanged means a source file's size or mtime differs from the
// catalog's record.
var ErrSourceChanged = errors.New("tier: source file changed")

// SourceStats are the exact counts of what the daemon took from the source.
type SourceStats struct {
	Opens int64 // files opened
	Reads int64 // read calls
	Bytes int64 // bytes read
	Stats int64 // metadata calls (stat, readdir) after the first walk
}

// Source is the read-only dataset root on the shared file system. Every
// open, read and byte taken from it is counted, and reads share one
// bandwidth cap.
type Source struct {
	root  string
	limit *Limiter

	opens, reads, bytes, stats atomic.Int64
}

// NewSource returns the source rooted at root with a read cap in bytes/s
// (0 = none).
func NewSource(root string, bytesPerSec float64) *Source {
	return &Source{root: root, limit: NewLimiter(bytesPerSec)}
}

// Root is the source directory.
func (s *Source) Root() string { return s.root }

// Path is the absolute source path of the dataset file rel.
func (s *Source) Path(rel string) string { return filepath.Join(s.root, rel) }

// Stats returns the counters.
func (s *Source) Stats() SourceStats {
	return SourceStats{Opens: s.opens.Load(), Reads: s.reads.Load(), Bytes: s.bytes.Load(), Stats: s.stats.Load()}
}

// Stat stats the source file rel (counted as a metadata call).
func (s *Source) Stat(rel string) (os.FileInfo, error) {
	s.stats.Add(1)
	return os.Lstat(s.Path(rel))
}

// Open opens the source file rel for reading.
func (s *Source) Open(rel string) (*SourceFile, error) {
	s.opens.Add(1)
	f, err := os.Open(s.Path(rel))
	if err != nil {
		return nil, fmt.Errorf("tier: source: %w", err)
	}
	return &SourceFile{s: s, f: f}, nil
}

// SourceFile is an open source file whose reads are counted and capped.
type SourceFile struct {
	s *Source
	f *os.File
}

// ReadAt reads like os.File.ReadAt, waiting for the bandwidth cap first.
func (sf *SourceFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := sf.s.limit.Wait(ctx, len(p)); err != nil {
		return 0, err
	}
	sf.s.reads.Add(1)
	n, err := sf.f.ReadAt(p, off)
	sf.s.bytes.Add(int64(n))
	return n, err
}

// Stat stats the open file (not counted: no source round trip on most
// network file systems once open).
func (sf *SourceFile) Stat() (os.FileInfo, error) { return sf.f.Stat() }

// Close closes the file.
func (sf *SourceFile) Close() error { return sf.f.Close() }

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
			return off, fmt.Errorf("tier: source read: %w", err)
		}
	}
}

// Limiter is a token bucket over bytes. A zero rate means no limit.
type Limiter struct {
	rate  float64 // bytes per second
	burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
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

// Wait blocks until n bytes may be read, or ctx ends.
func (l *Limiter) Wait(ctx context.Context, n int) error {
	if l.rate <= 0 || n <= 0 {
		return nil
	}
	l.mu.Lock()
	now := time.Now()
	l.tokens += now.Sub(l.last).Seconds() * l.rate
	if l.tokens > l.burst {
		l.tokens = l.burst
	}
	l.last = now
	l.tokens -= float64(n)
	deficit := -l.tokens
	l.mu.Unlock()
	if deficit <= 0 {
		return nil
	}
	d := time.Duration(deficit / l.rate * float64(time.Second))
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		// Give back what was not used.
		l.mu.Lock()
		l.tokens += float64(n)
		l.mu.Unlock()
		return ctx.Err()
	}
}
