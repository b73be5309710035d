package cluster

import (
	"bytes"
	"testing"
)

// A manifest read back from Redis is outside input: any bytes either fail
// to decode or decode to a manifest that passes its own MAC, whose chunk
// MACs count what its size and chunk size say, and that encodes back to
// the same bytes. Without the key nothing decodes.
func FuzzDecodeManifest(f *testing.F) {
	s := sealer{key: []byte("fuzz-key-fuzz-key-fuzz-key-fuzz-key!"), ns: "ds"}
	other := sealer{key: []byte("another-key-another-key-another-key!"), ns: "ds"}
	for _, m := range []*manifest{
		{kind: kindFile, size: 0, mtime: 1, chunkSize: ChunkSize, path: "a"},
		{kind: kindFile, size: 3*ChunkSize + 5, mtime: -7, chunkSize: ChunkSize, path: "dir/ünï.jpg"},
		{kind: kindCatalog, size: 10, chunkSize: minChunkSize, gen: "0123abcd", path: "/pfs/data"},
	} {
		for i := range chunksOf(m.size, m.chunkSize) {
			m.seal(s, bytes.Repeat([]byte{byte(i)}, int(m.chunkLen(i))))
		}
		f.Add(m.encode(s))
	}
	f.Add([]byte("EPM2"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeManifest(b, s)
		if _, oerr := decodeManifest(b, other); oerr == nil {
			t.Fatalf("a manifest decoded under two keys")
		}
		if err != nil {
			return
		}
		if m.kind != kindFile && m.kind != kindCatalog {
			t.Fatalf("kind %q", m.kind)
		}
		if m.size < 0 || m.chunkSize < minChunkSize || m.chunkSize > maxChunkSize || len(m.sums) != chunksOf(m.size, m.chunkSize) {
			t.Fatalf("decoded %+v", m)
		}
		if !bytes.Equal(m.encode(s), b) {
			t.Fatalf("re-encoding differs")
		}
	})
}
