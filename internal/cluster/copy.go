package cluster

// Copy is the whole read path of the cluster tier for one file version, as
// a node's placer sees it:
//
//	stored?  yes → read the chunks, each checked (a bad one drops the copy)
//	         no  → take the fill lease
//	                 taken → read the source, writing each chunk to the
//	                         cluster as it passes, commit (manifest last)
//	                 busy  → wait for the other node's fill, at most
//	                         MaxWait in all, then look again; past
//	                         MaxWait read the source without filling
//	                 full, down, an error → read the source
//
// The cluster never fails the copy: any failure of it (down, slow, a bad
// value, a lost lease) falls back to the source, and a fill that fails is
// aborted while the source copy goes on. A stored copy that fails half-way
// is finished from the source: the bytes already written were checked, and
// the source is read again from the start with those bytes skipped (the
// source callback checks that it is the same version).

import (
	"context"
	"errors"
	"io"
	"time"

	"go.uber.org/zap"
)

// maxLookups bounds the lookups of one Copy (fills that other nodes abort
// one after another); MaxWait bounds its waiting.
const maxLookups = 8

// Copy writes version k of a file to w, from the cluster if it holds it,
// otherwise from source (see the file comment), and returns the bytes
// written. source reads the file from the source into the writer it is
// given and calls progress with its offset; its errors and w's errors are
// returned, the cluster's never. progress (if set) gets the bytes written
// to w so far.
func (c *Cluster) Copy(ctx context.Context, k FileKey, w io.Writer, progress func(int64),
	source func(w io.Writer, progress func(int64)) (int64, error)) (int64, error) {
	if progress == nil {
		progress = func(int64) {}
	}
	if c.pr != nil {
		return c.copyPeers(ctx, k, w, progress, source)
	}
	deadline := time.Now().Add(c.o.MaxWait)
	for range maxLookups {
		cp, err := c.Lookup(ctx, k)
		if err == nil {
			n, err := c.readCopy(ctx, cp, w, progress)
			if err == nil {
				return n, nil
			}
			var werr *writeError
			if errors.As(err, &werr) {
				return n, werr.err
			}
			c.log.Debug("stored copy unusable; reading the source", zap.String("path", k.Path), zap.Error(err))
			return c.finishFromSource(w, n, progress, source)
		}
		if !errors.Is(err, ErrMiss) && !errors.Is(err, ErrCorrupt) {
			// Down or failing: do not wait on it.
			return source(w, progress)
		}
		f, err := c.Fill(ctx, k)
		switch {
		case err == nil:
			return c.fillFromSource(ctx, f, w, progress, source)
		case errors.Is(err, errStored):
			continue
		case errors.Is(err, ErrBusy) && time.Now().Before(deadline):
			wctx, cancel := context.WithDeadline(ctx, deadline)
			werr := c.Wait(wctx, k)
			cancel()
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			if werr != nil {
				c.log.Debug("stopped waiting for another node's fill; reading the source", zap.String("path", k.Path), zap.Error(werr))
				return source(w, progress)
			}
			// Stored now, or the other node let go: look again.
		default:
			return source(w, progress)
		}
	}
	return source(w, progress)
}

// writeError is a failure of the caller's writer (not of the cluster).
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// chunked is a stored copy read chunk by chunk: the cluster tier's (Copy)
// or a peer's (PeerCopy).
type chunked interface {
	Chunks() int
	Chunk(ctx context.Context, i int) ([]byte, error)
}

// readCopy writes the stored copy's chunks to w. An error of w comes back
// as *writeError; n is the bytes written either way.
func (c *Cluster) readCopy(ctx context.Context, cp chunked, w io.Writer, progress func(int64)) (n int64, err error) {
	for i := range cp.Chunks() {
		data, err := cp.Chunk(ctx, i)
		if err != nil {
			return n, err
		}
		m, werr := w.Write(data)
		n += int64(m)
		if werr != nil {
			return n, &writeError{werr}
		}
		progress(n)
	}
	if cp.Chunks() == 0 {
		c.st.hits.Add(1) // an empty file: no chunk counted it
	}
	return n, nil
}

// finishFromSource reads the file from the source and writes what follows
// the done bytes already written.
func (c *Cluster) finishFromSource(w io.Writer, done int64, progress func(int64),
	source func(w io.Writer, progress func(int64)) (int64, error)) (int64, error) {
	sw := &skipWriter{w: w, skip: done}
	n, err := source(sw, func(off int64) {
		if off > done {
			progress(off)
		}
	})
	return n, err
}

// skipWriter drops the first skip bytes written to it.
type skipWriter struct {
	w    io.Writer
	skip int64
}

func (s *skipWriter) Write(p []byte) (int, error) {
	if s.skip >= int64(len(p)) {
		s.skip -= int64(len(p))
		return len(p), nil
	}
	q := p[s.skip:]
	s.skip = 0
	if _, err := s.w.Write(q); err != nil {
		return 0, err
	}
	return len(p), nil
}

// fillFromSource reads the source into w and, as the bytes pass, into the
// fill; the fill is committed when the source copy succeeds and aborted
// otherwise. A failing fill is aborted and the copy goes on.
func (c *Cluster) fillFromSource(ctx context.Context, f *Fill, w io.Writer, progress func(int64),
	source func(w io.Writer, progress func(int64)) (int64, error)) (int64, error) {
	tw := &teeFill{ctx: ctx, w: w, f: f, c: c}
	n, err := source(tw, progress)
	if tw.f == nil {
		return n, err
	}
	if err != nil {
		tw.f.Abort()
		return n, err
	}
	if cerr := tw.f.Commit(ctx); cerr != nil {
		c.log.Warn("cluster fill not committed; the other nodes read the source", zap.String("path", f.k.Path), zap.Error(cerr))
	}
	return n, nil
}

// teeFill writes to w and to the fill; the fill's failure only ends the
// fill.
type teeFill struct {
	ctx context.Context
	c   *Cluster
	w   io.Writer
	f   *Fill
}

func (t *teeFill) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	if err != nil || t.f == nil {
		return n, err
	}
	if ferr := t.f.Write(t.ctx, p); ferr != nil {
		t.c.log.Warn("cluster fill failed; reading on from the source alone", zap.String("path", t.f.k.Path), zap.Error(ferr))
		t.f.Abort()
		t.f = nil
	}
	return n, nil
}
