package catalog

import (
	"unsafe"
)

// An entry's residency: which tier holds its copy and what the placer
// knows of it this mount. The catalog persists the tier (records name the
// copy); the placer (placement) is the only writer of the rest, through
// these methods.

// SetTier records the tier holding the copy (-1: none).
func (e *Entry) SetTier(i int) { e.tier.Store(int32(i)) }

// DropTier clears the tier if it is still i, and reports whether it was.
func (e *Entry) DropTier(i int) bool { return e.tier.CompareAndSwap(int32(i), -1) }

// NoSpace reports whether the file fit no tier this mount.
func (e *Entry) NoSpace() bool { return e.nospace.Load() }

// SetNoSpace records whether the file fit no tier, and returns what was
// recorded before.
func (e *Entry) SetNoSpace(v bool) (was bool) { return e.nospace.Swap(v) }

// Validated reports whether the source's attributes were checked this
// mount (or within the validation TTL).
func (e *Entry) Validated() bool { return e.validated.Load() }

// SetValidated records that the source's attributes were checked.
func (e *Entry) SetValidated(v bool) { e.validated.Store(v) }

// Recheck reports whether the resident file's last check is older than
// the TTL and it waits for its background revalidation.
func (e *Entry) Recheck() bool { return e.recheck.Load() }

// SetRecheck sets the recheck mark and returns what it was.
func (e *Entry) SetRecheck(v bool) (was bool) { return e.recheck.Swap(v) }

// Checked is when the source was last found to agree with the entry's
// attributes (unix seconds; 0: unknown).
func (e *Entry) Checked() int64 { return e.checked.Load() }

// SetChecked records a check at t and returns the one before.
func (e *Entry) SetChecked(t int64) (old int64) { return e.checked.Swap(t) }

// SetAttr records new attributes of the source's file, of the same
// content (its size and mtime unchanged: SetContent otherwise).
func (e *Entry) SetAttr(a Attr) { e.attr.Store(&a) }

// SetContent records the attributes of a new content of the source's
// file and starts a new content version (Version). Callers are
// serialised (the placer's refreshMu).
func (e *Entry) SetContent(a Attr) {
	e.ver.Add(1)
	e.attr.Store(&a)
	e.ver.Add(1)
}

// CopyGen is the entry's copy generation, bumped at every drop of a copy.
func (e *Entry) CopyGen() uint64 { return e.copyGen.Load() }

// BumpCopyGen starts a new copy generation.
func (e *Entry) BumpCopyGen() { e.copyGen.Add(1) }

// Slot is where the placer keeps its open copy of the file (a
// *placement.Resident, loaded and swapped with sync/atomic's pointer
// functions). It is opaque here: a typed pointer would make the catalog
// import the placer, and an interface would grow every entry.
func (e *Entry) Slot() *unsafe.Pointer { return &e.slot }
