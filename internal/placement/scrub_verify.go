package placement

// The verify of one file: its copy against its record and the source
// (scrub.go runs it for `verify`).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"go.uber.org/zap"
)

// verifyFile checks a resident file's copy against its record and the
// source.
func (p *Scrubber) verifyFile(e *catalog.Entry, content bool, run *scrubRun) {
	i := e.Tier()
	if i < 0 || p.scrubWait() != nil {
		return
	}
	run.checked.Add(1)
	rec := e.Attr()
	t := p.o.Tiers[i]
	if fi, err := os.Lstat(t.Path(e.Path())); err != nil || !fi.Mode().IsRegular() || fi.Size() != rec.Size {
		p.log.Warn("verify: bad tier copy; dropped", zap.String("path", e.Path()), zap.String("tier", t.Name()))
		p.op.dropCopy(e, i)
		run.dropped.Add(1)
		p.cp.enqueue(e)
		return
	}
	fi, err := p.src.Stat(p.ctx, e.Path())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.remove(e, run, err)
		return
	case err != nil:
		run.fail(err)
		return
	case !fi.Mode().IsRegular():
		run.removed.Add(1)
		p.val.removeEntry(e) // replaced by something else: not guarded
		return
	}
	p.val.checkedNow(e)
	resident := e.Tier() >= 0
	if p.val.setAttr(e, catalog.AttrFromInfo(fi), false) {
		run.changed.Add(1)
		if resident {
			run.dropped.Add(1) // setAttr dropped the stale copy
		}
		p.cp.enqueue(e)
		return
	}
	if !content {
		return
	}
	same, err := p.sameContent(e, i, rec.Size)
	if err != nil {
		run.fail(err)
		return
	}
	if !same && e.Tier() == i {
		p.log.Warn("verify: tier copy differs from the source; dropped", zap.String("path", e.Path()), zap.String("tier", t.Name()))
		p.op.dropCopy(e, i)
		run.dropped.Add(1)
		p.cp.enqueue(e)
	}
}

// sameContent compares e's copy in tier i with the source, byte for byte.
func (p *Scrubber) sameContent(e *catalog.Entry, i int, size int64) (bool, error) {
	tf, err := p.o.Tiers[i].OpenFile(e.Path())
	if err != nil {
		return false, nil // gone: not the same
	}
	defer tf.Close()
	sf, err := p.src.Open(p.ctx, e.Path())
	if err != nil {
		return false, fmt.Errorf("placement: verify %s: %w", e.Path(), err)
	}
	defer sf.Close()
	a, b := make([]byte, copyChunk), make([]byte, copyChunk)
	for off := int64(0); off < size; off += copyChunk {
		n := int(min(copyChunk, size-off))
		sn, err := sf.ReadAt(p.ctx, a[:n], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return false, fmt.Errorf("placement: verify %s: %w", e.Path(), err)
		}
		tn, terr := tf.ReadAt(b[:n], off)
		if terr != nil && !errors.Is(terr, io.EOF) {
			return false, nil
		}
		if sn != n || tn != n || !bytes.Equal(a[:n], b[:n]) {
			return false, nil
		}
	}
	return true, nil
}
