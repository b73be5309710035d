package placement

import (
	"fmt"
	"path"
	"strings"
)

// Cred is the user on whose behalf a control file asks for dataset paths.
// The checks are the kernel's with default_permissions on the mount, made
// on the catalog's mode, uid and gid (the source's when it was walked): the
// owner's bits for the owner, the group's for a member of the file's group
// (primary or supplementary), else the others'. ACLs and capabilities other
// than root's are not seen. A nil Cred, or uid 0, passes every check.
type Cred struct {
	UID, GID uint32
	Groups   []uint32 // supplementary groups
}

// Root reports whether c passes every check.
func (c *Cred) Root() bool { return c == nil || c.UID == 0 }

func (c *Cred) String() string {
	if c == nil {
		return "root"
	}
	return fmt.Sprintf("uid=%d gid=%d groups=%v", c.UID, c.GID, c.Groups)
}

const (
	permRead   = 4
	permSearch = 1
)

// may reports whether c has the permission bits want on an entry of
// attributes a.
func (c *Cred) may(a Attr, want uint32) bool {
	if c.Root() {
		return true
	}
	var bits uint32
	switch {
	case a.UID == c.UID:
		bits = a.Mode >> 6
	case c.inGroup(a.GID):
		bits = a.Mode >> 3
	default:
		bits = a.Mode
	}
	return bits&want == want
}

// MayRead reports whether c may read a file of attributes a.
func (c *Cred) MayRead(a Attr) bool { return c.may(a, permRead) }

// sameAccess reports whether a and b grant the same access (owner, group
// and mode bits).
func sameAccess(a, b Attr) bool {
	return a.UID == b.UID && a.GID == b.GID && a.Mode&0o7777 == b.Mode&0o7777
}

func (c *Cred) inGroup(gid uint32) bool {
	if c.GID == gid {
		return true
	}
	for _, g := range c.Groups {
		if g == gid {
			return true
		}
	}
	return false
}

// cleanRel cleans a dataset-relative path ("" is the root). It does not
// trim white space: a name may start or end with it.
func cleanRel(p string) string { return strings.Trim(path.Clean("/"+p), "/") }

// LookupAs returns the entry at the dataset-relative path rel if who could
// open it through the mount: search permission on every directory from the
// root to its parent, read permission on the entry itself. Otherwise it
// fails with ErrNoEntry, exactly as for a path that does not exist, so that
// the answer tells nothing about what who may not see.
func (p *Placer) LookupAs(who *Cred, rel string) (*Entry, error) {
	rel = cleanRel(rel)
	e := p.cat.Root()
	if rel != "" {
		for _, name := range strings.Split(rel, "/") {
			if e.Kind != KindDir || !who.may(e.Attr(), permSearch) {
				e = nil
				break
			}
			if e = e.Lookup(name); e == nil {
				break
			}
		}
	}
	if e == nil || !who.may(e.Attr(), permRead) {
		return nil, fmt.Errorf("%w: %q", ErrNoEntry, rel)
	}
	return e, nil
}

// filesAs calls fn for the regular files under e that who could find and
// open: it descends into the directories who may read and search and takes
// the files who may read. e itself has been checked (LookupAs).
func filesAs(who *Cred, e *Entry, fn func(*Entry) bool) bool {
	if who.Root() {
		return e.Files(fn)
	}
	if e.Kind == KindFile {
		return fn(e)
	}
	if e.Kind != KindDir || !who.may(e.Attr(), permRead|permSearch) {
		return true
	}
	for _, ch := range e.Children() {
		if ch.Kind == KindFile && !who.may(ch.Attr(), permRead) {
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
func (p *Placer) ResolvePathsAs(who *Cred, paths []string) ([]*Entry, error) {
	var out []*Entry
	for _, raw := range paths {
		e, err := p.LookupAs(who, raw)
		if err != nil {
			return nil, err
		}
		filesAs(who, e, func(f *Entry) bool { out = append(out, f); return true })
	}
	return out, nil
}

// FilesAs returns every file of the dataset who could list and read (the
// dataset root included in the check), in path order: "all" as who sees it.
func (p *Placer) FilesAs(who *Cred) []*Entry {
	var out []*Entry
	root := p.cat.Root()
	if who.may(root.Attr(), permRead) {
		filesAs(who, root, func(f *Entry) bool { out = append(out, f); return true })
	}
	return out
}

// opener tells whether who may open files by their paths, remembering the
// verdict for each directory (search permission on it and every directory
// above it).
type opener struct {
	p    *Placer
	who  *Cred
	dirs map[string]bool
}

func (o *opener) mayOpen(e *Entry) bool {
	if o.who.Root() {
		return true
	}
	dir := ""
	if i := strings.LastIndexByte(e.Path, '/'); i >= 0 {
		dir = e.Path[:i]
	}
	return o.searchable(dir) && o.who.may(e.Attr(), permRead)
}

// searchable reports whether who may search dir and every directory above.
func (o *opener) searchable(dir string) bool {
	if ok, seen := o.dirs[dir]; seen {
		return ok
	}
	ok := false
	if d := o.p.cat.Find(dir); d != nil && d.Kind == KindDir && o.who.may(d.Attr(), permSearch) {
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
func (p *Placer) WarmupProgressAs(who *Cred) WarmupProgress {
	if who.Root() {
		return p.WarmupProgress()
	}
	o := &opener{p: p, who: who, dirs: map[string]bool{}}
	return p.warmupProgress(o.mayOpen)
}
