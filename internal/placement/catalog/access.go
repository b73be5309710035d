package catalog

// Who may see what: the lookups of a user's ctl requests (warmup, drop,
// refresh, a job's subset and samples) check the permissions the source
// gives each entry, as the kernel checks an open through the mount.

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoEntry means a path names nothing in the dataset, or nothing the
// user asking may open (the answer tells them nothing more).
var ErrNoEntry = errors.New("no such file or directory in the dataset")

// LookupAs returns the entry at the dataset-relative path rel if who could
// open it through the mount: search permission on every directory from the
// root to its parent, read permission on the entry itself. Otherwise it
// fails with ErrNoEntry, exactly as for a path that does not exist, so that
// the answer tells nothing about what who may not see.
func (c *Catalog) LookupAs(who *Cred, rel string) (*Entry, error) {
	rel = CleanRel(rel)
	e := c.Root()
	if rel != "" {
		for _, name := range strings.Split(rel, "/") {
			if e.Kind() != KindDir || !who.May(e.Attr(), PermSearch) {
				e = nil
				break
			}
			if e = e.Lookup(name); e == nil {
				break
			}
		}
	}
	if e == nil || !who.May(e.Attr(), PermRead) {
		return nil, fmt.Errorf("%w: %q", ErrNoEntry, rel)
	}
	return e, nil
}

// ReachableAs reports whether who could reach e through the mount:
// search permission on every directory from the root to e's parent.
func (c *Catalog) ReachableAs(who *Cred, e *Entry) bool {
	if who.Root() || e.Path() == "" {
		return true
	}
	d := c.Root()
	names := strings.Split(e.Path(), "/")
	for _, name := range names[:len(names)-1] {
		if d.Kind() != KindDir || !who.May(d.Attr(), PermSearch) {
			return false
		}
		if d = d.Lookup(name); d == nil {
			return false
		}
	}
	return d.Kind() == KindDir && who.May(d.Attr(), PermSearch)
}

// FilesUnderAs calls fn for the regular files under e that who could find and
// open: it descends into the directories who may read and search and takes
// the files who may read. e itself has been checked (LookupAs).
func FilesUnderAs(who *Cred, e *Entry, fn func(*Entry) bool) bool {
	if who.Root() {
		return e.Files(fn)
	}
	if e.Kind() == KindFile {
		return fn(e)
	}
	if e.Kind() != KindDir || !who.May(e.Attr(), PermRead|PermSearch) {
		return true
	}
	for ch := range e.Children().All() {
		if ch.Kind() == KindFile && !who.May(ch.Attr(), PermRead) {
			continue
		}
		if !FilesUnderAs(who, ch, fn) {
			return false
		}
	}
	return true
}

// ResolvePathsAs turns dataset-relative paths (files or directories, taken
// exactly: white space is part of a name) into the files they name that who
// could open, or fails with ErrNoEntry on the first path who could not open
// (LookupAs). A directory gives the files under it that who could list and
// read; the others are left out without an error.
func (c *Catalog) ResolvePathsAs(who *Cred, paths []string) ([]*Entry, error) {
	var out []*Entry
	for _, raw := range paths {
		e, err := c.LookupAs(who, raw)
		if err != nil {
			return nil, err
		}
		FilesUnderAs(who, e, func(f *Entry) bool { out = append(out, f); return true })
	}
	return out, nil
}

// FilesAs returns every file of the dataset who could list and read (the
// dataset root included in the check), in path order: "all" as who sees it.
func (c *Catalog) FilesAs(who *Cred) []*Entry {
	var out []*Entry
	root := c.Root()
	if who.May(root.Attr(), PermRead) {
		FilesUnderAs(who, root, func(f *Entry) bool { out = append(out, f); return true })
	}
	return out
}

// Opener tells whether who may open files by their paths, remembering the
// verdict for each directory (search permission on it and every directory
// above it).
type Opener struct {
	c    *Catalog
	who  *Cred
	dirs map[string]bool
}

func (o *Opener) MayOpen(e *Entry) bool {
	if o.who.Root() {
		return true
	}
	dir := ""
	if i := strings.LastIndexByte(e.Path(), '/'); i >= 0 {
		dir = e.Path()[:i]
	}
	return o.searchable(dir) && o.who.May(e.Attr(), PermRead)
}

// searchable reports whether who may search dir and every directory above.
func (o *Opener) searchable(dir string) bool {
	if ok, seen := o.dirs[dir]; seen {
		return ok
	}
	ok := false
	if d := o.c.Find(dir); d != nil && d.Kind() == KindDir && o.who.May(d.Attr(), PermSearch) {
		ok = true
		if dir != "" {
			parent := ""
			if i := strings.LastIndexByte(dir, '/'); i >= 0 {
				parent = dir[:i]
			}
			ok = o.searchable(parent)
		}
	}
	o.dirs[dir] = ok
	return ok
}

// OpenerAs returns an Opener of who's.
func (c *Catalog) OpenerAs(who *Cred) *Opener {
	return &Opener{c: c, who: who, dirs: map[string]bool{}}
}
