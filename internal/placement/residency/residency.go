// Package residency is what the placer knows of a file this mount beyond
// what the catalog persists (the tier that holds its copy, its attributes,
// when the source was last checked): whether it fit no tier, whether the
// source was checked this mount, whether its background recheck is due,
// and its copy generation.
//
// The catalog holds one State in every entry, so that it costs no map
// lookup and no memory beyond its fields, and never reads it: only
// placement does (catalog.Entry.Residency).
package residency

import "sync/atomic"

// State is one file's residency this mount. The zero value is a file
// nothing is known of yet.
//
// It is 4 bytes, one of every entry of the catalog, and shares them with
// the entry's own state: the low HolderBits bits of the word are the
// holder's (Word), the marks the bits above them and the copy generation
// the 13 at the top (a file's copy would have to be dropped 2¹³ times
// within one placer's read for two generations to meet).
// The placer's kept copies of the few files it keeps open are its own
// (internal/placement/resident.go).
type State struct {
	// word holds the holder's bits in its low HolderBits bits, the marks
	// above them and the copy generation, bumped at every drop of a copy
	// (internal/placement/resident.go), at the top.
	word atomic.Uint32
}

// HolderBits is how many of the word's low bits are the holder's.
const HolderBits = 16

// The marks.
const (
	noSpace   uint32 = 1 << (HolderBits + iota) // did not fit any tier this mount
	validated                                   // source attributes checked this mount, or within the TTL (internal/placement/validate.go)
	recheck                                     // resident, its last check older than the TTL: revalidated in the background

	genShift = HolderBits + 3 // the copy generation's bits, above the marks
)

// Word is the word the state is kept in, for the holder's bits: the
// holder changes only those, with atomic operations that leave the others
// as they are (Or, And, a compare-and-swap of the word read), and State
// changes only the others.
func (s *State) Word() *atomic.Uint32 { return &s.word }

func (s *State) has(m uint32) bool { return s.word.Load()&m != 0 }

// set sets or clears m and reports whether it was set.
func (s *State) set(m uint32, v bool) (was bool) {
	if v {
		return s.word.Or(m)&m != 0
	}
	return s.word.And(^m)&m != 0
}

// NoSpace reports whether the file fit no tier this mount.
func (s *State) NoSpace() bool { return s.has(noSpace) }

// SetNoSpace records whether the file fit no tier, and returns what was
// recorded before.
func (s *State) SetNoSpace(v bool) (was bool) { return s.set(noSpace, v) }

// Validated reports whether the source's attributes were checked this
// mount (or within the validation TTL).
func (s *State) Validated() bool { return s.has(validated) }

// SetValidated records that the source's attributes were checked.
func (s *State) SetValidated(v bool) { s.set(validated, v) }

// Recheck reports whether the resident file's last check is older than
// the TTL and it waits for its background revalidation.
func (s *State) Recheck() bool { return s.has(recheck) }

// SetRecheck sets the recheck mark and returns what it was.
func (s *State) SetRecheck(v bool) (was bool) { return s.set(recheck, v) }

// CopyGen is the file's copy generation, bumped at every drop of a copy.
func (s *State) CopyGen() uint64 { return uint64(s.word.Load() >> genShift) }

// BumpCopyGen starts a new copy generation.
func (s *State) BumpCopyGen() { s.word.Add(1 << genShift) }
