package fs

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/placement"
	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"go.uber.org/zap"
)

// Inode numbers of the control surface, far above the catalog's.
const (
	inoCtlDir = 1<<62 + iota
	inoStatus
	inoStatsJSON
	inoWarmup
	inoErrors
	inoModel
	inoJobsDir
	inoRefresh
	inoVerify
)

// ctlSpec describes one control file.
type ctlSpec struct {
	name  string
	ino   uint64
	mode  uint32
	owner owner // root unless a job's
	read  func() []byte
	write func(data []byte) error // nil: read-only
}

func (fsys *FS) ctlSpecs() []ctlSpec {
	specs := []ctlSpec{
		{name: "errors", ino: inoErrors, mode: 0o444, read: fsys.errs.render},
		{name: "stats.json", ino: inoStatsJSON, mode: 0o444, read: fsys.statsJSON},
		{name: "status", ino: inoStatus, mode: 0o444, read: fsys.statusText},
		{name: "warmup", ino: inoWarmup, mode: 0o666, read: fsys.warmupText, write: fsys.warmupWrite},
		// Refresh and verify send work to the source: root only.
		{name: "refresh", ino: inoRefresh, mode: 0o644, read: fsys.scrubText, write: fsys.scrubWrite(placement.ScrubRefresh)},
		{name: "verify", ino: inoVerify, mode: 0o644, read: fsys.scrubText, write: fsys.scrubWrite(placement.ScrubVerify)},
	}
	if fsys.o.Model != nil {
		specs = append(specs, ctlSpec{name: "model", ino: inoModel, mode: 0o444, read: fsys.o.Model})
	}
	return specs
}

// ctlDir is .epochfs/.
type ctlDir struct {
	fusefs.Inode
	fsys *FS
}

var (
	_ fusefs.NodeLookuper  = (*ctlDir)(nil)
	_ fusefs.NodeReaddirer = (*ctlDir)(nil)
	_ fusefs.NodeGetattrer = (*ctlDir)(nil)
)

func (fsys *FS) ctlLookup(ctx context.Context, parent *fusefs.Inode, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	d := &ctlDir{fsys: fsys}
	d.fillAttr(&out.Attr)
	return parent.NewInode(ctx, d, fusefs.StableAttr{Mode: syscall.S_IFDIR, Ino: inoCtlDir}), 0
}

// ctlAttr fills the attributes of a control file or directory: mode
// includes the type bits; every time is t.
func ctlAttr(a *fuse.Attr, ino uint64, mode uint32, o owner, t time.Time) {
	a.Ino = ino
	a.Mode = mode
	a.Nlink = 1
	if mode&syscall.S_IFMT == syscall.S_IFDIR {
		a.Nlink = 2
	}
	a.Uid, a.Gid = o.uid, o.gid
	u := uint64(t.Unix())
	a.Mtime, a.Ctime, a.Atime = u, u, u
}

func (d *ctlDir) fillAttr(a *fuse.Attr) {
	ctlAttr(a, inoCtlDir, syscall.S_IFDIR|0o755, owner{}, d.fsys.start)
}

func (d *ctlDir) Getattr(ctx context.Context, f fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fillAttr(&out.Attr)
	return 0
}

func (d *ctlDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if name == "jobs" && d.fsys.o.Jobs != nil {
		return d.fsys.jobsLookup(ctx, &d.Inode, out), 0
	}
	for _, s := range d.fsys.ctlSpecs() {
		if s.name == name {
			f := &ctlFile{fsys: d.fsys, spec: s}
			f.fillAttr(&out.Attr)
			out.SetEntryTimeout(time.Second)
			out.SetAttrTimeout(0)
			return d.NewInode(ctx, f, fusefs.StableAttr{Mode: syscall.S_IFREG, Ino: s.ino}), 0
		}
	}
	return nil, syscall.ENOENT
}

func (d *ctlDir) Readdir(ctx context.Context) (fusefs.DirStream, syscall.Errno) {
	var list []fuse.DirEntry
	for _, s := range d.fsys.ctlSpecs() {
		list = append(list, fuse.DirEntry{Name: s.name, Mode: syscall.S_IFREG, Ino: s.ino})
	}
	if d.fsys.o.Jobs != nil {
		list = append(list, fuse.DirEntry{Name: "jobs", Mode: syscall.S_IFDIR, Ino: inoJobsDir})
	}
	return fusefs.NewListDirStream(list), 0
}

// ctlFile is one control file. Reads see a snapshot taken at open; each
// write call that ends a line (or is the last of a command) is validated
// whole and applied, or rejected with EINVAL changing nothing.
type ctlFile struct {
	fusefs.Inode
	fsys *FS
	spec ctlSpec
}

var (
	_ fusefs.NodeOpener    = (*ctlFile)(nil)
	_ fusefs.NodeGetattrer = (*ctlFile)(nil)
	_ fusefs.NodeSetattrer = (*ctlFile)(nil)
)

func (f *ctlFile) fillAttr(a *fuse.Attr) {
	ctlAttr(a, f.spec.ino, syscall.S_IFREG|f.spec.mode, f.spec.owner, time.Now())
}

func (f *ctlFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.fillAttr(&out.Attr)
	out.SetTimeout(0)
	return 0
}

// Setattr accepts the truncation a shell's ">" sends before writing.
func (f *ctlFile) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if f.spec.write == nil {
		return syscall.EACCES
	}
	f.fillAttr(&out.Attr)
	return 0
}

func (f *ctlFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	writing := flags&(syscall.O_WRONLY|syscall.O_RDWR) != 0
	if writing && f.spec.write == nil {
		return nil, 0, syscall.EACCES
	}
	h := &ctlHandle{f: f}
	if flags&syscall.O_ACCMODE != syscall.O_WRONLY {
		h.data = f.spec.read()
	}
	return h, fuse.FOPEN_DIRECT_IO, 0
}

// ctlHandle is one open of a control file.
type ctlHandle struct {
	f    *ctlFile
	data []byte

	mu      sync.Mutex
	pending []byte // written bytes not yet applied
}

var (
	_ fusefs.FileReader  = (*ctlHandle)(nil)
	_ fusefs.FileWriter  = (*ctlHandle)(nil)
	_ fusefs.FileFlusher = (*ctlHandle)(nil)
)

func (h *ctlHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= int64(len(h.data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := off + int64(len(dest))
	if end > int64(len(h.data)) {
		end = int64(len(h.data))
	}
	return fuse.ReadResultData(h.data[off:end]), 0
}

// maxCtlWrite bounds what one command may hold.
const maxCtlWrite = 64 << 20

func (h *ctlHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.pending)+len(data) > maxCtlWrite {
		h.pending = nil
		return 0, h.f.fsys.ctlError(h.f.spec.name, invalid("write larger than %d bytes", maxCtlWrite))
	}
	h.pending = append(h.pending, data...)
	// The kernel splits a large write into chunks of at most max_write; a
	// chunk that ends a line or is short ends the command.
	if bytes.HasSuffix(data, []byte("\n")) || len(data) < 1<<20 {
		cmd := h.pending
		h.pending = nil
		if err := h.f.spec.write(cmd); err != nil {
			return 0, h.f.fsys.ctlError(h.f.spec.name, err)
		}
	}
	return uint32(len(data)), 0
}

func (h *ctlHandle) Flush(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.pending) == 0 {
		return 0
	}
	cmd := h.pending
	h.pending = nil
	if err := h.f.spec.write(cmd); err != nil {
		return h.f.fsys.ctlError(h.f.spec.name, err)
	}
	return 0
}

// ctlError logs a rejected ctl write, keeps it for .epochfs/errors and
// returns its errno (EINVAL for bad input).
func (fsys *FS) ctlError(file string, err error) syscall.Errno {
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	fsys.log.Warn("ctl write rejected", zap.String("file", file), zap.String("reason", msg))
	fsys.errs.add(file + ": " + msg)
	return fsys.toErrno(err)
}

// errorRing keeps the last few ctl errors with their time.
type errorRing struct {
	mu    sync.Mutex
	lines []string
}

const keepErrors = 20

func (r *errorRing) add(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, time.Now().UTC().Format(time.RFC3339)+" "+msg)
	if len(r.lines) > keepErrors {
		r.lines = r.lines[len(r.lines)-keepErrors:]
	}
}

func (r *errorRing) render() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b bytes.Buffer
	for _, l := range r.lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
