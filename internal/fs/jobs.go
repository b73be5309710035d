package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/internal/jobs"
	"github.com/epochfs/epochfs/internal/placement/catalog"
	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// .epochfs/jobs/: mkdir NAME registers a job, rmdir ends it. A job's
// directory holds the entries of jobEntries; rank/R/ (internal/fs/ranks.go) those
// of rankEntries. Policy, and who owns a job, are package jobs'.
//
// Inode numbers: each job has a block of them (ino.go: jobIno).

// jobEntry is one entry of a job's or a rank's directory. New files (a
// job's batch, its views) are added to the lists; the nodes, readdir,
// inode numbers and the error of a create follow.
type jobEntry struct {
	name string
	mode uint32 // S_IFREG or S_IFDIR
	// node builds the entry's node; rank is -1 in the job's directory.
	node func(ref jobRef, rank int, ino uint64) fusefs.InodeEmbedder
}

// jobRef names the job a node belongs to: a node of a job that ended (or
// was made again under the same name) answers ENOENT.
type jobRef struct {
	fsys  *FS
	name  string
	id    uint64
	owner owner
	cred  *catalog.Cred // the owner's, as at the job's mkdir (nil: root)
}

func (r jobRef) info() (jobs.Info, bool) {
	in, ok := r.fsys.o.Jobs.Lookup(r.name)
	return in, ok && in.ID == r.id
}

func (r jobRef) live() bool { _, ok := r.info(); return ok }

// job is the registration r names, for the jobs.Manager calls (which
// refuse once it has ended).
func (r jobRef) job() jobs.Ref { return jobs.Ref{Name: r.name, ID: r.id} }

// check is the identity check of the job's files (ctlSpec.check).
func (r jobRef) check() error {
	if !r.live() {
		return fmt.Errorf("%w: %q (the job this file was made for has ended)", jobs.ErrNoJob, r.name)
	}
	return nil
}

// rankCheck is the identity check of a rank's files: the job, and the
// rank in its world size.
func (r jobRef) rankCheck(rank int) func() error {
	return func() error {
		if in, ok := r.info(); !ok || rank >= in.WorldSize {
			return fmt.Errorf("%w: %q rank %d (the job or rank this file was made for has ended)", jobs.ErrNoJob, r.name, rank)
		}
		return nil
	}
}

// checkOf is the identity check of a file of the job (rank < 0) or of
// one of its ranks.
func (r jobRef) checkOf(rank int) func() error {
	if rank < 0 {
		return r.check
	}
	return r.rankCheck(rank)
}

// label names a job's file in logs and .epochfs/errors.
func (r jobRef) label(rank int, file string) string {
	if rank < 0 {
		return "jobs/" + r.name + "/" + file
	}
	return "jobs/" + r.name + "/rank/" + itoa(rank) + "/" + file
}

var jobEntries = []jobEntry{
	{name: "config", mode: syscall.S_IFREG, node: func(ref jobRef, _ int, ino uint64) fusefs.InodeEmbedder {
		m := ref.fsys.o.Jobs
		return &ctlFile{fsys: ref.fsys, spec: ctlSpec{name: ref.label(-1, "config"), ino: ino, mode: 0o600, owner: ref.owner, max: maxConfigDoc,
			check: ref.check,
			read:  func() ([]byte, error) { return m.Config(ref.job()) },
			doc:   func(*catalog.Cred) docSink { return newConfigDoc(m, ref) },
			// A subset names files by who may read them.
			attrs: func(pending []byte) bool { return bytes.Contains(pending, []byte("subset")) }}}
	}},
	{name: "next", mode: syscall.S_IFREG, node: newNextFile},
	{name: "status", mode: syscall.S_IFREG, node: func(ref jobRef, _ int, ino uint64) fusefs.InodeEmbedder {
		return &ctlFile{fsys: ref.fsys, spec: ctlSpec{name: ref.label(-1, "status"), ino: ino, mode: 0o400, owner: ref.owner,
			check: ref.check,
			read:  func() ([]byte, error) { return docBytes(ref.fsys.o.Jobs.Status(ref.job())) }}}
	}},
	{name: "state", mode: syscall.S_IFREG, node: newStateFile},
	{name: "resume", mode: syscall.S_IFREG, node: func(ref jobRef, _ int, ino uint64) fusefs.InodeEmbedder {
		m := ref.fsys.o.Jobs
		return &ctlFile{fsys: ref.fsys, spec: ctlSpec{name: ref.label(-1, "resume"), ino: ino, mode: 0o600, owner: ref.owner, max: maxStateDoc,
			check: ref.check,
			// A state names its samples by their paths.
			attrs: func([]byte) bool { return true },
			doc: func(*catalog.Cred) docSink {
				return &resumeDoc{
					apply:    func(text []byte) error { return m.Resume(ref.job(), text) },
					previous: func() *jobs.ResumePoint { return m.Resumed(ref.job()) },
					undo:     func(pt *jobs.ResumePoint) error { return m.Unresume(ref.job(), pt) },
				}
			}}}
	}},
	{name: "rank", mode: syscall.S_IFDIR, node: func(ref jobRef, _ int, ino uint64) fusefs.InodeEmbedder {
		return &ranksDir{ref: ref, ino: ino}
	}},
	{name: "batch", mode: syscall.S_IFREG, node: newBatchFile},
	{name: "augmented", mode: syscall.S_IFDIR, node: newAugmentedDir},
}

// entryNames lists the entries' names for error messages.
func entryNames(list []jobEntry) string {
	var b bytes.Buffer
	for i, e := range list {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.name)
	}
	return b.String()
}

// The nodes lookupEntry fills: a ctl file's attributes depend on the
// caller (its size), the others' do not. A node with neither method is
// answered with empty attributes, so these are checked at compile time.
var (
	_ interface {
		fillAttr(context.Context, *fuse.Attr) syscall.Errno
	} = (*ctlFile)(nil)
	_ interface{ fillAttr(*fuse.Attr) } = (*nextFile)(nil)
)

// lookupEntry makes the node of entry name of list under parent.
func lookupEntry(ctx context.Context, parent *fusefs.Inode, list []jobEntry, ref jobRef, rank int, base uint64, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	for k, e := range list {
		if e.name != name {
			continue
		}
		ino := base + 1 + uint64(k)
		n := e.node(ref, rank, ino)
		switch a := n.(type) {
		case interface{ fillAttr(*fuse.Attr) }:
			a.fillAttr(&out.Attr)
		case interface {
			fillAttr(context.Context, *fuse.Attr) syscall.Errno
		}:
			// ctl files: sized for the caller
			if errno := a.fillAttr(ctx, &out.Attr); errno != 0 {
				return nil, errno
			}
		}
		out.SetEntryTimeout(time.Second)
		out.SetAttrTimeout(uncached)
		return parent.NewInode(ctx, n, fusefs.StableAttr{Mode: e.mode, Ino: ino}), 0
	}
	noNegative(out)
	return nil, syscall.ENOENT
}

func listEntries(list []jobEntry, base uint64) fusefs.DirStream {
	out := make([]fuse.DirEntry, len(list))
	for k, e := range list {
		out[k] = fuse.DirEntry{Name: e.name, Mode: e.mode, Ino: base + 1 + uint64(k)}
	}
	return fusefs.NewListDirStream(out)
}

// uncached is the attribute timeout of control files and directories:
// the kernel asks again at each stat. (go-fuse replaces a timeout of 0
// with the mount's, a day for the dataset.)
const uncached = time.Nanosecond

// noNegative makes the kernel forget a failed lookup at once: a job name
// that does not exist now may be created by mkdir from anywhere.
func noNegative(out *fuse.EntryOut) { out.SetEntryTimeout(uncached) }

// jobsDir is .epochfs/jobs/.
type jobsDir struct {
	fusefs.Inode
	fsys *FS
}

var (
	_ fusefs.NodeLookuper  = (*jobsDir)(nil)
	_ fusefs.NodeReaddirer = (*jobsDir)(nil)
	_ fusefs.NodeGetattrer = (*jobsDir)(nil)
	_ fusefs.NodeMkdirer   = (*jobsDir)(nil)
	_ fusefs.NodeRmdirer   = (*jobsDir)(nil)
	_ fusefs.NodeCreater   = (*jobsDir)(nil)
)

func (fsys *FS) jobsLookup(ctx context.Context, parent *fusefs.Inode, out *fuse.EntryOut) *fusefs.Inode {
	d := &jobsDir{fsys: fsys}
	d.fillAttr(&out.Attr)
	out.SetAttrTimeout(uncached)
	return parent.NewInode(ctx, d, fusefs.StableAttr{Mode: syscall.S_IFDIR, Ino: inoJobsDir})
}

func (d *jobsDir) fillAttr(a *fuse.Attr) {
	// Sticky and world-writable, like /tmp: any user may register a job.
	ctlAttr(a, inoJobsDir, syscall.S_IFDIR|0o1777, owner{}, d.fsys.start)
}

func (d *jobsDir) Getattr(ctx context.Context, f fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fillAttr(&out.Attr)
	out.SetTimeout(uncached)
	return 0
}

// owner is the user and group a job's directory and files belong to: who
// made the directory (jobs.Info.Owner). With default_permissions the kernel
// then lets only them (and root) change the job's config, take its batches
// or remove it.
type owner struct{ uid, gid uint32 }

func ownerOf(c *catalog.Cred) owner {
	if c == nil {
		return owner{}
	}
	return owner{c.UID, c.GID}
}

func (d *jobsDir) jobInode(ctx context.Context, in jobs.Info, out *fuse.EntryOut) *fusefs.Inode {
	j := newJobDir(jobRef{fsys: d.fsys, name: in.Name, id: in.ID, owner: ownerOf(in.Owner), cred: in.Owner})
	j.fillAttr(&out.Attr)
	out.SetEntryTimeout(time.Second)
	out.SetAttrTimeout(uncached)
	return d.NewInode(ctx, j, fusefs.StableAttr{Mode: syscall.S_IFDIR, Ino: j.ino})
}

func (d *jobsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	in, ok := d.fsys.o.Jobs.Lookup(name)
	if !ok {
		noNegative(out)
		return nil, syscall.ENOENT
	}
	return d.jobInode(ctx, in, out), 0
}

func (d *jobsDir) Readdir(ctx context.Context) (fusefs.DirStream, syscall.Errno) {
	var list []fuse.DirEntry
	for _, in := range d.fsys.o.Jobs.List() {
		list = append(list, fuse.DirEntry{Name: in.Name, Mode: syscall.S_IFDIR, Ino: jobIno(in.ID)})
	}
	return fusefs.NewListDirStream(list), 0
}

func (d *jobsDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	// A job numbers the dataset's files: while the source is walked,
	// the mkdir waits for the walk (interruptible).
	if err := d.fsys.o.Jobs.WaitReadyAs(ctx, callerCred(ctx)); err != nil {
		return nil, d.fsys.ctlError(ctx, "jobs/"+name, err)
	}
	in, err := d.fsys.o.Jobs.Register(name, callerCred(ctx))
	if err != nil {
		return nil, d.fsys.ctlError(ctx, "jobs/"+name, err)
	}
	return d.jobInode(ctx, in, out), 0
}

// Create refuses a file in jobs/ (any user may try: the directory is
// world-writable), and records it.
func (d *jobsDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, d.fsys.ctlError(ctx, "jobs/"+name, denied("files cannot be created in jobs/: mkdir jobs/NAME registers a job"))
}

func (d *jobsDir) Rmdir(ctx context.Context, name string) syscall.Errno {
	return d.fsys.toErrno(d.fsys.o.Jobs.End(name))
}

// entryDir is a job's directory (jobs/NAME/, rank -1, the entries of
// jobEntries) or one of its ranks' (jobs/NAME/rank/R/, rankEntries): a
// fixed list of entries, owned by the job's owner, there while the job
// (and the rank) is.
type entryDir struct {
	fusefs.Inode
	ref     jobRef
	rank    int // -1: the job's own directory
	ino     uint64
	entries []jobEntry
	kind    string // "job" or "rank", for the error of a create
}

var (
	_ fusefs.NodeLookuper  = (*entryDir)(nil)
	_ fusefs.NodeReaddirer = (*entryDir)(nil)
	_ fusefs.NodeGetattrer = (*entryDir)(nil)
	_ fusefs.NodeCreater   = (*entryDir)(nil)
)

func newJobDir(ref jobRef) *entryDir {
	return &entryDir{ref: ref, rank: -1, ino: jobIno(ref.id), entries: jobEntries, kind: "job"}
}

func newRankDir(ref jobRef, rank int, ino uint64) *entryDir {
	return &entryDir{ref: ref, rank: rank, ino: ino, entries: rankEntries, kind: "rank"}
}

// live reports whether the job, and the rank, still exist.
func (d *entryDir) live() bool {
	if d.rank < 0 {
		return d.ref.live()
	}
	in, ok := d.ref.info()
	return ok && d.rank < in.WorldSize
}

func (d *entryDir) fillAttr(a *fuse.Attr) {
	ctlAttr(a, d.ino, syscall.S_IFDIR|0o755, d.ref.owner, time.Now())
}

func (d *entryDir) Getattr(ctx context.Context, f fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if !d.live() {
		return syscall.ENOENT
	}
	d.fillAttr(&out.Attr)
	out.SetTimeout(uncached)
	return 0
}

func (d *entryDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if !d.live() {
		noNegative(out)
		return nil, syscall.ENOENT
	}
	return lookupEntry(ctx, &d.Inode, d.entries, d.ref, d.rank, d.ino, name, out)
}

// Create refuses a new file in the directory (its owner's), and records
// it.
func (d *entryDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, d.ref.fsys.ctlError(ctx, d.ref.label(d.rank, name), denied("no such "+d.kind+" file ("+entryNames(d.entries)+")"))
}

func (d *entryDir) Readdir(ctx context.Context) (fusefs.DirStream, syscall.Errno) {
	if !d.live() {
		return nil, syscall.ENOENT
	}
	return listEntries(d.entries, d.ino), 0
}

// nextFile is jobs/NAME/next (rank -1: a job of world size 1) or
// jobs/NAME/rank/R/next: each read at offset 0 takes the next batch;
// reads at later offsets continue it. A read at the end of an epoch
// returns 0 bytes once. A rank's read may wait for the slowest rank
// (jobs.Manager.NextRank) until the reader is interrupted. Writes fail
// with EINVAL.
type nextFile struct {
	fusefs.Inode
	ref  jobRef
	rank int
	ino  uint64
}

func newNextFile(ref jobRef, rank int, ino uint64) fusefs.InodeEmbedder {
	return &nextFile{ref: ref, rank: rank, ino: ino}
}

var (
	_ fusefs.NodeOpener    = (*nextFile)(nil)
	_ fusefs.NodeGetattrer = (*nextFile)(nil)
	_ fusefs.NodeSetattrer = (*nextFile)(nil)
)

func (n *nextFile) fillAttr(a *fuse.Attr) {
	// Only the job's owner takes its batches. Writable by the owner only
	// so that their write reaches the daemon and fails with EINVAL and a
	// reason, rather than EACCES in the kernel.
	ctlAttr(a, n.ino, syscall.S_IFREG|0o600, n.ref.owner, time.Now())
}

func (n *nextFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if err := n.ref.checkOf(n.rank)(); err != nil {
		return n.ref.fsys.toErrno(err)
	}
	n.fillAttr(&out.Attr)
	out.SetTimeout(uncached)
	return 0
}

// Setattr accepts the truncation of a shell's ">"; the write then fails.
func (n *nextFile) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if err := n.ref.checkOf(n.rank)(); err != nil {
		return n.ref.fsys.toErrno(err)
	}
	n.fillAttr(&out.Attr)
	return 0
}

func (n *nextFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	in, ok := n.ref.info()
	if !ok || n.rank >= in.WorldSize {
		return nil, 0, syscall.ENOENT
	}
	return &nextHandle{n: n}, fuse.FOPEN_DIRECT_IO, 0
}

// nextHandle is one open of next; it holds the batch being read.
type nextHandle struct {
	n *nextFile

	mu    sync.Mutex
	batch []byte
}

var (
	_ fusefs.FileReader = (*nextHandle)(nil)
	_ fusefs.FileWriter = (*nextHandle)(nil)
)

func (h *nextHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off == 0 {
		rctx, done := waitCtx(ctx)
		var b []byte
		var err error
		if m := h.n.ref.fsys.o.Jobs; h.n.rank < 0 {
			b, _, err = m.Next(rctx, h.n.ref.job())
		} else {
			b, _, err = m.NextRank(rctx, h.n.ref.job(), h.n.rank)
		}
		done()
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, jobs.ErrNoJob):
			// Interrupted while waiting for the slowest rank, or the job
			// this file was made for has ended.
			return nil, h.n.ref.fsys.toErrno(err)
		case err != nil:
			return nil, h.n.ref.fsys.ctlError(ctx, h.n.ref.label(h.n.rank, "next"), err)
		}
		h.batch = b
	}
	if off >= int64(len(h.batch)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), int64(len(h.batch)))
	return fuse.ReadResultData(h.batch[off:end]), 0
}

func (h *nextHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	return 0, h.n.ref.fsys.ctlError(ctx, h.n.ref.label(h.n.rank, "next"), invalid("next is read-only: read it for the next batch"))
}
