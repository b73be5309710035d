package placement

import (
	"fmt"
	"strings"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// LookupAs returns the entry at the dataset-relative path rel if who could
// open it through the mount: search permission on every directory from the
// root to its parent, read permission on the entry itself. Otherwise it
// fails with ErrNoEntry, exactly as for a path that does not exist, so that
// the answer tells nothing about what who may not see.
func (p *Placer) LookupAs(who *catalog.Cred, rel string) (*catalog.Entry, error) {
	rel = catalog.CleanRel(rel)
	e := p.cat.Root()
	if rel != "" {
		for _, name := range strings.Split(rel, "/") {
			if e.Kind != catalog.KindDir || !who.May(e.Attr(), catalog.PermSearch) {
				e = nil
				break
			}
			if e = e.Lookup(name); e == nil {
				break
			}
		}
	}
	if e == nil || !who.May(e.Attr(), catalog.PermRead) {
		return nil, fmt.Errorf("%w: %q", ErrNoEntry, rel)
	}
	return e, nil
}

// ReachableAs reports whether who could reach e through the mount:
// search permission on every directory from the root to e's parent.
func (p *Placer) ReachableAs(who *catalog.Cred, e *catalog.Entry) bool {
	if who.Root() || e.Path == "" {
		return true
	}
	d := p.cat.Root()
	names := strings.Split(e.Path, "/")
	for _, name := range names[:len(names)-1] {
		if d.Kind != catalog.KindDir || !who.May(d.Attr(), catalog.PermSearch) {
			return false
		}
		if d = d.Lookup(name); d == nil {
			return false
		}
	}
	return d.Kind == catalog.KindDir && who.May(d.Attr(), catalog.PermSearch)
}

// filesAs calls fn for the regular files under e that who could find and
// open: it descends into the directories who may read and search and takes
// the files who may read. e itself has been checked (LookupAs).
func filesAs(who *catalog.Cred, e *catalog.Entry, fn func(*catalog.Entry) bool) bool {
	if who.Root() {
		return e.Files(fn)
	}
	if e.Kind == catalog.KindFile {
		return fn(e)
	}
	if e.Kind != catalog.KindDir || !who.May(e.Attr(), catalog.PermRead|catalog.PermSearch) {
		return true
	}
	for _, ch := range e.Children() {
		if ch.Kind == catalog.KindFile && !who.May(ch.Attr(), catalog.PermRead) {
			continue
		}
		if !filesAs(who, ch, fn) {
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
func (p *Placer) ResolvePathsAs(who *catalog.Cred, paths []string) ([]*catalog.Entry, error) {
	var out []*catalog.Entry
	for _, raw := range paths {
		e, err := p.LookupAs(who, raw)
		if err != nil {
			return nil, err
		}
		filesAs(who, e, func(f *catalog.Entry) bool { out = append(out, f); return true })
	}
	return out, nil
}

// FilesAs returns every file of the dataset who could list and read (the
// dataset root included in the check), in path order: "all" as who sees it.
func (p *Placer) FilesAs(who *catalog.Cred) []*catalog.Entry {
	var out []*catalog.Entry
	root := p.cat.Root()
	if who.May(root.Attr(), catalog.PermRead) {
		filesAs(who, root, func(f *catalog.Entry) bool { out = append(out, f); return true })
	}
	return out
}

// opener tells whether who may open files by their paths, remembering the
// verdict for each directory (search permission on it and every directory
// above it).
type opener struct {
	p    *Placer
	who  *catalog.Cred
	dirs map[string]bool
}

func (o *opener) mayOpen(e *catalog.Entry) bool {
	if o.who.Root() {
		return true
	}
	dir := ""
	if i := strings.LastIndexByte(e.Path, '/'); i >= 0 {
		dir = e.Path[:i]
	}
	return o.searchable(dir) && o.who.May(e.Attr(), catalog.PermRead)
}

// searchable reports whether who may search dir and every directory above.
func (o *opener) searchable(dir string) bool {
	if ok, seen := o.dirs[dir]; seen {
		return ok
	}
	ok := false
	if d := o.p.cat.Find(dir); d != nil && d.Kind == catalog.KindDir && o.who.May(d.Attr(), catalog.PermSearch) {
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

// WarmupProgressAs is WarmupProgress counting only the files of the warmup
// set that who could open (root: all of them), so that a user's view never
// shows the number or size of files they may not see.
func (p *Placer) WarmupProgressAs(who *catalog.Cred) WarmupProgress {
	if who.Root() {
		return p.warmupProgressAll()
	}
	o := &opener{p: p, who: who, dirs: map[string]bool{}}
	return p.warmupProgress(o.mayOpen)
}
