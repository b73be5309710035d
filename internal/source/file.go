package source

// The read path of the source: a dataset file opened beneath the root,
// read within its deadline and the bandwidth cap (limiter.go).

import (
	"context"
	"errors"
	"io"
	"os"
	"time"
)

// Open opens the source file rel for reading: resolved beneath the root,
// and only if it is a regular file (beneath.go; a FIFO, device or socket
// is never opened). File.Info is what the open descriptor's fstat
// said: callers compare its owner and mode with what the kernel was told.
func (s *Source) Open(ctx context.Context, rel string) (*File, error) {
	s.opens.Add(1)
	if err := s.usable(ctx, "open", rel); err != nil {
		return nil, err
	}
	var f *os.File
	var fi os.FileInfo
	err, _ := s.call(ctx, "open", rel, func() error {
		b, err := s.rootOf()
		if err != nil {
			return err
		}
		fd, si, err := b.openRegular(rel)
		if err != nil {
			return err
		}
		f, fi = os.NewFile(uintptr(fd), s.Path(rel)), si
		return nil
	}, func() {
		// Opened after the caller gave up: nobody will close it.
		if f != nil {
			f.Close()
		}
	})
	if err = s.believe(ctx, "open", rel, err); err != nil {
		return nil, err
	}
	return &File{s: s, f: f, rel: rel, fi: fi}, nil
}

// File is an open source file whose reads are counted, capped and
// bounded by the source's deadline.
type File struct {
	s   *Source
	f   *os.File
	rel string
	fi  os.FileInfo
	// want, once set by Expect, is the version every read must still find
	// after it read (size, mtime in unix nanos).
	want *[2]int64
}

// Expect makes every later read check, after it read, that the file still
// has this size and mtime (unix nanos): a file rewritten in place while it
// is read fails the read with ErrChanged instead of handing out
// bytes of two versions. It costs an fstat per read.
func (sf *File) Expect(size, mtime int64) { sf.want = &[2]int64{size, mtime} }

// Info is the fstat of the file taken when it was opened (no system call).
func (sf *File) Info() os.FileInfo { return sf.fi }

// ReadAt reads like os.File.ReadAt, waiting for the bandwidth cap first
// (the wait is not part of the deadline: it is ours, not the source's) and
// charging the cap with the bytes the read returned (see Limiter).
// The read goes into a buffer of the source's own, copied to p when it
// returns in time: a read abandoned at the deadline may still write when
// the source wakes up, and p is the caller's again by then.
func (sf *File) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := sf.s.limit.Wait(ctx); err != nil {
		return 0, &Error{Op: "read", Path: sf.rel, Err: err}
	}
	sf.s.reads.Add(1)
	bp := sf.s.getReadBuf(len(p))
	var n int
	start := time.Now()
	err, finished := sf.s.call(ctx, "read", sf.rel, func() error {
		var err error
		n, err = sf.f.ReadAt(*bp, off)
		if w := sf.want; w != nil && (err == nil || errors.Is(err, io.EOF)) {
			// A write updates the mtime before its bytes land: if the
			// read saw any new byte, fstat now sees the new mtime.
			// (os.File.Stat holds the descriptor against a Close of
			// an abandoned read's file; Fd would not.)
			fi, serr := sf.f.Stat()
			if serr != nil {
				return serr
			}
			if fi.Size() != w[0] || fi.ModTime().UnixNano() != w[1] {
				return ErrChanged
			}
		}
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
func (sf *File) Stat(ctx context.Context) (os.FileInfo, error) {
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
func (sf *File) Close() error {
	go sf.s.call(context.Background(), "close", sf.rel, sf.f.Close, nil)
	return nil
}

// CopyTo copies the whole file to w in chunks of bufSize, returning the
// bytes copied. progress, if set, is called after each chunk.
func (sf *File) CopyTo(ctx context.Context, w io.Writer, buf []byte, progress func(n int64)) (int64, error) {
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
