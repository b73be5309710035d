// Package layout is the key layout of a dataset in Redis Cluster: the one
// place key names are made, for the cluster package and for the tests and
// admins that look at what it stored.
//
// Every key starts with "epochfs:<dataset id>:", so two datasets
// never share one. The part in braces is the Redis Cluster hash tag: keys
// that one Lua script touches together share it (one slot, one master).
//
//	epochfs:<ds>:{f<id>}:m         a file's manifest (manifest.go)
//	epochfs:<ds>:{f<id>}:l         its fill lease (SET NX PX, renewed)
//	epochfs:<ds>:{f<id>}:c<i>      its chunk i
//	epochfs:<ds>:{f<id>}:h         the nodes holding it (data = "peers")
//	epochfs:<ds>:{p}:live          live members: node → expiry (data = "peers")
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
package layout

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
)

// Keys makes the keys of one dataset.
type Keys struct{ ns string }

// New is the keys of the dataset with the given id.
func New(dataset string) Keys { return Keys{ns: "epochfs:" + dataset + ":"} }

// FileKey names one version of a dataset file.
type FileKey struct {
	Path  string
	Size  int64
	Mtime int64 // nanoseconds since the epoch
}

// FileID is the hex id of one version of a file.
func FileID(k FileKey) string {
	h := sha256.New()
	h.Write([]byte(k.Path))
	var b [17]byte
	binary.LittleEndian.PutUint64(b[1:], uint64(k.Size))
	h.Write(b[:9])
	binary.LittleEndian.PutUint64(b[1:], uint64(k.Mtime))
	h.Write(b[:9])
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// File are the keys of one file version: its id, manifest, fill lease
// and chunks.
type File struct {
	ID       string
	Manifest string
	Lease    string
	Holders  string // the set of nodes holding a copy (peers)
	prefix   string // + chunk index
}

// File is the keys of the file version fk.
func (k Keys) File(fk FileKey) File {
	id := FileID(fk)
	base := k.ns + "{f" + id + "}:"
	return File{ID: id, Manifest: base + "m", Lease: base + "l", Holders: base + "h", prefix: base + "c"}
}

// Chunk is the key of chunk i.
func (f File) Chunk(i int) string { return f.prefix + strconv.Itoa(i) }

// QuotaBytes and QuotaSizes are the quota's keys: the counter and the
// charged sizes, one slot.
func (k Keys) QuotaBytes() string { return k.ns + "{q}:bytes" }
func (k Keys) QuotaSizes() string { return k.ns + "{q}:sizes" }

// Members is the sorted set of the live members of a peers cluster: each
// node's score is when its membership expires (unix milliseconds).
func (k Keys) Members() string { return k.ns + "{p}:live" }

// Catalog are the keys of a source's published catalog.
type Catalog struct {
	Manifest, Lease, base string
}

// Catalog is the keys of the catalog of source.
func (k Keys) Catalog(source string) Catalog {
	sum := sha256.Sum256([]byte(source))
	base := k.ns + "{k" + hex.EncodeToString(sum[:16]) + "}:"
	return Catalog{Manifest: base + "m", Lease: base + "l", base: base}
}

// Chunk is the key of chunk i of generation gen.
func (c Catalog) Chunk(gen string, i int) string { return c.base + "g" + gen + ":c" + strconv.Itoa(i) }

// Job are the keys of a cluster job.
type Job struct {
	Shape, Members, base string
}

// Job is the keys of the cluster job name.
func (k Keys) Job(name string) Job {
	sum := sha256.Sum256([]byte(name))
	base := k.ns + "{j" + hex.EncodeToString(sum[:12]) + "}:"
	return Job{Shape: base + "shape", Members: base + "members", base: base}
}

// Seen is epoch ep's seen bitmap of run run (one bit per subset sample).
func (j Job) Seen(run string, ep int) string {
	return j.base + "r" + run + ":e" + strconv.Itoa(ep) + ":seen"
}

// Got is epoch ep's per-rank counts of run run.
func (j Job) Got(run string, ep int) string {
	return j.base + "r" + run + ":e" + strconv.Itoa(ep) + ":got"
}

// Lost is epoch ep's lost ranks of run run: rank → its final count.
func (j Job) Lost(run string, ep int) string {
	return j.base + "r" + run + ":e" + strconv.Itoa(ep) + ":lost"
}

// Done is epoch ep's ranks whose count is final: rank → it.
func (j Job) Done(run string, ep int) string {
	return j.base + "r" + run + ":e" + strconv.Itoa(ep) + ":done"
}

// Ended is the run's last epoch ended per rank.
func (j Job) Ended(run string) string { return j.base + "r" + run + ":ended" }
