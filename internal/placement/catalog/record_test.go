package catalog

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

func sampleRecords() []record {
	return []record{
		{Kind: KindFile, Mode: 0o100644, UID: 1000, GID: 1000, Size: 110_000, Mtime: 1_700_000_000_123_456_789, Tier: "mem"},
		{Kind: KindFile},
		{Kind: KindDir, Mode: 0o40755, Size: 4096, Mtime: -1},
		{Kind: KindSymlink, Mode: 0o120777, Size: 14, Target: "../ñandú/日本.dat"},
		{Kind: KindFile, Mode: math.MaxUint32, UID: math.MaxUint32, GID: math.MaxUint32,
			Size: math.MaxInt64, Mtime: math.MinInt64, Tier: strings.Repeat("t", maxTierName),
			Target: strings.Repeat("x", maxTarget)},
		{Kind: KindFile, Size: 1, Mtime: math.MaxInt64, Tier: "nvme"},
		{Kind: KindFile, Size: 9, Mtime: 5, Tier: "nvme", Checked: 1_790_000_000},
		{Kind: KindDir, Mode: 0o40755, Checked: math.MinInt64},
		{Kind: KindFile, Size: 9, Mtime: 5, Nlink: 1, Blocks: 8, Atime: 4, Ctime: 6},
		{Kind: KindFile, Size: 9, Mtime: 5, Checked: 1_790_000_000, Nlink: 3, Blocks: 0, Atime: -1, Ctime: math.MaxInt64,
			Dev: math.MaxUint64, Ino: 1 << 40},
		{Kind: KindDir, Mode: 0o40755, Nlink: math.MaxUint32, Blocks: math.MaxInt64, Atime: math.MinInt64},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range sampleRecords() {
		b := r.encode(nil)
		got, err := decodeRecord(b)
		if err != nil {
			t.Errorf("decode(encode(%+v)): %v", r, err)
			continue
		}
		if got != r {
			t.Errorf("round trip: got %+v, want %+v", got, r)
		}
		// encode appends.
		pre := []byte("prefix")
		if b2 := r.encode(pre); !bytes.Equal(b2[:6], []byte("prefix")) || !bytes.Equal(b2[6:], b) {
			t.Errorf("encode does not append to its argument")
		}
	}
}

func TestDecodeRecordRejectsMalformed(t *testing.T) {
	good := (&record{Kind: KindFile, Mode: 0o100644, Size: 5, Mtime: 7, Tier: "mem", Target: ""}).encode(nil)
	cases := map[string][]byte{
		"empty":          nil,
		"one byte":       {recordVersion},
		"version":        append([]byte{recordVersionMeta + 1}, good[1:]...),
		"v3 no meta":     append(append([]byte{recordVersionMeta}, good[1:]...), 0),
		"v3 nlink 0":     append(append([]byte{recordVersionMeta}, good[1:]...), 0, 0, 0, 0, 0, 0, 0),
		"v3 blocks < 0":  append(append([]byte{recordVersionMeta}, good[1:]...), 0, 1, 1, 0, 0, 0, 0),
		"v2 no checked":  append([]byte{recordVersionChecked}, good[1:]...),
		"v2 checked 0":   append(append([]byte{recordVersionChecked}, good[1:]...), 0),
		"kind 0":         {recordVersion, 0, 0, 0, 0, 0, 0, 0, 0},
		"kind 4":         {recordVersion, 4, 0, 0, 0, 0, 0, 0, 0},
		"truncated":      good[:len(good)-1],
		"trailing":       append(append([]byte{}, good...), 0),
		"negative size":  (&record{Kind: KindFile, Size: -1}).encode(nil),
		"mode > 32 bits": {recordVersion, 1, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 0, 0, 0, 0},
		"long tier":      (&record{Kind: KindFile, Tier: strings.Repeat("t", maxTierName+1)}).encode(nil),
		"long target":    (&record{Kind: KindSymlink, Target: strings.Repeat("x", maxTarget+1)}).encode(nil),
		"huge length":    {recordVersion, 1, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"varint overflow": {recordVersion, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
			0, 0, 0, 0, 0, 0},
		// The same record as {Kind: KindFile}, with a mode of 0 written in
		// two bytes: a record has one encoding.
		"non-minimal varint": {recordVersion, 1, 0x80, 0x00, 0, 0, 0, 0, 0, 0},
		"non-minimal length": {recordVersion, 1, 0, 0, 0, 0, 0, 0x80, 0x00, 0},
	}
	for name, b := range cases {
		r, err := decodeRecord(b)
		if err == nil {
			t.Errorf("%s: decoded %+v from % x", name, r, b)
			continue
		}
		if !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: error %v does not match ErrBadRecord", name, err)
		}
	}
}

// FuzzDecodeRecord: decoding never panics, and a record that decodes
// re-encodes to exactly the bytes it came from (one encoding per record).
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(r.encode(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{recordVersion, byte(KindDir), 0x80, 0x00, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("error %v does not match ErrBadRecord", err)
			}
			return
		}
		if r.Size < 0 || len(r.Tier) > maxTierName || len(r.Target) > maxTarget || r.Kind < KindFile || r.Kind > KindSymlink {
			t.Fatalf("decoded an out-of-range record %+v", r)
		}
		if again := r.encode(nil); !bytes.Equal(again, b) {
			t.Fatalf("decode(% x) = %+v re-encodes to % x", b, r, again)
		}
	})
}

// checkRoundTrip checks that a valid record survives encode and decode,
// and that an invalid one is refused.
func checkRoundTrip(t *testing.T, r record, valid bool) {
	t.Helper()
	got, err := decodeRecord(r.encode(nil))
	if !valid {
		if err == nil {
			t.Fatalf("invalid record %+v decoded", r)
		}
		return
	}
	if err != nil {
		t.Fatalf("decode(encode(%+v)): %v", r, err)
	}
	if got != r {
		t.Fatalf("round trip: got %+v, want %+v", got, r)
	}
}

// FuzzRecordRoundTrip: every valid record survives encode and decode.
func FuzzRecordRoundTrip(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(uint8(r.Kind), r.Mode, r.UID, r.GID, r.Size, r.Mtime, r.Tier, r.Target)
	}
	f.Fuzz(func(t *testing.T, kind uint8, mode, uid, gid uint32, size, mtime int64, tierName, target string) {
		r := record{Kind: Kind(kind), Mode: mode, UID: uid, GID: gid, Size: size, Mtime: mtime, Tier: tierName, Target: target}
		valid := r.Kind >= KindFile && r.Kind <= KindSymlink && size >= 0 && len(tierName) <= maxTierName && len(target) <= maxTarget
		checkRoundTrip(t, r, valid)
	})
}

// FuzzRecordMetaRoundTrip: every valid record, version 3's fields too,
// survives encode and decode.
func FuzzRecordMetaRoundTrip(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(uint8(r.Kind), r.Mode, r.UID, r.GID, r.Size, r.Mtime, r.Tier, r.Target, r.Checked, r.Nlink, r.Blocks, r.Atime, r.Ctime, r.Dev, r.Ino)
	}
	f.Fuzz(func(t *testing.T, kind uint8, mode, uid, gid uint32, size, mtime int64, tierName, target string,
		checked int64, nlink uint32, blocks, atime, ctime int64, dev, ino uint64) {
		r := record{Kind: Kind(kind), Mode: mode, UID: uid, GID: gid, Size: size, Mtime: mtime, Tier: tierName, Target: target,
			Checked: checked, Nlink: nlink, Blocks: blocks, Atime: atime, Ctime: ctime, Dev: dev, Ino: ino}
		if nlink == 0 {
			// Without a link count the rest of version 3 is not written.
			r.Blocks, r.Atime, r.Ctime, r.Dev, r.Ino = 0, 0, 0, 0, 0
		}
		valid := r.Kind >= KindFile && r.Kind <= KindSymlink && size >= 0 && len(tierName) <= maxTierName && len(target) <= maxTarget && r.Blocks >= 0
		checkRoundTrip(t, r, valid)
	})
}
