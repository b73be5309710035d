package catalog

import "github.com/epochfs/epochfs/internal/placement/residency"

// An entry's residency: which tier holds its copy, its attributes and
// when the source last agreed with them, which the catalog persists
// (records name the copy); the placer (placement) is their only writer,
// through these methods. What the placer knows of the file this mount
// only is its own (Residency).

// SetTier records the tier holding the copy (-1: none).
func (e *Entry) SetTier(i int) {
	for {
		s := e.state().Load()
		if e.state().CompareAndSwap(s, s&^stateTier|tierBits(i)) {
			return
		}
	}
}

// DropTier clears the tier if it is still i, and reports whether it was.
func (e *Entry) DropTier(i int) bool {
	for {
		s := e.state().Load()
		if s&stateTier != tierBits(i) {
			return false
		}
		if e.state().CompareAndSwap(s, s&^stateTier) {
			return true
		}
	}
}

// tierBits is tier index i (-1: none) as the entry's state holds it.
func tierBits(i int) uint32 {
	if i < 0 || i >= stateTier {
		return 0
	}
	return uint32(i + 1)
}

// Checked is when the source was last found to agree with the entry's
// attributes (unix seconds; 0: unknown).
func (e *Entry) Checked() int64 { return int64(e.checked.Load()) }

// SetChecked records a check at t and returns the one before.
func (e *Entry) SetChecked(t int64) (old int64) { return int64(e.checked.Swap(checkedBits(t))) }

// checkedBits is unix time t as an entry holds it: 32 bits of seconds
// (until 2106); a time before 1970 is unknown (0).
func checkedBits(t int64) uint32 { return uint32(min(max(t, 0), 1<<32-1)) }

// SetAttr records new attributes of the source's file, of the same
// content (its size and mtime unchanged: SetContent otherwise).
func (e *Entry) SetAttr(a Attr) { e.setWhole(a) }

// setWhole makes a the entry's attributes, kept whole (entryMore.attr).
func (e *Entry) setWhole(a Attr) {
	whole := new(Attr) // allocated here only: &a would move every caller's a to the heap
	*whole = a
	e.updateMore(func(m *entryMore) { m.attr = whole })
}

// SetContent records the attributes of a new content of the source's
// file and starts a new content version (Version). Callers are
// serialised (the placer's validator.refreshMu).
func (e *Entry) SetContent(a Attr) {
	whole := new(Attr)
	*whole = a
	e.updateMore(func(m *entryMore) { m.attr, m.ver = whole, m.ver+1 })
}

// Residency is the placer's knowledge of the file this mount (package
// residency): the catalog holds it in the entry and never reads it.
func (e *Entry) Residency() *residency.State { return &e.res }
