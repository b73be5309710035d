package placement

import (
	"context"

	"go.uber.org/zap"
)

// The read chain. A Reader's reads try, in order, the places its open
// found: first the installed tier copy, the shared buffer's entry or the
// copy in flight (whichever Open attached: one at most), then the remote's
// stored copy (where the remote serves ranges), then the source, which
// always answers. ReadAt is the one loop that walks it: a link that cannot
// serve passes the read on; one that fails for the source's sake (the
// source changed, or is gone) ends it with that error, since reading the
// source again is no way out. A tier that fails a read is noted once
// (Tier.NoteError, one log line) and skipped by the reader's later reads.
// restic's cache backend is the model: cache, single-flight fill, backend.

// link is one place a Reader's bytes may come from.
type link uint8

const (
	linkNone   link = iota
	linkTier        // the installed copy (Reader.res)
	linkBuffer      // the shared buffer's entry (Reader.bent)
	linkFlight      // the copy in flight (Reader.fl)
	linkRemote      // the remote's stored copy (RangeRemote)
	linkSource      // the source file
)

// chainUp builds r's chain from what its open attached.
func (r *Reader) chainUp() {
	k := 0
	switch {
	case r.res != nil:
		r.chain[k], k = linkTier, k+1
	case r.bent != nil:
		r.chain[k], k = linkBuffer, k+1
	case r.fl != nil:
		r.chain[k], k = linkFlight, k+1
	}
	if _, ok := r.p.o.Remote.(RangeRemote); ok {
		r.chain[k], k = linkRemote, k+1
	}
	r.chain[k] = linkSource
}

// ReadAt fills buf from off. It returns fewer bytes only at the end of the
// file. It never fails because of a tier: it falls back to the source. It
// fails when the source does (or changed), after at most the source's
// timeout.
func (r *Reader) ReadAt(ctx context.Context, buf []byte, off int64) (int, error) {
	for _, l := range r.chain {
		n, done, err := r.readFrom(ctx, l, buf, off)
		if done || err != nil {
			return n, err
		}
	}
	return r.readSource(ctx, buf, off) // not reached: the chain ends at the source
}

// readFrom reads from one link; done=false passes the read to the next.
func (r *Reader) readFrom(ctx context.Context, l link, buf []byte, off int64) (n int, done bool, err error) {
	switch l {
	case linkTier:
		if r.tierBad.Load() {
			return 0, false, nil
		}
		fd, err := r.residentFD()
		if err == nil {
			if n, err = preadFull(fd, buf, off); err == nil {
				return n, true, nil
			}
			r.p.o.Tiers[r.tierIdx].NoteError(err)
		}
		if r.tierBad.CompareAndSwap(false, true) {
			r.p.log.Warn("tier read failed; reading the source", zap.String("path", r.e.Path()), zap.Error(err))
		}
		return 0, false, nil
	case linkBuffer:
		be := r.bent
		ok, err := be.Wait(ctx)
		if err != nil {
			return 0, true, err
		}
		if ok {
			return be.ReadAt(buf, off), true, nil
		}
		if err := be.Err(); err != nil && sourceSide(err) {
			return 0, true, err
		}
		return 0, false, nil
	case linkFlight:
		n, ok, err := r.fl.readAt(ctx, buf, off, r.p.src.Timeout())
		if err != nil {
			return 0, true, err
		}
		return n, ok, nil
	case linkRemote:
		n, ok := r.readRemote(ctx, buf, off)
		return n, ok, nil
	case linkSource:
		n, err := r.readSource(ctx, buf, off)
		return n, true, err
	}
	return 0, false, nil
}
