package catalog

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

// The permission bits May checks.
const (
	PermRead   = 4
	PermSearch = 1
)

// May reports whether c has the permission bits want (PermRead,
// PermSearch) on an entry of attributes a.
func (c *Cred) May(a Attr, want uint32) bool {
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
func (c *Cred) MayRead(a Attr) bool { return c.May(a, PermRead) }

// SameAccess reports whether a and b grant the same access (owner, group
// and mode bits).
func SameAccess(a, b Attr) bool {
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

// CleanRel cleans a dataset-relative path ("" is the root). It does not
// trim white space: a name may start or end with it.
func CleanRel(p string) string { return strings.Trim(path.Clean("/"+p), "/") }
