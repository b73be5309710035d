package cluster

import (
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"
)

// ChunkSize is the size of the values a file is stored in (the last chunk
// is shorter). Redis takes values up to 512 MiB, but one command holds a
// master's single thread for as long as it copies its value: at 1 MiB a
// chunk costs well under a millisecond of a master's time, so a node
// fetching a large file never stalls the other nodes' small reads, while
// the per-command overhead (a round trip, ~50 µs) stays a few percent of
// the transfer. It is also the placer's copy buffer, so a fill writes one
// chunk per source read. A 110 KB ImageNet JPEG is one chunk.
const ChunkSize = 1 << 20

// The bounds a manifest's chunk size must be within to be believed.
const (
	minChunkSize = 4 << 10
	maxChunkSize = 64 << 20
)

// errBadManifest means a manifest that does not decode or whose MAC
// fails.
var errBadManifest = errors.New("cluster: bad manifest")

const manifestMagic = "EPM2"

// manifest describes one stored value set (a file version, a catalog): its
// size, chunk size and the MAC of every chunk (mac.go). It is written
// last, after every chunk, so a value set is visible only whole. Chunks are
// checked against it, and it against its own MAC.
//
// Encoding: "EPM2", the MAC of what follows, kind byte, uvarint size,
// varint mtime, uvarint chunk size, uvarint len + gen, uvarint len + path,
// then one MAC per chunk (their count follows from size and chunk size).
type manifest struct {
	kind      byte // kindFile or kindCatalog
	size      int64
	mtime     int64
	chunkSize int64
	gen       string // catalogs: the chunks' generation
	path      string
	sums      [][]byte // chunk MACs
}

func chunksOf(size, chunkSize int64) int {
	if size == 0 {
		return 0
	}
	return int((size + chunkSize - 1) / chunkSize)
}

// chunkLen is the length of chunk i.
func (m *manifest) chunkLen(i int) int64 {
	return min(m.chunkSize, m.size-int64(i)*m.chunkSize)
}

// header is where the body starts: the magic, then the MAC.
const header = len(manifestMagic) + macSize

// seal appends the MAC of chunk data, the next of the value set, to m.
func (m *manifest) seal(s sealer, data []byte) {
	m.sums = append(m.sums, s.chunkMAC(m, len(m.sums), data))
}

func (m *manifest) encode(s sealer) []byte {
	b := make([]byte, header, header+1+3*binary.MaxVarintLen64+len(m.gen)+len(m.path)+macSize*len(m.sums))
	copy(b, manifestMagic)
	b = append(b, m.kind)
	b = binary.AppendUvarint(b, uint64(m.size))
	b = binary.AppendVarint(b, m.mtime)
	b = binary.AppendUvarint(b, uint64(m.chunkSize))
	b = binary.AppendUvarint(b, uint64(len(m.gen)))
	b = append(b, m.gen...)
	b = binary.AppendUvarint(b, uint64(len(m.path)))
	b = append(b, m.path...)
	for _, sum := range m.sums {
		b = append(b, sum...)
	}
	copy(b[len(manifestMagic):header], s.manifestMAC(b[header:]))
	return b
}

// decodeManifest parses and checks a manifest; anything malformed is
// errBadManifest.
func decodeManifest(b []byte, s sealer) (*manifest, error) {
	if len(b) < header+1 || string(b[:len(manifestMagic)]) != manifestMagic {
		return nil, fmt.Errorf("%w: no magic", errBadManifest)
	}
	if !hmac.Equal(b[len(manifestMagic):header], s.manifestMAC(b[header:])) {
		return nil, fmt.Errorf("%w: MAC (written without this cluster's key_file, or altered)", errBadManifest)
	}
	b = b[header:]
	u := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	str := func() (string, bool) {
		l, ok := u()
		if !ok || l > uint64(len(b)) || l > 4096 {
			return "", false
		}
		s := string(b[:l])
		b = b[l:]
		return s, true
	}
	m := &manifest{kind: b[0]}
	b = b[1:]
	if m.kind != kindFile && m.kind != kindCatalog {
		return nil, fmt.Errorf("%w: kind", errBadManifest)
	}
	size, ok := u()
	if !ok || size > 1<<62 {
		return nil, fmt.Errorf("%w: size", errBadManifest)
	}
	m.size = int64(size)
	mt, n := binary.Varint(b)
	if n <= 0 {
		return nil, fmt.Errorf("%w: mtime", errBadManifest)
	}
	m.mtime, b = mt, b[n:]
	cs, ok := u()
	if !ok || cs < minChunkSize || cs > maxChunkSize {
		return nil, fmt.Errorf("%w: chunk size", errBadManifest)
	}
	m.chunkSize = int64(cs)
	if m.gen, ok = str(); !ok {
		return nil, fmt.Errorf("%w: gen", errBadManifest)
	}
	if m.path, ok = str(); !ok {
		return nil, fmt.Errorf("%w: path", errBadManifest)
	}
	nc := chunksOf(m.size, m.chunkSize)
	if len(b) != macSize*nc {
		return nil, fmt.Errorf("%w: %d bytes of MACs for %d chunks", errBadManifest, len(b), nc)
	}
	m.sums = make([][]byte, nc)
	for i := range m.sums {
		m.sums[i] = b[macSize*i : macSize*(i+1)]
	}
	return m, nil
}

// verify checks chunk i's bytes against the manifest.
func (m *manifest) verify(s sealer, i int, data []byte) bool {
	return i >= 0 && i < len(m.sums) && int64(len(data)) == m.chunkLen(i) && hmac.Equal(s.chunkMAC(m, i, data), m.sums[i])
}
