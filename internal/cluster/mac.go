package cluster

// Stored values are sealed with a keyed MAC (HMAC-SHA256), so that what a
// node serves as a dataset file or loads as the catalog is what a node
// holding the key stored: anyone else who can write to Redis (another
// tenant of a shared cluster, a client whose password leaked) can delete
// values, never forge or move one. A chunk's MAC covers the dataset id,
// the value set it belongs to (kind, path, size, mtime, chunk size,
// generation), its index and its bytes; a manifest's covers the dataset id
// and everything in it, including its chunks' MACs. A value that fails is
// corrupt: counted, dropped, read from the source instead.
//
// The key comes from a root-only file (Options.KeyFile). A cluster opened
// with Insecure and no key file uses a fixed, public key: the MACs then
// still catch damaged values, not forged ones.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"os"
	"strings"
	"syscall"
)

// macSize is the length of one MAC (HMAC-SHA256).
const macSize = sha256.Size

// minKeyLen is the shortest key file taken (a 32-byte random key, base64
// encoded, is 44 characters).
const minKeyLen = 32

// insecureKey is the key of a cluster opened with Insecure and no key file.
var insecureKey = []byte("epochfs: no key_file (insecure = true)")

// sealer computes the MACs of one dataset's stored values.
type sealer struct {
	key []byte
	ns  string // dataset id
}

// Value-set kinds, so that a file's chunk never passes as a catalog's.
const (
	kindFile    = 'f'
	kindCatalog = 'k'
)

func (s sealer) mac() hash.Hash {
	h := hmac.New(sha256.New, s.key)
	writeField(h, []byte(s.ns))
	return h
}

// writeField writes b length-prefixed, so that no two field lists hash
// alike.
func writeField(h hash.Hash, b []byte) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
	h.Write(b)
}

func writeInt(h hash.Hash, v int64) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(v))
	h.Write(n[:])
}

// chunkMAC is the MAC of chunk i of the value set m describes.
func (s sealer) chunkMAC(m *manifest, i int, data []byte) []byte {
	h := s.mac()
	h.Write([]byte{'c', m.kind})
	writeField(h, []byte(m.path))
	writeInt(h, m.size)
	writeInt(h, m.mtime)
	writeInt(h, m.chunkSize)
	writeField(h, []byte(m.gen))
	writeInt(h, int64(i))
	writeField(h, data)
	return h.Sum(nil)
}

// manifestMAC is the MAC of an encoded manifest's body.
func (s sealer) manifestMAC(body []byte) []byte {
	h := s.mac()
	h.Write([]byte{'m'})
	writeField(h, body)
	return h.Sum(nil)
}

// errSecretFile: a key or password file that others could read or write.
var errSecretFile = errors.New("must be a regular file owned by root (the daemon's user) with no group or other permissions (chmod 600)")

// readSecret reads a one-line secret (key or password) from a file only
// the daemon's user can read or change: a trailing newline is dropped.
// The errors name the file, never its content.
func readSecret(key, path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("cluster: %s: %w", key, err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return "", fmt.Errorf("cluster: %s %s: %w", key, path, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 {
		return "", fmt.Errorf("cluster: %s %s (owner uid %d, mode %04o): %w", key, path, st.Uid, st.Mode&0o7777, errSecretFile)
	}
	var b [4097]byte
	n, err := f.Read(b[:])
	if err != nil && n == 0 {
		return "", fmt.Errorf("cluster: %s %s: empty", key, path)
	}
	if n == len(b) {
		return "", fmt.Errorf("cluster: %s %s: longer than 4096 bytes", key, path)
	}
	v := strings.TrimRight(string(b[:n]), "\r\n")
	if v == "" {
		return "", fmt.Errorf("cluster: %s %s: empty", key, path)
	}
	if strings.ContainsAny(v, "\r\n") {
		return "", fmt.Errorf("cluster: %s %s: more than one line", key, path)
	}
	return v, nil
}

// readKey reads the MAC key file.
func readKey(path string) ([]byte, error) {
	k, err := readSecret("key_file", path)
	if err != nil {
		return nil, err
	}
	if len(k) < minKeyLen {
		return nil, fmt.Errorf("cluster: key_file %s: %d characters, want at least %d (e.g. openssl rand -base64 32)", path, len(k), minKeyLen)
	}
	return []byte(k), nil
}
