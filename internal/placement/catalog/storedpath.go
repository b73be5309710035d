package catalog

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// Stored paths.
//
// An entry holds its path as one pointer to the path's length, a uvarint,
// followed by the path's bytes (a string header would take 16 bytes of
// every entry, a pointer and a length 12, and the entry would not fit 72
// bytes): one byte of length for a path shorter than 128 bytes, two up to
// 16 KiB. The root's path, "", is the nil pointer.

// storedLen is the bytes p takes stored.
func storedLen(p string) int {
	if p == "" {
		return 0
	}
	return storedLenOf(len(p))
}

// storedLenOf is the bytes a path of n bytes (n > 0) takes stored.
func storedLenOf(n int) int { return (bits.Len64(uint64(n))+6)/7 + n }

// storePath writes p into b, storedLen(p) bytes, and returns the stored
// path (nil for "").
func storePath(b []byte, p string) *byte {
	if p == "" {
		return nil
	}
	n := binary.PutUvarint(b, uint64(len(p)))
	copy(b[n:], p)
	return &b[0]
}

// storedString is the path stored at p.
func storedString(p *byte) string {
	if p != nil && *p < 0x80 { // most paths: a length of one byte
		return unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(p), 1)), *p)
	}
	return storedOther(p)
}

// storedOther is storedString of the root's path (nil) and of a path of
// 128 bytes or more (kept apart so that storedString is inlined).
func storedOther(p *byte) string {
	if p == nil {
		return ""
	}
	n, k := binary.Uvarint(unsafe.Slice(p, binary.MaxVarintLen64))
	return unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(p), k)), int(n))
}
