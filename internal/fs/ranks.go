package fs

import (
	"bytes"
	"context"
	"strconv"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// lineDoc is a document whose every line is applied as it comes (a
// rank's pause): the last one holds.
type lineDoc struct {
	apply func(l []byte) error
}

func (d *lineDoc) line(l []byte) error {
	if len(bytes.TrimSpace(l)) == 0 {
		return nil
	}
	return d.apply(l)
}
func (d *lineDoc) held() int      { return 0 }
func (d *lineDoc) written() error { return nil }
func (d *lineDoc) commit() error  { return nil }
func (d *lineDoc) release() error { return nil }
func (d *lineDoc) abort()         {}

// .epochfs/jobs/NAME/rank/R/: one directory per rank of a job of
// world_size W (R = 0..W-1), each with the entries of rankEntries, owned
// by the job's owner. A config that changes W changes the directories; a
// node of a rank that no longer exists answers ENOENT.

var rankEntries = []jobEntry{
	{name: "next", mode: syscall.S_IFREG, node: newNextFile},
	{name: "status", mode: syscall.S_IFREG, node: func(ref jobRef, rank int, ino uint64) fusefs.InodeEmbedder {
		return &ctlFile{fsys: ref.fsys, spec: ctlSpec{name: ref.label(rank, "status"), ino: ino, mode: 0o400, owner: ref.owner,
			check: ref.rankCheck(rank),
			read:  func() ([]byte, error) { return docBytes(ref.fsys.o.Jobs.RankStatus(ref.job(), rank)) }}}
	}},
	{name: "batch", mode: syscall.S_IFREG, node: newBatchFile},
	{name: "state", mode: syscall.S_IFREG, node: newStateFile},
	{name: "pause", mode: syscall.S_IFREG, node: func(ref jobRef, rank int, ino uint64) fusefs.InodeEmbedder {
		m := ref.fsys.o.Jobs
		return &ctlFile{fsys: ref.fsys, spec: ctlSpec{name: ref.label(rank, "pause"), ino: ino, mode: 0o600, owner: ref.owner, max: maxConfigDoc,
			check: ref.rankCheck(rank),
			doc: func(*catalog.Cred) docSink {
				return &lineDoc{apply: func(l []byte) error { return m.Pause(ref.job(), rank, string(l)) }}
			}}}
	}},
}

func rankIno(jobBase uint64, rank int) uint64 { return jobBase + uint64(rank+1)<<8 }

func itoa(i int) string { return strconv.Itoa(i) }

// parseRank reads a rank directory's name: a decimal number without
// leading zeros.
func parseRank(name string) (int, bool) {
	r, err := strconv.Atoi(name)
	if err != nil || r < 0 || strconv.Itoa(r) != name {
		return 0, false
	}
	return r, true
}

// ranksDir is jobs/NAME/rank/.
type ranksDir struct {
	fusefs.Inode
	ref jobRef
	ino uint64
}

var (
	_ fusefs.NodeLookuper  = (*ranksDir)(nil)
	_ fusefs.NodeReaddirer = (*ranksDir)(nil)
	_ fusefs.NodeGetattrer = (*ranksDir)(nil)
)

func (d *ranksDir) fillAttr(a *fuse.Attr) {
	ctlAttr(a, d.ino, syscall.S_IFDIR|0o755, d.ref.owner, time.Now())
}

func (d *ranksDir) Getattr(ctx context.Context, f fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if !d.ref.live() {
		return syscall.ENOENT
	}
	d.fillAttr(&out.Attr)
	out.SetTimeout(uncached)
	return 0
}

func (d *ranksDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	in, ok := d.ref.info()
	r, isRank := parseRank(name)
	if !ok || !isRank || r >= in.WorldSize {
		noNegative(out)
		return nil, syscall.ENOENT
	}
	base := d.ino - d.ino&(1<<inoJobShift-1) // the job's block
	n := newRankDir(d.ref, r, rankIno(base, r))
	n.fillAttr(&out.Attr)
	// Not cached: a config of fewer ranks takes the directory away at
	// once (the kernel looks it up again at every path walk; 0 would be
	// the mount's default).
	out.SetEntryTimeout(time.Nanosecond)
	out.SetAttrTimeout(uncached)
	return d.NewInode(ctx, n, fusefs.StableAttr{Mode: syscall.S_IFDIR, Ino: n.ino}), 0
}

func (d *ranksDir) Readdir(ctx context.Context) (fusefs.DirStream, syscall.Errno) {
	in, ok := d.ref.info()
	if !ok {
		return nil, syscall.ENOENT
	}
	base := d.ino - d.ino&(1<<inoJobShift-1)
	list := make([]fuse.DirEntry, in.WorldSize)
	for r := range list {
		list[r] = fuse.DirEntry{Name: itoa(r), Mode: syscall.S_IFDIR, Ino: rankIno(base, r)}
	}
	return fusefs.NewListDirStream(list), 0
}
