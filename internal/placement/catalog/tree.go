package catalog

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Changes of the tree while serving. A refresh finds files added to and
// removed from the source, and an open finds a file gone; the tree follows
// without a remount. Readers never lock: a directory's children slice is
// replaced whole. Changes are serialised by Catalog.treeMu.
//
// A new entry gets a fresh ID and, for a file, the next Index: indices of
// removed files are not reused, so jobs that numbered the files at start
// keep their numbering (an Index at or past a job's count is not one of
// its samples).

// ParentOf returns the directory entry holding p ("" is the root's own
// parent: nil).
func (c *Catalog) ParentOf(p string) *Entry {
	if p == "" {
		return nil
	}
	dir := path.Dir(p)
	if dir == "." {
		dir = ""
	}
	e := find(c.root, dir)
	if e == nil || e.Kind() != KindDir {
		return nil
	}
	return e
}

// Add inserts e (with its subtree, for a directory) under its parent,
// numbers it and persists its records. The parent must exist and must not
// hold an entry of the same name.
func (c *Catalog) Add(e *Entry) error {
	c.treeMu.Lock()
	defer c.treeMu.Unlock()
	parent := c.ParentOf(e.Path())
	if parent == nil {
		return fmt.Errorf("catalog: add %s: no parent directory in the dataset", e.Path())
	}
	_, err := c.addLocked(parent, []*Entry{e})
	return err
}

// AddAll inserts es, new entries of the directory dir (each with its
// subtree), as Add does, with one copy of dir's children for all of them:
// a refresh that adds thousands of files to a directory of a million
// copies its children once, not once a file. It returns the entries it
// added; one whose name dir holds already, or named twice, or not a child
// of dir, is left out, and the error names it.
func (c *Catalog) AddAll(dir *Entry, es []*Entry) ([]*Entry, error) {
	c.treeMu.Lock()
	defer c.treeMu.Unlock()
	if dir.Kind() != KindDir || dir.Gone() || c.Find(dir.Path()) != dir {
		return nil, fmt.Errorf("catalog: add to %s: not a directory of the dataset", dir.Path())
	}
	return c.addLocked(dir, es)
}

// addLocked is AddAll with treeMu held and dir a directory of the tree.
func (c *Catalog) addLocked(dir *Entry, es []*Entry) ([]*Entry, error) {
	old := dir.Children()
	es = slices.Clone(es)
	slices.SortStableFunc(es, func(a, b *Entry) int { return a.compareNames(b) })
	var errs []error
	add := es[:0]
	for i, e := range es {
		switch {
		case ChildPath(dir.Path(), e.Name()) != e.Path():
			errs = append(errs, fmt.Errorf("catalog: add %s: not an entry of %q", e.Path(), dir.Path()))
		case old.Lookup(e.Name()) != nil, i > 0 && es[i-1].compareNames(e) == 0:
			errs = append(errs, fmt.Errorf("catalog: add %s: already in the dataset", e.Path()))
		default:
			add = append(add, e)
		}
	}
	if len(add) == 0 {
		return nil, errors.Join(errs...)
	}
	var files, bytes int64
	var number func(x *Entry)
	number = func(x *Entry) {
		x.setID(c.newID(x))
		x.Index = -1
		if x.Kind() == KindFile {
			x.Index = int32(c.nextIndex.Add(1) - 1)
			files++
			bytes += x.Attr().Size
		}
		if !x.Listed() {
			x.setChildren(Kids{})
		}
		for ch := range x.Children().All() {
			number(ch)
		}
	}
	for _, e := range add {
		number(e)
	}
	if t := c.byIndex.Load(); t != nil {
		nt := numberFiles(*t, add...)
		c.byIndex.Store(&nt)
	}
	// Both are sorted by name: one merge.
	kids := make([]*Entry, 0, old.Len()+len(add))
	i := 0
	for _, e := range add {
		for i < old.Len() && old.At(i).compareNames(e) < 0 {
			kids = append(kids, old.At(i))
			i++
		}
		kids = append(kids, e)
	}
	for ; i < old.Len(); i++ {
		kids = append(kids, old.At(i))
	}
	dir.setChildren(ptrKids(kids))
	c.files.Add(files)
	c.bytes.Add(bytes)
	for _, e := range add {
		e.Walk(func(x *Entry) bool {
			if err := c.Persist(x); err != nil {
				errs = append(errs, err)
				return false
			}
			return true
		})
	}
	return slices.Clip(add), errors.Join(errs...)
}

// Remove detaches e (and its subtree) from its parent, marks every
// entry of it gone and deletes their records. It returns the files it
// removed (their tier copies are the caller's to drop), and false when e
// was not in the tree.
func (c *Catalog) Remove(e *Entry) ([]*Entry, bool) {
	c.treeMu.Lock()
	defer c.treeMu.Unlock()
	parent := c.ParentOf(e.Path())
	if parent == nil {
		return nil, false
	}
	files, removed := c.removeLocked(parent, []*Entry{e})
	return files, len(removed) > 0
}

// RemoveAll is Remove for entries of the directory dir, with one copy of
// its children for all of them: a refresh that removes thousands of files
// from a directory of a million copies its children once, not once a
// file. It returns the files removed and the entries of es it removed
// (not those that are not dir's, or were removed already).
func (c *Catalog) RemoveAll(dir *Entry, es []*Entry) (files, removed []*Entry) {
	c.treeMu.Lock()
	defer c.treeMu.Unlock()
	return c.removeLocked(dir, es)
}

// removeLocked is RemoveAll with treeMu held.
func (c *Catalog) removeLocked(dir *Entry, es []*Entry) (files, removed []*Entry) {
	drop := make(map[*Entry]bool, len(es))
	for _, e := range es {
		if !e.Gone() {
			drop[e] = true
		}
	}
	old := dir.Children()
	kids := make([]*Entry, 0, old.Len())
	for x := range old.All() {
		if drop[x] {
			removed = append(removed, x)
		} else {
			kids = append(kids, x)
		}
	}
	if len(removed) == 0 {
		return nil, nil // not in the tree
	}
	dir.setChildren(ptrKids(kids))
	for _, e := range removed {
		e.Walk(func(x *Entry) bool {
			x.setGone()
			if x.Kind() == KindFile {
				files = append(files, x)
				c.files.Add(-1)
				c.bytes.Add(-x.Attr().Size)
			}
			c.forget(x.Path()) // the guarded writer (writer.go)
			return true
		})
	}
	return files, removed
}

// Walk calls fn for e and every entry under it, parents first, until fn
// returns false.
func (e *Entry) Walk(fn func(*Entry) bool) bool {
	if !fn(e) {
		return false
	}
	for ch := range e.Children().All() {
		if !ch.Walk(fn) {
			return false
		}
	}
	return true
}

// indexFiles builds the table of files by Index.
func (c *Catalog) indexFiles(root *Entry, n int) {
	t := numberFiles(Numbering{runs: make([]run, 0, 16), at: make([]int32, 0, n>>atShift+1)}, root)
	c.byIndex.Store(&t)
}

// ByIndex returns the file numbered i (Entry.Index), or nil. A removed
// file keeps its number (and is Gone).
func (c *Catalog) ByIndex(i int) *Entry {
	if t := c.byIndex.Load(); t != nil {
		return t.At(i)
	}
	return nil
}

// Numbered is the files by Index (ByIndex of every number given): a
// table its readers share, never changed once returned (the catalog
// writes only past its end: Numbering).
func (c *Catalog) Numbered() Numbering {
	if t := c.byIndex.Load(); t != nil {
		return *t
	}
	return Numbering{}
}

// Indexed is the count of file numbers given (ByIndex takes 0 to it
// minus one; removed files keep theirs).
func (c *Catalog) Indexed() int {
	if t := c.byIndex.Load(); t != nil {
		return t.Len()
	}
	return 0
}

// Resident reports whether sample i (Entry.Index) has a tier copy: the
// sampler's view of residency (sampler.Residency).
func (c *Catalog) Resident(i int) bool {
	e := c.ByIndex(i)
	return e != nil && e.Tier() >= 0
}

// SampleGone reports whether sample i's file is gone from the dataset (a
// refresh removed it; it keeps its number): the sampler never hands it
// out (sampler.Options.Gone).
func (c *Catalog) SampleGone(i int) bool {
	e := c.ByIndex(i)
	return e == nil || e.Gone()
}

// SampleName is the file name of sample i (Entry.Index), or i in decimal
// if there is none: what the views' engine names a sample by in its
// errors (preprocess.EngineOptions.Name).
func (c *Catalog) SampleName(i int) string {
	if e := c.ByIndex(i); e != nil {
		return path.Base(e.Path())
	}
	return strconv.Itoa(i)
}

// childPath joins a directory's dataset path and a name.
func ChildPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + strings.TrimPrefix(name, "/")
}

// NewTree is a catalog of the tree under root with the tiers named,
// numbered as a walk numbers it and held in memory only (nothing is stored):
// for measuring the work done over a catalog without a database. Its
// directories are made with NewDir.
func NewTree(root *Entry, tiers []string) *Catalog {
	c := &Catalog{tiers: tiers, walkDone: make(chan struct{})}
	close(c.walkDone)
	c.setRoot(root)
	return c
}

// NewFile is a regular file's entry at path with the attributes a (for
// NewTree, and for tests outside the package).
func NewFile(path string, a Attr) *Entry {
	e := newOfKind(KindFile)
	e.setPath(path)
	e.initAttr(a)
	return e
}

// NewDir is a directory entry at path holding kids, sorted by name (for
// NewTree).
func NewDir(path string, kids []*Entry) *Entry {
	d := newOfKind(KindDir)
	d.setPath(path)
	d.initAttr(Attr{Mode: 0o755})
	d.setChildren(ptrKids(kids))
	return d
}
