package catalog

// Walking the source into a tree (a first mount, or a rescan).

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/internal/source"
	"go.uber.org/zap"
)

// walkSource walks o's source: through o.Walker, or a source opened for
// the walk (tests that build a catalog alone).
func walkSource(ctx context.Context, o Options, log *zap.Logger) (*Entry, error) {
	src := o.Walker
	if src == nil {
		s, err := source.Open(source.Options{Root: o.Source, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("catalog: walk: %w", err)
		}
		defer s.Close()
		src = s
	}
	return walk(ctx, src, o.Workers, log, o.Progress)
}

// walk reads the source tree in parallel, every path resolved beneath the
// source root without following a symlink (internal/source/beneath.go).
func walk(ctx context.Context, src *source.Source, workers int, log *zap.Logger, progress func(int64)) (*Entry, error) {
	st, err := os.Stat(src.Root())
	if err != nil {
		return nil, fmt.Errorf("catalog: walk: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("catalog: walk: %s is not a directory", src.Root())
	}
	root := rootFromInfo(st)
	var seen atomic.Int64
	var progMu sync.Mutex
	var firstErr error // the root's: the others' are logged
	Descend(ctx, root, workers, func(d *Entry) []*Entry {
		kids, err := readKids(ctx, src, d, log)
		if err != nil {
			if d.Path() == "" {
				firstErr = fmt.Errorf("catalog: walk %s: %w", src.Root(), err)
				return nil
			}
			log.Warn("walk: cannot read directory; it will look empty", zap.String("path", d.Path()), zap.Error(err))
		}
		d.setChildren(kids)
		// One call at a time, with a count that only grows: the callback
		// need not be safe for concurrent use.
		progMu.Lock()
		if n := seen.Add(int64(kids.Len())); progress != nil {
			progress(n)
		}
		progMu.Unlock()
		return dirsOf(kids)
	})
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("catalog: walk: %w", err)
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return root, nil
}

// readKids reads the entries of the source directory d: special files and
// entries that cannot be read are skipped (logged), symlinks get their
// targets. An error is the directory's own (it could not be read).
func readKids(ctx context.Context, src *source.Source, d *Entry, log *zap.Logger) (Kids, error) {
	des, err := src.WalkReadDir(ctx, d.Path())
	size := newDirPaths(d.Path())
	for _, de := range des {
		size.add(de.Name())
	}
	paths := sizedArena(size.n)
	slab := sizedSlab(len(des))
	for _, de := range des {
		sp := paths.join(d.Path(), de.Name())
		info, ierr := de.Info()
		if ierr != nil {
			log.Warn("walk: skipping entry", zap.String("path", storedString(sp)), zap.Error(ierr))
			continue
		}
		if !kindOfInfo(info).valid() {
			log.Debug("walk: skipping special file", zap.String("path", storedString(sp)))
			continue
		}
		e := slab.alloc()
		fillFromInfo(e, sp, info)
		if e.Kind() == KindSymlink {
			p := storedString(sp) // made only here: a child's path is made when asked for
			t, lerr := src.WalkReadlink(ctx, p)
			if lerr != nil {
				log.Warn("walk: skipping symlink", zap.String("path", p), zap.Error(lerr))
				slab.unalloc()
				continue
			}
			e.setTarget(t)
		}
	}
	return blockKids(slab.block()), err
}

// NewEntry is a new entry for the source's path p (a refresh found it),
// of a fresh stat of it; target is a symlink's. It is not in the tree
// until Catalog.Add. nil for a special file (not part of the dataset).
func NewEntry(p string, info fs.FileInfo, target string) *Entry {
	if !kindOfInfo(info).valid() {
		return nil
	}
	e := new(Entry)
	fillFromInfo(e, storePath(make([]byte, storedLen(p)), p), info)
	e.setTarget(target)
	if e.Kind() == KindDir {
		e.setChildren(Kids{})
	}
	return e
}

// rootFromInfo is the entry of a walk's stat of the source root.
func rootFromInfo(info fs.FileInfo) *Entry {
	e := new(Entry)
	fillFromInfo(e, nil, info)
	return e
}

// kindOfInfo is the kind of entry a stat describes; 0 for a special file
// (not part of the dataset).
func kindOfInfo(info fs.FileInfo) Kind {
	switch {
	case info.Mode().IsRegular():
		return KindFile
	case info.IsDir():
		return KindDir
	case info.Mode()&fs.ModeSymlink != 0:
		return KindSymlink
	}
	return 0
}

// fillFromInfo makes e, a zeroed entry of a kind kindOfInfo gives, the
// entry of a walk's stat of the path p (stored: storedpath.go).
func fillFromInfo(e *Entry, p *byte, info fs.FileInfo) {
	e.setStored(p)
	e.setKind(kindOfInfo(info))
	e.initAttr(AttrFromInfo(info))
	e.setLink(linkOf(e.Kind(), info))
	e.checked.Store(checkedBits(time.Now().Unix())) // what was just read is the check
}

// AttrFromInfo converts a fresh stat of a source file.
func AttrFromInfo(info fs.FileInfo) Attr {
	a := Attr{Size: info.Size(), Mtime: info.ModTime().UnixNano()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		a.Mode, a.UID, a.GID = st.Mode, st.Uid, st.Gid
		a.Nlink = uint32(min(st.Nlink, 1<<32-1))
		a.Blocks = st.Blocks
		a.Atime = st.Atim.Nano()
		a.Ctime = st.Ctim.Nano()
	}
	return a
}

// linkOf is the link key of a regular file with more than one link.
func linkOf(k Kind, info fs.FileInfo) *linkKey {
	st, ok := info.Sys().(*syscall.Stat_t)
	if k != KindFile || !ok || st.Nlink < 2 {
		return nil
	}
	return &linkKey{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano()}
}
