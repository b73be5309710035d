package views

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"sync"
	"unicode/utf8"

	"github.com/epochfs/epochfs/internal/preprocess"
)

// A batch file is a NumPy .npz: a zip archive of .npy arrays, stored (not
// compressed: tensors do not compress, and numpy.load reads stored members
// without zlib). The archive is laid out before anything is filled in, in
// one buffer: each member's data is written in place (a file read straight
// into its slot, a tensor copied once), then the checksums, headers and
// the central directory are added around it. Buffers come from a pool and
// go back when the reader is done with the batch (Batch.Release).

// npyMember is one array of the archive: C order, little-endian.
type npyMember struct {
	name  string // without .npy
	descr string // "|u1", "<f4", "<i8", "<U12"
	shape []int
	size  int // bytes of data

	hdr  []byte // the .npy header
	off  int    // offset of the local file header
	data int    // offset of the data
}

const (
	zipLocalLen   = 30
	zipCentralLen = 46
	zipEndLen     = 22
	zipDate       = 0x21 // 1980-01-01, the format's first day
)

// npzFile is an archive being filled.
type npzFile struct {
	mem     Buffer
	buf     []byte
	members []npyMember
	dir     int // offset of the central directory
}

// newNPZ lays out the members in a buffer from alloc.
// Fill each member's Data, then call Finish.
func newNPZ(members []npyMember, alloc Alloc) (*npzFile, error) {
	f := &npzFile{members: members}
	off := 0
	for i := range f.members {
		m := &f.members[i]
		m.hdr = preprocess.AppendNPYHeaderOf(nil, m.descr, m.shape)
		m.off = off
		m.data = off + zipLocalLen + len(m.name) + len(".npy") + len(m.hdr)
		off = m.data + m.size
		if m.data+m.size-m.off > math.MaxUint32-1 || off > math.MaxUint32-1 {
			return nil, fmt.Errorf("%w: the batch would be %d bytes or more; the .npz format of a batch file holds 4 GiB: lower batch_size", ErrInvalid, off)
		}
	}
	f.dir = off
	for _, m := range f.members {
		off += zipCentralLen + len(m.name) + len(".npy")
	}
	off += zipEndLen
	if off > math.MaxUint32-1 {
		return nil, fmt.Errorf("%w: the batch would be %d bytes; the .npz format of a batch file holds 4 GiB: lower batch_size", ErrInvalid, off)
	}
	mem, err := alloc(off)
	if err != nil {
		return nil, fmt.Errorf("views: batch of %d bytes: %w", off, err)
	}
	f.mem, f.buf = mem, mem.Bytes()[:off]
	return f, nil
}

// Data is member i's data, to be filled in.
func (f *npzFile) Data(i int) []byte {
	m := &f.members[i]
	return f.buf[m.data : m.data+m.size : m.data+m.size]
}

// Finish writes the headers, checksums and directory, and returns the file.
func (f *npzFile) Finish() []byte {
	le := binary.LittleEndian
	w := f.dir
	for _, m := range f.members {
		name := m.name + ".npy"
		copy(f.buf[m.off+zipLocalLen+len(name):], m.hdr)
		crc := crc32.Update(crc32.ChecksumIEEE(m.hdr), crc32.IEEETable, f.buf[m.data:m.data+m.size])
		size := uint32(len(m.hdr) + m.size)
		h := f.buf[m.off:]
		le.PutUint32(h[0:], 0x04034b50)
		le.PutUint16(h[4:], 20) // version needed
		le.PutUint16(h[6:], 0)  // flags
		le.PutUint16(h[8:], 0)  // stored
		le.PutUint16(h[10:], 0) // time
		le.PutUint16(h[12:], zipDate)
		le.PutUint32(h[14:], crc)
		le.PutUint32(h[18:], size)
		le.PutUint32(h[22:], size)
		le.PutUint16(h[26:], uint16(len(name)))
		le.PutUint16(h[28:], 0) // extra
		copy(h[zipLocalLen:], name)

		c := f.buf[w:]
		le.PutUint32(c[0:], 0x02014b50)
		le.PutUint16(c[4:], 3<<8|20) // made by: Unix, 2.0
		le.PutUint16(c[6:], 20)
		le.PutUint16(c[8:], 0)
		le.PutUint16(c[10:], 0)
		le.PutUint16(c[12:], 0)
		le.PutUint16(c[14:], zipDate)
		le.PutUint32(c[16:], crc)
		le.PutUint32(c[20:], size)
		le.PutUint32(c[24:], size)
		le.PutUint16(c[28:], uint16(len(name)))
		le.PutUint16(c[30:], 0)         // extra
		le.PutUint16(c[32:], 0)         // comment
		le.PutUint16(c[34:], 0)         // disk
		le.PutUint16(c[36:], 0)         // internal attributes
		le.PutUint32(c[38:], 0o644<<16) // external: -rw-r--r--
		le.PutUint32(c[42:], uint32(m.off))
		copy(c[zipCentralLen:], name)
		w += zipCentralLen + len(name)
	}
	e := f.buf[w:]
	n := uint16(len(f.members))
	le.PutUint32(e[0:], 0x06054b50)
	le.PutUint16(e[4:], 0)
	le.PutUint16(e[6:], 0)
	le.PutUint16(e[8:], n)
	le.PutUint16(e[10:], n)
	le.PutUint32(e[12:], uint32(w-f.dir))
	le.PutUint32(e[16:], uint32(f.dir))
	le.PutUint16(e[20:], 0)
	return f.buf
}

// putInt64s writes v into dst (8·len(v) bytes).
func putInt64s(dst []byte, v []int64) {
	for i, x := range v {
		binary.LittleEndian.PutUint64(dst[8*i:], uint64(x))
	}
}

// stringsWidth is the width of a NumPy "<U" array of v.
func stringsWidth(v []string) int {
	width := 1
	for _, s := range v {
		width = max(width, utf8.RuneCountInString(s))
	}
	return width
}

// putStrings writes v as a NumPy "<U{width}" array (UTF-32, fixed width,
// zero padded) into dst (4·width·len(v) bytes); v is valid UTF-8.
func putStrings(dst []byte, v []string, width int) {
	for i, s := range v {
		o := dst[4*width*i : 4*width*(i+1)]
		n := 0
		for _, r := range s {
			binary.LittleEndian.PutUint32(o[4*n:], uint32(r))
			n++
		}
		clear(o[4*n:])
	}
}

// Batch buffers are pooled in power-of-two size classes from 64 KiB, so a
// job's batches reuse the memory of the ones read before them instead of
// allocating (and zeroing) tens of megabytes each.
const (
	minBufferShift = 16
	maxBufferShift = 32
)

// Pool holds pooled batch buffers (one per jobs manager: no memory is
// shared between two mounts of one process). The zero Pool is ready.
type Pool [maxBufferShift - minBufferShift + 1]sync.Pool

func bufferClass(n int) int {
	if n <= 1<<minBufferShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minBufferShift
}

// A Buffer is the memory a batch is assembled in.
type Buffer interface {
	Bytes() []byte // at least the bytes asked for
	Free()         // nothing may use Bytes afterwards
}

// Alloc returns a Buffer of n bytes whose contents are undefined.
type Alloc func(n int) (Buffer, error)

// pooled is a Buffer from a pool.
type pooled struct {
	b    []byte
	pool *Pool
}

func (b pooled) Bytes() []byte { return b.b }
func (b pooled) Free()         { b.pool.put(b.b) }

// Alloc is the pool's Alloc.
func (bp *Pool) Alloc(n int) (Buffer, error) { return pooled{bp.get(n), bp}, nil }

// get returns a buffer of n bytes whose contents are undefined.
func (bp *Pool) get(n int) []byte {
	c := bufferClass(n)
	if c >= len(bp) {
		return make([]byte, n)
	}
	if p, ok := bp[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<(c+minBufferShift))
}

// put gives b back to the pool; nothing may use it afterwards.
func (bp *Pool) put(b []byte) {
	c := bufferClass(cap(b))
	if c >= len(bp) || cap(b) != 1<<(c+minBufferShift) {
		return // not one of ours
	}
	b = b[:0]
	bp[c].Put(&b)
}
