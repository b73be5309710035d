package catalog

// Entries in shared blocks.
//
// An entry allocated alone is one more object for the collector; the
// entries a walk makes of one directory, and those a load makes of the
// stored records, are made together and allocated in blocks instead, as
// their paths are (arena.go). A block lives while any of its entries
// does: a directory's entries live and go together, and an entry a
// refresh removes is held with its block until the block's last entry
// goes.

// Block sizes of a slab whose size is not known: slabMin entries at
// first, then twice as many each time, up to slabMax (72 KiB of entries).
const (
	slabMin = 16
	slabMax = 1024
)

// entrySlab hands out zeroed entries from its blocks. Not safe for
// concurrent use; the entries are.
type entrySlab struct {
	buf  []Entry // the current block: its entries up to len are handed out
	next int     // the next block's size
}

// sizedSlab is a slab of one block of n entries (more if more are asked).
func sizedSlab(n int) entrySlab { return entrySlab{buf: make([]Entry, 0, n), next: slabMax / 2} }

// alloc returns an entry not handed out before.
func (s *entrySlab) alloc() *Entry {
	if len(s.buf) == cap(s.buf) {
		s.next = min(max(2*s.next, slabMin), slabMax)
		s.buf = make([]Entry, 0, s.next)
	}
	s.buf = s.buf[:len(s.buf)+1]
	return &s.buf[len(s.buf)-1]
}

// unalloc takes back the entry alloc returned last, not yet shared.
func (s *entrySlab) unalloc() {
	s.buf[len(s.buf)-1] = Entry{}
	s.buf = s.buf[:len(s.buf)-1]
}

// block is the entries of a sized slab, in the order handed out, while
// they fit the one block it was made with: a directory's entries as one
// block (kids.go).
func (s *entrySlab) block() []Entry { return s.buf[:len(s.buf):len(s.buf)] }
