package catalog

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Kind is what a catalog entry is.
type Kind uint8

// Entry kinds.
const (
	KindFile Kind = iota + 1
	KindDir
	KindSymlink
)

// valid reports whether k is one of the kinds.
func (k Kind) valid() bool { return k >= KindFile && k <= KindSymlink }

// ErrBadRecord means a persisted catalog record could not be decoded.
var ErrBadRecord = errors.New("catalog: bad record")

// Record versions: 2 adds Checked at the end; 3 adds, after Checked, the
// source's link count, blocks, atime, ctime, and a hard link's device and
// inode. A record is written in the lowest version that holds it (3 when
// Nlink is known, else 2 when Checked is, else 1), so that every record
// has one encoding.
const (
	recordVersion        = 1
	recordVersionChecked = 2
	recordVersionMeta    = 3
)

// maxTarget bounds a symlink target and a tier name in a record.
const (
	maxTarget   = 4096
	maxTierName = 64
)

// record is the persisted form of an entry: what the source looked like
// when it was walked, and which tier holds a copy.
type record struct {
	Kind   Kind
	Mode   uint32 // full st_mode (type and permission bits)
	UID    uint32
	GID    uint32
	Size   int64
	Mtime  int64 // nanoseconds since the epoch
	Tier   string
	Target string // symlink target
	// Checked is when the source was last found to agree with the
	// record (unix seconds; 0: unknown): a walk, a validation, a copy.
	Checked int64
	// Version 3: the rest of the source's stat (Nlink 0: unknown), and
	// for a file with more than one link its device and inode (0
	// otherwise).
	Nlink        uint32
	Blocks       int64
	Atime, Ctime int64
	Dev, Ino     uint64
}

// encode appends the record's binary form to b:
// version, kind, uvarint mode, uid, gid, varint size, mtime,
// uvarint len + tier name, uvarint len + target, and in version 2 varint
// checked.
func (r *record) encode(b []byte) []byte {
	v := byte(recordVersion)
	switch {
	case r.Nlink != 0:
		v = recordVersionMeta
	case r.Checked != 0:
		v = recordVersionChecked
	}
	b = append(b, v, byte(r.Kind))
	b = binary.AppendUvarint(b, uint64(r.Mode))
	b = binary.AppendUvarint(b, uint64(r.UID))
	b = binary.AppendUvarint(b, uint64(r.GID))
	b = binary.AppendVarint(b, r.Size)
	b = binary.AppendVarint(b, r.Mtime)
	b = binary.AppendUvarint(b, uint64(len(r.Tier)))
	b = append(b, r.Tier...)
	b = binary.AppendUvarint(b, uint64(len(r.Target)))
	b = append(b, r.Target...)
	if v >= recordVersionChecked {
		b = binary.AppendVarint(b, r.Checked)
	}
	if v == recordVersionMeta {
		b = binary.AppendUvarint(b, uint64(r.Nlink))
		b = binary.AppendVarint(b, r.Blocks)
		b = binary.AppendVarint(b, r.Atime)
		b = binary.AppendVarint(b, r.Ctime)
		b = binary.AppendUvarint(b, r.Dev)
		b = binary.AppendUvarint(b, r.Ino)
	}
	return b
}

// decodeRecord parses a record, rejecting anything malformed.
//
// Long: one field at a time, in the encoding's order.
func decodeRecord(b []byte) (record, error) {
	var r record
	if len(b) < 2 {
		return r, fmt.Errorf("%w: %d bytes", ErrBadRecord, len(b))
	}
	version := b[0]
	if version < recordVersion || version > recordVersionMeta {
		return r, fmt.Errorf("%w: version %d", ErrBadRecord, b[0])
	}
	r.Kind = Kind(b[1])
	if r.Kind < KindFile || r.Kind > KindSymlink {
		return r, fmt.Errorf("%w: kind %d", ErrBadRecord, b[1])
	}
	b = b[2:]
	// Every number must be in its shortest form, so that a record has one
	// encoding (a decoded record re-encodes to the same bytes).
	u32 := func(name string) (uint32, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > 1<<32-1 || n != uvarintLen(v) {
			return 0, fmt.Errorf("%w: %s", ErrBadRecord, name)
		}
		b = b[n:]
		return uint32(v), nil
	}
	u64 := func(name string) (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 || n != uvarintLen(v) {
			return 0, fmt.Errorf("%w: %s", ErrBadRecord, name)
		}
		b = b[n:]
		return v, nil
	}
	i64 := func(name string) (int64, error) {
		v, n := binary.Varint(b)
		if n <= 0 || n != varintLen(v) {
			return 0, fmt.Errorf("%w: %s", ErrBadRecord, name)
		}
		b = b[n:]
		return v, nil
	}
	str := func(name string, max uint64) (string, error) {
		l, n := binary.Uvarint(b)
		if n <= 0 || n != uvarintLen(l) || l > max || l > uint64(len(b)-n) {
			return "", fmt.Errorf("%w: %s", ErrBadRecord, name)
		}
		s := string(b[n : n+int(l)])
		b = b[n+int(l):]
		return s, nil
	}
	var err error
	if r.Mode, err = u32("mode"); err != nil {
		return r, err
	}
	if r.UID, err = u32("uid"); err != nil {
		return r, err
	}
	if r.GID, err = u32("gid"); err != nil {
		return r, err
	}
	if r.Size, err = i64("size"); err != nil {
		return r, err
	}
	if r.Size < 0 {
		return r, fmt.Errorf("%w: negative size", ErrBadRecord)
	}
	if r.Mtime, err = i64("mtime"); err != nil {
		return r, err
	}
	if r.Tier, err = str("tier", maxTierName); err != nil {
		return r, err
	}
	if r.Target, err = str("target", maxTarget); err != nil {
		return r, err
	}
	if version >= recordVersionChecked {
		if r.Checked, err = i64("checked"); err != nil {
			return r, err
		}
		if r.Checked == 0 && version == recordVersionChecked {
			return r, fmt.Errorf("%w: version 2 without a check time", ErrBadRecord)
		}
	}
	if version == recordVersionMeta {
		if r.Nlink, err = u32("nlink"); err != nil {
			return r, err
		}
		if r.Nlink == 0 {
			return r, fmt.Errorf("%w: version 3 without a link count", ErrBadRecord)
		}
		if r.Blocks, err = i64("blocks"); err != nil {
			return r, err
		}
		if r.Atime, err = i64("atime"); err != nil {
			return r, err
		}
		if r.Ctime, err = i64("ctime"); err != nil {
			return r, err
		}
		if r.Dev, err = u64("dev"); err != nil {
			return r, err
		}
		if r.Ino, err = u64("ino"); err != nil {
			return r, err
		}
		if r.Blocks < 0 {
			return r, fmt.Errorf("%w: negative blocks", ErrBadRecord)
		}
	}
	if len(b) != 0 {
		return r, fmt.Errorf("%w: %d trailing bytes", ErrBadRecord, len(b))
	}
	return r, nil
}

func uvarintLen(v uint64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutUvarint(buf[:], v)
}

func varintLen(v int64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutVarint(buf[:], v)
}
