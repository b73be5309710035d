package placement

import (
	"sync/atomic"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// Dropping copies on purpose. Nothing is ever evicted on its own; an
// administrator who wants tier space back (for another dataset, or a part
// of this one that no job reads any more) drops copies by path. A dropped
// file is served from the source, and copied again when it is next read
// (or warmed), as any file without a copy. Readers that have the copy open
// keep reading it: its name is removed, its bytes go when they close.

// dropStats counts what Drop removed since the mount.
type dropStats struct {
	files, bytes atomic.Int64
}

// Drop removes the tier copies of files and reports how many it removed
// and their bytes (files without a copy are passed over).
func (s *Scrubber) Drop(files []*catalog.Entry) (n, bytes int64) {
	p := s
	for _, e := range files {
		i := e.Tier()
		if i < 0 || e.Kind() != catalog.KindFile {
			continue
		}
		size := e.Attr().Size
		if p.op.dropCopy(e, i) {
			n++
			bytes += size
		}
	}
	p.drops.files.Add(n)
	p.drops.bytes.Add(bytes)
	return n, bytes
}

// Dropped is what Drop removed since the mount: copies and bytes.
func (s *Scrubber) Dropped() (files, bytes int64) {
	return s.drops.files.Load(), s.drops.bytes.Load()
}
