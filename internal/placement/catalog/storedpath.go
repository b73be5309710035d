package catalog

import (
	"cmp"
	"encoding/binary"
	"strings"
	"unsafe"
)

// Stored paths.
//
// An entry holds its path as one pointer to a record (a string header
// would take 16 bytes of every entry, a pointer and a length 12). A
// record begins with a uvarint, h:
//
//   - h even: the path whole, h/2 bytes, follows (a full record);
//   - h odd: the record is a child's: a uvarint back, then the stem of
//     the child's name, h/4 bytes. The full record back bytes before
//     this one, in the same block (arena.go), is the path of the child's
//     directory, and the full record right after that one the block's
//     suffix (often empty): the child's name is its stem followed by the
//     suffix when h&2 is set, its stem alone otherwise.
//
// The entries of one directory are stored as its path once and their
// names, so a dataset's directory paths are not repeated in every file's
// (train/n01440764/ in each of ImageNet's 1,300 files of that class), and
// the extension most of them share (".JPEG") once a block. h is never 0
// for a path (a path is not empty), so the first byte of an entry's
// record is never 0 (Entry.pm). The root's path, "", is the nil pointer.

// storedLen is the bytes p takes as a full record.
func storedLen(p string) int {
	if p == "" {
		return 0
	}
	return storedLenOf(len(p))
}

// storedLenOf is the bytes a full record of n bytes (n > 0) takes.
func storedLenOf(n int) int { return uvarintLen(uint64(2*n)) + n }

// childLen is the bytes a child's record of a stem of n bytes takes,
// back bytes after its directory's.
func childLen(n, back int) int { return uvarintLen(uint64(4*n+3)) + uvarintLen(uint64(back)) + n }

// suffixLen is the bytes the full record of a block's suffix s takes.
func suffixLen(s string) int { return uvarintLen(uint64(2*len(s))) + len(s) }

// storePath writes p into b, storedLen(p) bytes, as a full record and
// returns it (nil for "").
func storePath(b []byte, p string) *byte {
	if p == "" {
		return nil
	}
	n := binary.PutUvarint(b, uint64(2*len(p)))
	copy(b[n:], p)
	return &b[0]
}

// storeChild writes a child's record of stem, back bytes after its
// directory's, into b, childLen bytes, and returns it; suffixed says that
// the name is stem followed by the block's suffix.
func storeChild(b []byte, stem string, suffixed bool, back int) *byte {
	h := uint64(4*len(stem) + 1)
	if suffixed {
		h |= 2
	}
	n := binary.PutUvarint(b, h)
	n += binary.PutUvarint(b[n:], uint64(back))
	copy(b[n:], stem)
	return &b[0]
}

// storeFull writes s into b as a full record, empty or not; it returns
// the bytes written.
func storeFull(b []byte, s string) int {
	n := binary.PutUvarint(b, uint64(2*len(s)))
	return n + copy(b[n:], s)
}

// storedString is the path stored at p.
func storedString(p *byte) string {
	if p != nil && *p < 0x80 && *p&1 == 0 { // most full records: a length of one byte
		return unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(p), 1)), *p>>1)
	}
	return storedOther(p)
}

// storedOther is storedString of the root's path (nil), of a long full
// record and of a child's record (kept apart so that storedString is
// inlined). A child's path is made (its directory's, "/", its name).
func storedOther(p *byte) string {
	if p == nil {
		return ""
	}
	h, k := uvarintAt(p)
	if h&1 == 0 {
		return unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(p), k)), int(h>>1))
	}
	dir, stem, suffix := childOf(p, h, k)
	var b strings.Builder
	b.Grow(len(dir) + 1 + len(stem) + len(suffix))
	b.WriteString(dir)
	b.WriteByte('/')
	b.WriteString(stem)
	b.WriteString(suffix)
	return b.String()
}

// fullAt is the full record at p.
func fullAt(p *byte) (s string, n int) {
	h, k := uvarintAt(p)
	return unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(p), k)), int(h>>1)), k + int(h>>1)
}

// childOf reads a child's record at p, whose h took k bytes: the path of
// its directory, its stem and the suffix that follows it ("" if none).
func childOf(p *byte, h uint64, k int) (dir, stem, suffix string) {
	back, j := uvarintAt((*byte)(unsafe.Add(unsafe.Pointer(p), k)))
	stem = unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(p), k+j)), int(h>>2))
	d := (*byte)(unsafe.Add(unsafe.Pointer(p), -int(back)))
	dir, n := fullAt(d)
	if h&2 != 0 {
		suffix, _ = fullAt((*byte)(unsafe.Add(unsafe.Pointer(d), n)))
	}
	return dir, stem, suffix
}

// storedNameParts is the last element of the path stored at p ("" for
// the root) in two parts, without making it: the name is a + b.
func storedNameParts(p *byte) (a, b string) {
	if p == nil {
		return "", ""
	}
	h, k := uvarintAt(p)
	if h&1 == 1 {
		_, stem, suffix := childOf(p, h, k)
		return stem, suffix
	}
	s := unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(p), k)), int(h>>1))
	return s[strings.LastIndexByte(s, '/')+1:], ""
}

// storedName is the last element of the path stored at p ("" for the
// root); made only when it has a suffix.
func storedName(p *byte) string {
	a, b := storedNameParts(p)
	if b == "" {
		return a
	}
	return a + b
}

// compareName compares the name a + b with s, as strings.Compare would
// (a + b, s), without making a + b.
func compareName(a, b, s string) int { return compareParts(a, b, s, "") }

// compareParts compares a1 + a2 with b1 + b2, as strings.Compare would,
// without making either.
func compareParts(a1, a2, b1, b2 string) int {
	for {
		if a1 == "" {
			a1, a2 = a2, ""
		}
		if b1 == "" {
			b1, b2 = b2, ""
		}
		if a1 == "" || b1 == "" {
			return cmp.Compare(len(a1), len(b1)) // one has ended (or both)
		}
		n := min(len(a1), len(b1))
		if c := strings.Compare(a1[:n], b1[:n]); c != 0 {
			return c
		}
		a1, b1 = a1[n:], b1[n:]
	}
}

// uvarintAt reads the uvarint stored at p (one the catalog wrote), byte
// by byte: a record's last bytes may end its block.
func uvarintAt(p *byte) (uint64, int) {
	var x uint64
	for i, s := 0, uint(0); ; i, s = i+1, s+7 {
		b := *(*byte)(unsafe.Add(unsafe.Pointer(p), i))
		if b < 0x80 {
			return x | uint64(b)<<s, i + 1
		}
		x |= uint64(b&0x7f) << s
	}
}
