package fs

import "github.com/epochfs/epochfs/internal/status"

// What the mount shows through .epochfs/ is also offered to the daemon's
// other faces (the Prometheus endpoint): the status list itself, so that a
// key added to status() appears there without a second list to keep.

// Status returns .epochfs/status as a document, in the file's order.
func (fsys *FS) Status() *status.Doc { return fsys.status() }

// DocBytes is what the open ctl documents of every user but root hold now
// (their budget's use).
func (fsys *FS) DocBytes() int { return fsys.docs.total() }

// Looked returns how many entries of the dataset directory dir (a path
// relative to the root) the kernel holds an inode of, or -1 when it holds
// none of dir itself: what a walk of the mount left in memory (a listing
// that only reads names leaves none).
func (fsys *FS) Looked(dir string) int {
	in := fsys.inodeOf(dir)
	if in == nil {
		return -1
	}
	return len(in.Children())
}
