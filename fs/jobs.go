package fs

import (
	"bytes"
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/placement"
	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// .epochfs/jobs/: mkdir NAME registers a job, rmdir ends it; each job
// directory holds config, next and status. Policy is in package jobs.

// inoJobBase: a job's directory is inoJobBase + id<<2, its files +1..+3.
const inoJobBase = 1<<62 + 1<<40

// jobFiles are the files of a job directory, in readdir order.
var jobFiles = []string{"config", "next", "status"}

// noNegative makes the kernel forget a failed lookup at once: a job name
// that does not exist now may be created by mkdir from anywhere.
func noNegative(out *fuse.EntryOut) { out.SetEntryTimeout(time.Nanosecond) }

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
	out.SetAttrTimeout(0)
	return parent.NewInode(ctx, d, fusefs.StableAttr{Mode: syscall.S_IFDIR, Ino: inoJobsDir})
}

func (d *jobsDir) fillAttr(a *fuse.Attr) {
	// Sticky and world-writable, like /tmp: any user may register a job.
	ctlAttr(a, inoJobsDir, syscall.S_IFDIR|0o1777, owner{}, d.fsys.start)
}

func (d *jobsDir) Getattr(ctx context.Context, f fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fillAttr(&out.Attr)
	out.SetTimeout(0)
	return 0
}

// owner is the user and group a job's directory and files belong to: who
// made the directory. With default_permissions the kernel then lets only
// them (and root) change the job's config, take its batches or remove it.
type owner struct{ uid, gid uint32 }

func (d *jobsDir) jobInode(ctx context.Context, name string, id uint64, mkdir bool, out *fuse.EntryOut) *fusefs.Inode {
	j := &jobDir{fsys: d.fsys, name: name, ino: inoJobBase + id<<2}
	if c, ok := ctx.(*fuse.Context); ok && mkdir {
		d.fsys.jobOwners.Store(id, owner{c.Uid, c.Gid})
	}
	if o, ok := d.fsys.jobOwners.Load(id); ok {
		j.owner = o.(owner)
	}
	j.fillAttr(&out.Attr)
	out.SetEntryTimeout(time.Second)
	out.SetAttrTimeout(0)
	return d.NewInode(ctx, j, fusefs.StableAttr{Mode: syscall.S_IFDIR, Ino: j.ino})
}

func (d *jobsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	id, ok := d.fsys.o.Jobs.Job(name)
	if !ok {
		noNegative(out)
		return nil, syscall.ENOENT
	}
	return d.jobInode(ctx, name, id, false, out), 0
}

func (d *jobsDir) Readdir(ctx context.Context) (fusefs.DirStream, syscall.Errno) {
	m := d.fsys.o.Jobs
	var list []fuse.DirEntry
	for _, n := range m.Jobs() {
		if id, ok := m.Job(n); ok {
			list = append(list, fuse.DirEntry{Name: n, Mode: syscall.S_IFDIR, Ino: inoJobBase + id<<2})
		}
	}
	return fusefs.NewListDirStream(list), 0
}

func (d *jobsDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	m := d.fsys.o.Jobs
	if err := m.RegisterAs(name, callerCred(ctx)); err != nil {
		return nil, d.fsys.ctlError("jobs/"+name, err)
	}
	id, ok := m.Job(name)
	if !ok {
		return nil, syscall.ENOENT
	}
	d.forgetEndedOwners()
	return d.jobInode(ctx, name, id, true, out), 0
}

// Create refuses a file in jobs/ (any user may try: the directory is
// world-writable), and records it.
func (d *jobsDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, d.fsys.ctlError("jobs/"+name, denied("files cannot be created in jobs/: mkdir jobs/NAME registers a job"))
}

// forgetEndedOwners drops the owners of jobs that ended without rmdir (their
// lease ran out), so the map holds no more entries than live jobs.
func (d *jobsDir) forgetEndedOwners() {
	live := map[uint64]bool{}
	for _, n := range d.fsys.o.Jobs.Jobs() {
		if id, ok := d.fsys.o.Jobs.Job(n); ok {
			live[id] = true
		}
	}
	d.fsys.jobOwners.Range(func(k, _ any) bool {
		if !live[k.(uint64)] {
			d.fsys.jobOwners.Delete(k)
		}
		return true
	})
}

func (d *jobsDir) Rmdir(ctx context.Context, name string) syscall.Errno {
	id, ok := d.fsys.o.Jobs.Job(name)
	if err := d.fsys.o.Jobs.End(name); err != nil {
		return d.fsys.toErrno(err)
	}
	if ok {
		d.fsys.jobOwners.Delete(id)
	}
	return 0
}

// jobDir is .epochfs/jobs/NAME/.
type jobDir struct {
	fusefs.Inode
	fsys  *FS
	name  string
	ino   uint64
	owner owner
}

var (
	_ fusefs.NodeLookuper  = (*jobDir)(nil)
	_ fusefs.NodeReaddirer = (*jobDir)(nil)
	_ fusefs.NodeGetattrer = (*jobDir)(nil)
	_ fusefs.NodeCreater   = (*jobDir)(nil)
)

func (j *jobDir) fillAttr(a *fuse.Attr) {
	ctlAttr(a, j.ino, syscall.S_IFDIR|0o755, j.owner, time.Now())
}

func (j *jobDir) Getattr(ctx context.Context, f fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if _, ok := j.fsys.o.Jobs.Job(j.name); !ok {
		return syscall.ENOENT
	}
	j.fillAttr(&out.Attr)
	out.SetTimeout(0)
	return 0
}

func (j *jobDir) spec(name string) (ctlSpec, bool) {
	m := j.fsys.o.Jobs
	job := j.name
	label := "jobs/" + job + "/" + name
	switch name {
	case "config":
		return ctlSpec{name: label, ino: j.ino + 1, mode: 0o644, owner: j.owner, max: maxConfigDoc,
			read: func() []byte { b, _ := m.Config(job); return b },
			doc: func(*placement.Cred) docSink {
				return &configDoc{
					apply:   func(text []byte) error { return m.Configure(job, text) },
					current: func() []byte { b, _ := m.Config(job); return b },
				}
			}}, true
	case "status":
		return ctlSpec{name: label, ino: j.ino + 3, mode: 0o444, owner: j.owner,
			read: func() []byte { b, _ := m.Status(job); return b }}, true
	}
	return ctlSpec{}, false
}

func (j *jobDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if _, ok := j.fsys.o.Jobs.Job(j.name); !ok {
		noNegative(out)
		return nil, syscall.ENOENT
	}
	if name == "next" {
		n := &nextFile{fsys: j.fsys, job: j.name, ino: j.ino + 2, owner: j.owner}
		n.fillAttr(&out.Attr)
		out.SetEntryTimeout(time.Second)
		out.SetAttrTimeout(0)
		return j.NewInode(ctx, n, fusefs.StableAttr{Mode: syscall.S_IFREG, Ino: n.ino}), 0
	}
	s, ok := j.spec(name)
	if !ok {
		noNegative(out)
		return nil, syscall.ENOENT
	}
	f := &ctlFile{fsys: j.fsys, spec: s}
	f.fillAttr(&out.Attr)
	out.SetEntryTimeout(time.Second)
	out.SetAttrTimeout(0)
	return j.NewInode(ctx, f, fusefs.StableAttr{Mode: syscall.S_IFREG, Ino: s.ino}), 0
}

// Create refuses a new file in a job's directory (its owner's), and
// records it.
func (j *jobDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, j.fsys.ctlError("jobs/"+j.name+"/"+name, denied("no such job file (config, next, status)"))
}

func (j *jobDir) Readdir(ctx context.Context) (fusefs.DirStream, syscall.Errno) {
	list := make([]fuse.DirEntry, len(jobFiles))
	for i, n := range jobFiles {
		list[i] = fuse.DirEntry{Name: n, Mode: syscall.S_IFREG, Ino: j.ino + 1 + uint64(i)}
	}
	return fusefs.NewListDirStream(list), 0
}

// configDoc is a job config document. After every write, its complete
// lines so far are applied as the job's whole config (jobs.Manager.
// Configure: keys not given take their defaults, the job starts over at
// epoch 1) if they differ from what the document applied last: the job's
// config is always the document so far, the write that makes the document
// invalid fails, and a rejected document puts back the config the job had
// before it.
type configDoc struct {
	apply   func(text []byte) error
	current func() []byte
	text    []byte // the complete lines so far
	lines   int
	applied []byte // what the document applied last; nil: nothing yet
	before  []byte // the job's config before the document's first apply
}

func (d *configDoc) line(l []byte) error {
	d.text = append(append(d.text, l...), '\n')
	d.lines++
	return nil
}

func (d *configDoc) written() error { return d.sync() }
func (d *configDoc) commit() error  { return d.sync() }
func (d *configDoc) release() error { return nil }

func (d *configDoc) sync() error {
	if d.lines == 0 || d.applied != nil && bytes.Equal(d.text, d.applied) {
		return nil
	}
	if d.applied == nil {
		d.before = d.current()
	}
	if err := d.apply(d.text); err != nil {
		return err
	}
	d.applied = bytes.Clone(d.text)
	return nil
}

func (d *configDoc) abort() {
	if d.applied != nil {
		d.apply(d.before) // it was the config: it parses
		d.applied = nil
	}
}

// nextFile is jobs/NAME/next: each read at offset 0 takes the job's next
// batch; reads at later offsets continue it. A read at the end of an epoch
// returns 0 bytes once. Writes fail with EINVAL.
type nextFile struct {
	fusefs.Inode
	fsys  *FS
	job   string
	ino   uint64
	owner owner
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
	ctlAttr(a, n.ino, syscall.S_IFREG|0o600, n.owner, time.Now())
}

func (n *nextFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fillAttr(&out.Attr)
	out.SetTimeout(0)
	return 0
}

// Setattr accepts the truncation of a shell's ">"; the write then fails.
func (n *nextFile) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	n.fillAttr(&out.Attr)
	return 0
}

func (n *nextFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if _, ok := n.fsys.o.Jobs.Job(n.job); !ok {
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
		b, _, err := h.n.fsys.o.Jobs.Next(h.n.job)
		if err != nil {
			return nil, h.n.fsys.ctlError("jobs/"+h.n.job+"/next", err)
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
	return 0, h.n.fsys.ctlError("jobs/"+h.n.job+"/next", invalid("next is read-only: read it for the next batch"))
}
