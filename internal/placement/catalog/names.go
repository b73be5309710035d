package catalog

// A walk that reads names first (Options.NamesFirst). A background walk
// reads each directory in two passes instead of one:
//
//  1. its names and types, from the listing alone (getdents' d_type; no
//     stat a file): the entries are made, with their paths and kinds, and
//     held aside (bgWalk.named), not in the tree. Once every directory is
//     named the files are numbered (Entry.Index, Numbered) and Named is
//     closed: jobs can be created, their epochs drawn from the numbers.
//  2. the attributes of its names, one lstat each on the directory's
//     descriptor just after the directory is listed again (WalkStatNames),
//     in the background or when someone asks for the directory (List)
//     first; only then do its entries go into the tree, with their IDs,
//     so that nothing the mount shows lacks its attributes (a hard link's
//     ID needs its stat).
//
// A name gone from the source (or of another kind) by its stat is marked
// gone (Entry.Gone), with whatever was named below it: a number once
// given is kept, as a refresh keeps a removed file's. The tree is stored,
// and the walk done (WalkDone, catalog=ok), once every directory's
// attributes are read.

import (
	"context"
	"io/fs"
	"time"

	"github.com/epochfs/epochfs/internal/source"
	"go.uber.org/zap"
)

// kindOfType is the kind of entry a listing's type names; 0 for a
// special file.
func kindOfType(t fs.FileMode) Kind {
	switch t {
	case 0:
		return KindFile
	case fs.ModeDir:
		return KindDir
	case fs.ModeSymlink:
		return KindSymlink
	}
	return 0
}

// readNamed reads the names of source directory d: its entries with
// their paths and kinds, the attributes not read. Special files are
// skipped. An error is the directory's own.
func readNamed(ctx context.Context, src *source.Source, d *Entry, log *zap.Logger) (Kids, error) {
	dns, err := src.WalkReadNames(ctx, d.Path())
	size, n := newDirPaths(d.Path()), 0
	for _, dn := range dns {
		if kindOfType(dn.Type).valid() {
			size.add(dn.Name)
			n++
		}
	}
	paths := sizedArena(size.n)
	slab := sizedSlab(n)
	for _, dn := range dns {
		k := kindOfType(dn.Type)
		if !k.valid() {
			log.Debug("walk: skipping special file", zap.String("path", ChildPath(d.Path(), dn.Name)))
			continue
		}
		e := slab.alloc()
		e.setStored(paths.join(d.Path(), dn.Name))
		e.setKind(k)
		e.Index = -1
	}
	return blockKids(slab.block()), err
}

// fillNamed reads the attributes of named, the names read of directory
// d (readNamed), and of a symlink its target. It returns the entries
// that are still there and of the kind named, and those that are not
// (gone). An error is the directory's own: every name is then gone.
func fillNamed(ctx context.Context, src *source.Source, d *Entry, named Kids, log *zap.Logger) (kids Kids, gone []*Entry, err error) {
	names := make([]string, named.Len())
	for i := range names {
		names[i] = named.At(i).Name()
	}
	des, err := src.WalkStatNames(ctx, d.Path(), names)
	if err != nil {
		return Kids{}, named.Slice(), err
	}
	now := checkedBits(time.Now().Unix())
	keep := make([]bool, len(names))
	j := 0
	for i, name := range names {
		e := named.At(i)
		var info fs.FileInfo
		if j < len(des) && des[j].Name() == name {
			info, _ = des[j].Info()
			j++
		}
		ok := info != nil && kindOfInfo(info) == e.Kind()
		switch {
		case info == nil:
			log.Debug("walk: removed since its directory was read", zap.String("path", e.Path()))
		case !ok:
			log.Warn("walk: changed kind since its directory was read; left out until a refresh",
				zap.String("path", e.Path()))
		default:
			e.initAttr(AttrFromInfo(info))
			e.setLink(linkOf(e.Kind(), info))
			e.checked.Store(now)
		}
		if ok && e.Kind() == KindSymlink {
			t, lerr := src.WalkReadlink(ctx, e.Path())
			if lerr != nil {
				log.Warn("walk: skipping symlink", zap.String("path", e.Path()), zap.Error(lerr))
				ok = false
			} else {
				e.setTarget(t)
			}
		}
		keep[i] = ok
		if !ok {
			gone = append(gone, e)
		}
	}
	if len(gone) == 0 {
		return named, nil, nil
	}
	kept := make([]*Entry, 0, named.Len()-len(gone))
	for i, k := range keep {
		if k {
			kept = append(kept, named.At(i))
		}
	}
	return ptrKids(kept), gone, nil
}

// name reads d's names (pass 1) unless d was read whole (on demand): it
// returns the directories below d to go into.
func (bg *bgWalk) name(c *Catalog, d *Entry) []*Entry {
	if d.Listed() {
		return dirsOf(d.Children())
	}
	release, err := bg.lock(bg.ctx, d)
	if err != nil {
		return nil
	}
	defer release()
	if d.Listed() {
		return dirsOf(d.Children())
	}
	kids, err := readNamed(bg.ctx, bg.src, d, bg.log)
	if err != nil {
		if bg.ctx.Err() != nil {
			return nil // stopped: the tree is not stored
		}
		bg.log.Warn("walk: cannot read directory; it will look empty", zap.String("path", d.Path()), zap.Error(err))
		c.treeMu.Lock()
		d.setChildren(Kids{})
		c.treeMu.Unlock()
		bg.pending.Add(-1)
		return nil
	}
	dirs := dirsOf(kids)
	bg.named.Store(d, kids)
	bg.attrsPending.Add(int64(kids.Len()))
	if d.Gone() { // its parent's fill found it gone meanwhile
		bg.drop(d)
		dirs = nil
	}
	bg.pending.Add(int64(len(dirs)) - 1)
	bg.progMu.Lock()
	if n := bg.entries.Add(int64(kids.Len())); bg.progress != nil {
		bg.progress(n)
	}
	bg.progMu.Unlock()
	return dirs
}

// drop marks e gone, with what was named below it.
func (bg *bgWalk) drop(e *Entry) {
	e.setGone()
	if kids, ok := bg.named.LoadAndDelete(e); ok {
		bg.attrsPending.Add(-int64(kids.Len()))
		for k := range kids.All() {
			bg.drop(k)
		}
	}
}

// number numbers the files of the tree of names under root in path
// order (Entry.Index; the table Numbered hands out): the directories
// whose attributes are read by their entries in the tree, the others
// by their names. It returns the count numbered.
func (bg *bgWalk) number(c *Catalog, root *Entry) int {
	// One look at each directory, for both passes: a fill on demand may
	// replace a directory's names by its entries meanwhile.
	seen := map[*Entry]Kids{}
	kidsOf := func(d *Entry) Kids {
		if k, ok := seen[d]; ok {
			return k
		}
		k, ok := bg.named.Load(d)
		if !ok {
			k = d.Children()
		}
		seen[d] = k
		return k
	}
	n := 0
	var index func(d *Entry)
	index = func(d *Entry) {
		for k := range kidsOf(d).All() {
			switch k.Kind() {
			case KindFile:
				k.Index = int32(n)
				n++
			case KindDir:
				index(k)
			}
		}
	}
	index(root)
	t := numberFilesOf(Numbering{runs: make([]run, 0, 16), at: make([]int32, 0, n>>atShift+1)}, kidsOf, root)
	c.byIndex.Store(&t)
	c.nextIndex.Store(int64(n))
	return n
}

// Named is closed once a walk that reads names first has numbered every
// file (before their attributes are read): jobs can be drawn from then.
// It is nil (never closed) for other walks and loads: the numbers come
// with the whole tree (WalkDone).
func (c *Catalog) Named() <-chan struct{} { return c.named }

// AttrsPending is the count of entries a walk that reads names first has
// named and not yet read the attributes of (0 when none runs).
func (c *Catalog) AttrsPending() int64 {
	if bg := c.bg.Load(); bg != nil {
		return bg.attrsPending.Load()
	}
	return 0
}

// runNames is pass 1 of a walk that reads names first: every directory's
// names, then the numbers (Named). It reports whether the walk goes on.
func (bg *bgWalk) runNames(c *Catalog, root *Entry) bool {
	Descend(bg.ctx, root, bg.workers, func(d *Entry) []*Entry { return bg.name(c, d) })
	if bg.ctx.Err() != nil {
		return false
	}
	n := bg.number(c, root)
	close(c.named)
	c.log.Info("source's names walked; reading their attributes", zap.Int("files", n),
		zap.Int64("entries", bg.entries.Load()+1), zap.Duration("took", time.Since(bg.start)))
	if bg.namesHold != nil {
		select {
		case <-bg.namesHold:
		case <-bg.ctx.Done():
			return false
		}
	}
	return true
}
