package cluster

// Key layout. Every key starts with "epochfs:<dataset id>:", so two datasets
// never share one. The part in braces is the Redis Cluster hash tag: keys
// that one Lua script touches together share it (one slot, one master).
//
//	epochfs:<ds>:{f<id>}:m         a file's manifest (manifest.go)
//	epochfs:<ds>:{f<id>}:l         its fill lease (SET NX PX, renewed)
//	epochfs:<ds>:{f<id>}:c<i>      its chunk i
//	epochfs:<ds>:{q}:bytes         bytes stored or being filled (quota counter)
//	epochfs:<ds>:{q}:sizes         file id → bytes it is charged
//	epochfs:<ds>:{k<src>}:m        the catalog's manifest (catalog.go)
//	epochfs:<ds>:{k<src>}:l        its walk lease
//	epochfs:<ds>:{k<src>}:g<gen>:c<i>  its chunks, generation gen
//	epochfs:<ds>:{j<job>}:shape    a cluster job's config and run id (epochs.go)
//	epochfs:<ds>:{j<job>}:members  the nodes in it
//	epochfs:<ds>:{j<job>}:r<run>:e<ep>:seen|got  an epoch's seen set and counts
//	epochfs:<ds>:{j<job>}:r<run>:ended  rank → the last epoch whose end it read
//
// <id> names one version of a file: the first 128 bits of the SHA-256 of
// its path, size and mtime, in hex. A changed file has another id, so a
// copy of an old version is never found for the new one. All chunks of a
// file share its slot: the commit (manifest last) and the drop of a bad
// copy are single scripts. The files of a dataset spread over the masters;
// one file is served by one master.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
)

type keys struct{ ns string }

func newKeys(dataset string) keys { return keys{ns: "epochfs:" + dataset + ":"} }

// FileKey names one version of a dataset file.
type FileKey struct {
	Path  string
	Size  int64
	Mtime int64 // nanoseconds since the epoch
}

// fileID is the hex id of one version of a file.
func fileID(k FileKey) string {
	h := sha256.New()
	h.Write([]byte(k.Path))
	var b [17]byte
	binary.LittleEndian.PutUint64(b[1:], uint64(k.Size))
	h.Write(b[:9])
	binary.LittleEndian.PutUint64(b[1:], uint64(k.Mtime))
	h.Write(b[:9])
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// fileKeys are the keys of one file version.
type fileKeys struct {
	id       string
	manifest string
	lease    string
	prefix   string // + chunk index
}

func (k keys) file(fk FileKey) fileKeys {
	id := fileID(fk)
	base := k.ns + "{f" + id + "}:"
	return fileKeys{id: id, manifest: base + "m", lease: base + "l", prefix: base + "c"}
}

func (f fileKeys) chunk(i int) string { return f.prefix + strconv.Itoa(i) }

// Quota keys: the counter and the charged sizes, one slot.
func (k keys) quotaBytes() string { return k.ns + "{q}:bytes" }
func (k keys) quotaSizes() string { return k.ns + "{q}:sizes" }

// catKeys are the keys of a source's published catalog.
type catKeys struct {
	manifest, lease, base string
}

func (k keys) catalog(source string) catKeys {
	sum := sha256.Sum256([]byte(source))
	base := k.ns + "{k" + hex.EncodeToString(sum[:16]) + "}:"
	return catKeys{manifest: base + "m", lease: base + "l", base: base}
}

func (c catKeys) chunk(gen string, i int) string { return c.base + "g" + gen + ":c" + strconv.Itoa(i) }

// jobKeys are the keys of a cluster job.
type jobKeys struct {
	shape, members, base string
}

func (k keys) job(name string) jobKeys {
	sum := sha256.Sum256([]byte(name))
	base := k.ns + "{j" + hex.EncodeToString(sum[:12]) + "}:"
	return jobKeys{shape: base + "shape", members: base + "members", base: base}
}

// seen is epoch ep's seen bitmap of run run (one bit per subset sample);
// got its per-rank counts.
func (j jobKeys) seen(run string, ep int) string {
	return j.base + "r" + run + ":e" + strconv.Itoa(ep) + ":seen"
}
func (j jobKeys) got(run string, ep int) string {
	return j.base + "r" + run + ":e" + strconv.Itoa(ep) + ":got"
}

// lost is epoch ep's lost ranks of run run: rank → its final count.
func (j jobKeys) lost(run string, ep int) string {
	return j.base + "r" + run + ":e" + strconv.Itoa(ep) + ":lost"
}

// done is epoch ep's ranks whose count is final: rank → it.
func (j jobKeys) done(run string, ep int) string {
	return j.base + "r" + run + ":e" + strconv.Itoa(ep) + ":done"
}

// ended is the run's last epoch ended per rank.
func (j jobKeys) ended(run string) string { return j.base + "r" + run + ":ended" }

// ChunkKey is the key of chunk i of a file version (tests overwrite it to
// check that a bad value is never served).
func ChunkKey(dataset string, fk FileKey, i int) string { return newKeys(dataset).file(fk).chunk(i) }

// ManifestKey is the key of a file version's manifest.
func ManifestKey(dataset string, fk FileKey) string { return newKeys(dataset).file(fk).manifest }

// LeaseKey is the key of a file version's fill lease.
func LeaseKey(dataset string, fk FileKey) string { return newKeys(dataset).file(fk).lease }
