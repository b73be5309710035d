package placement

import (
	"syscall"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"golang.org/x/sys/unix"
)

// Readahead asks the kernel to start reading e's resident copy into the
// page cache (POSIX_FADV_WILLNEED) and returns without waiting, so that a
// read soon after (a job's next batches) finds the bytes in memory instead
// of waiting on the disk: what Fetch does for a file without a copy. It
// does nothing for a file that has no copy; a copy in a memory tier is in
// memory already and costs one open.
func (b *Buffer) Readahead(e *catalog.Entry) {
	i := e.Tier()
	if i < 0 || e.Kind() != catalog.KindFile {
		return
	}
	fd, _, err := b.tiers[i].OpenFD(e.Path())
	if err != nil {
		return // Open reports it, when the file is read
	}
	_ = unix.Fadvise(fd, 0, 0, unix.FADV_WILLNEED)
	syscall.Close(fd)
}
