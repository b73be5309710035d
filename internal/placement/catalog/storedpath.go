package catalog

import (
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
//   - h odd: the record is a child's: a uvarint back, then the child's
//     name, h/2 bytes. The full record back bytes before this one, in the
//     same block (arena.go), is the path of the child's directory.
//
// The entries of one directory are stored as its path once and their
// names, so a dataset's directory paths are not repeated in every file's
// (train/n01440764/ in each of ImageNet's 1,300 files of that class).
// h is never 0 (a path is not empty), so a record's first byte is never
// 0 (Entry.pm). The root's path, "", is the nil pointer.

// storedLen is the bytes p takes as a full record.
func storedLen(p string) int {
	if p == "" {
		return 0
	}
	return storedLenOf(len(p))
}

// storedLenOf is the bytes a full record of n bytes (n > 0) takes.
func storedLenOf(n int) int { return uvarintLen(uint64(2*n)) + n }

// childLen is the bytes a child's record of a name of n bytes takes,
// back bytes after its directory's.
func childLen(n, back int) int { return uvarintLen(uint64(2*n+1)) + uvarintLen(uint64(back)) + n }

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

// storeChild writes a child's record of name, back bytes after its
// directory's, into b, childLen bytes, and returns it.
func storeChild(b []byte, name string, back int) *byte {
	n := binary.PutUvarint(b, uint64(2*len(name)+1))
	n += binary.PutUvarint(b[n:], uint64(back))
	copy(b[n:], name)
	return &b[0]
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
	back, name := childOf(p, h, k)
	dir := storedString((*byte)(unsafe.Add(unsafe.Pointer(p), -back)))
	var b strings.Builder
	b.Grow(len(dir) + 1 + len(name))
	b.WriteString(dir)
	b.WriteByte('/')
	b.WriteString(name)
	return b.String()
}

// childOf reads a child's record at p, whose h took k bytes: how far back
// its directory's record is, and its name.
func childOf(p *byte, h uint64, k int) (int, string) {
	back, j := uvarintAt((*byte)(unsafe.Add(unsafe.Pointer(p), k)))
	return int(back), unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(p), k+j)), int(h>>1))
}

// storedName is the last element of the path stored at p ("" for the
// root), without making the path.
func storedName(p *byte) string {
	if p == nil {
		return ""
	}
	h, k := uvarintAt(p)
	if h&1 == 1 {
		_, name := childOf(p, h, k)
		return name
	}
	s := unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(p), k)), int(h>>1))
	return s[strings.LastIndexByte(s, '/')+1:]
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
