package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/epochfs/epochfs/internal/jobs"
	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/placement/catalog"
	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"go.uber.org/zap"
)

// ctlSpec describes one control file.
type ctlSpec struct {
	name  string
	ino   uint64
	mode  uint32
	owner owner // root unless a job's
	// read renders the file; an error (a job's file whose job is gone)
	// fails the open or stat that asked: a read that fails never
	// answers an empty file.
	read func() ([]byte, error)
	// readAs, if set, renders the file for the user who opens it.
	readAs func(who *catalog.Cred) []byte
	// doc starts a document for a writer (internal/fs/ctldoc.go); nil: read-only.
	doc func(who *catalog.Cred) docSink
	// max bounds a document; 0 means maxPathDoc. A document of paths
	// (wholeTree) takes lines of maxPathLine bytes at most.
	max int
	// wholeTree: a write names dataset paths, or "all": its open waits
	// until the catalog's walk has ended.
	wholeTree bool
	// check, if set, is the identity check of the object the file was
	// made for (a job, a rank): an error once it is gone, whatever
	// took its name since. Every open, stat and write checks it first.
	check func() error
	// attrs, if set, tells whether the document's lines in pending (its
	// unfinished line and a write's bytes) need the files' attributes:
	// while a walk of names first reads them, the write (or the close
	// that ends the line) waits for them, interruptibly.
	attrs func(pending []byte) bool
}

// always is a read that cannot fail.
func always(render func() []byte) func() ([]byte, error) {
	return func() ([]byte, error) { return render(), nil }
}

// Documents are bounded: a warmup list of a few million paths fits; a job
// config is small; a state is a few MiB for ten million samples, and its
// unread lines name at most the samples drawn ahead.
const (
	maxPathDoc   = 64 << 20
	maxConfigDoc = 1 << 20
	maxStateDoc  = 16 << 20
	// maxPathLine bounds a line of paths: a path quoted by ctlpath (up
	// to four bytes a byte of PATH_MAX) and then some.
	maxPathLine = 64 << 10
)

func (fsys *FS) ctlSpecs() []ctlSpec {
	specs := []ctlSpec{
		{name: "errors", ino: inoErrors, mode: 0o444, readAs: fsys.errs.renderFor},
		{name: "stats.json", ino: inoStatsJSON, mode: 0o444, read: always(func() []byte { return fsys.status().JSON() })},
		{name: "status", ino: inoStatus, mode: 0o444, read: always(func() []byte { return fsys.status().Bytes() })},
		{name: "warmup", ino: inoWarmup, mode: 0o666, readAs: fsys.warmupText, wholeTree: true,
			doc: func(who *catalog.Cred) docSink { return &pathDoc{t: fsys.warmupTarget(who)} }},
		// Refresh and verify send work to the source: root only.
		{name: "refresh", ino: inoRefresh, mode: 0o644, read: always(fsys.scrubText), wholeTree: true,
			doc: func(who *catalog.Cred) docSink { return &pathDoc{t: fsys.scrubTarget(placement.ScrubRefresh, who)} }},
		{name: "verify", ino: inoVerify, mode: 0o644, read: always(fsys.scrubText), wholeTree: true,
			doc: func(who *catalog.Cred) docSink { return &pathDoc{t: fsys.scrubTarget(placement.ScrubVerify, who)} }},
		// Dropping copies slows every user's reads: root only.
		{name: "drop", ino: inoDrop, mode: 0o644, read: always(fsys.dropText), wholeTree: true,
			doc: func(who *catalog.Cred) docSink { return &pathDoc{t: fsys.dropTarget(who)} }},
	}
	if fsys.o.Model != nil {
		specs = append(specs, ctlSpec{name: "model", ino: inoModel, mode: 0o444, read: always(fsys.o.Model)})
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
	_ fusefs.NodeCreater   = (*ctlDir)(nil)
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
	if name == "views" && d.fsys.o.Views != nil {
		return d.fsys.viewsLookup(ctx, &d.Inode, out), 0
	}
	if name == "jobs" && d.fsys.o.Jobs != nil {
		return d.fsys.jobsLookup(ctx, &d.Inode, out), 0
	}
	for _, s := range d.fsys.ctlSpecs() {
		if s.name == name {
			f := &ctlFile{fsys: d.fsys, spec: s}
			if errno := f.fillAttr(ctx, &out.Attr); errno != 0 {
				return nil, errno
			}
			out.SetEntryTimeout(time.Second)
			out.SetAttrTimeout(uncached)
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
	if d.fsys.o.Views != nil {
		list = append(list, fuse.DirEntry{Name: "views", Mode: syscall.S_IFDIR, Ino: inoViewsDir})
	}
	return fusefs.NewListDirStream(list), 0
}

// Create refuses a new file in .epochfs/ (a misspelt ctl file), and
// records it: only root gets here (the directory is 0755 root).
func (d *ctlDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, d.fsys.ctlError(ctx, name, denied("no such control file; files cannot be created in .epochfs/"))
}

// ctlFile is one control file. Reads see a snapshot taken at open; what
// is written through one open is one document (internal/fs/ctldoc.go).
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

// fillAttr fills the file's attributes for the caller of ctx; the size is
// that of what an open by the caller would read now (`[ -s status ]`, and
// tools that read st_size bytes, see the content). The read that follows
// takes a snapshot of its own, which may have grown meanwhile: the opens
// are direct I/O, so a read is never cut at this size.
func (f *ctlFile) fillAttr(ctx context.Context, a *fuse.Attr) syscall.Errno {
	ctlAttr(a, f.spec.ino, syscall.S_IFREG|f.spec.mode, f.spec.owner, time.Now())
	b, err := f.content(ctx)
	if err != nil && !errors.Is(err, errCtlRead) {
		return f.fsys.toErrno(err) // the job is gone
	}
	// One that cannot be rendered now is there, of no known size: its
	// open fails, with the reason in errors.
	a.Size = uint64(len(b))
	return 0
}

// content renders the file for the caller of ctx.
func (f *ctlFile) content(ctx context.Context) ([]byte, error) {
	if err := f.identity(); err != nil {
		return nil, err
	}
	if f.spec.readAs != nil {
		return f.spec.readAs(callerCred(ctx)), nil
	}
	if f.spec.read == nil {
		return nil, nil
	}
	b, err := f.spec.read()
	if err != nil && !errors.Is(err, jobs.ErrNoJob) {
		// What the file reports on failed it (EIO, whatever its own
		// errno: a refused connection is not the file's).
		err = fmt.Errorf("%w: %w", errCtlRead, err)
	}
	return b, err
}

// identity is nil while the object the file was made for lives.
func (f *ctlFile) identity() error {
	if f.spec.check == nil {
		return nil
	}
	return f.spec.check()
}

func (f *ctlFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if errno := f.fillAttr(ctx, &out.Attr); errno != 0 {
		return errno
	}
	out.SetTimeout(uncached)
	return 0
}

// Setattr accepts the truncation a shell's ">" sends before writing.
func (f *ctlFile) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if err := f.identity(); err != nil {
		return f.fsys.toErrno(err)
	}
	if f.spec.doc == nil {
		return f.fsys.ctlError(ctx, f.spec.name, denied("read-only control file"))
	}
	return f.fillAttr(ctx, &out.Attr)
}

// Open checks permissions as the kernel did (default_permissions): only
// opens the file's mode allows get here, except root's, so a write open of
// a read-only file here is root's, and is recorded. The opener's
// credentials are the writer's for the whole document, as the kernel
// checks a file's permissions at open.
func (f *ctlFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if err := f.identity(); err != nil {
		return nil, 0, f.fsys.toErrno(err)
	}
	writing := flags&(syscall.O_WRONLY|syscall.O_RDWR) != 0
	if writing && f.spec.doc == nil {
		return nil, 0, f.fsys.ctlError(ctx, f.spec.name, denied("read-only control file"))
	}
	if writing && f.spec.wholeTree {
		// Paths and "all" mean the whole tree: a write opened while the
		// source is walked (or the catalog loaded) waits for it and for
		// the check of the recorded copies (interruptible).
		if err := f.fsys.p.WaitReady(ctx); err != nil {
			return nil, 0, f.fsys.toErrno(err)
		}
	}
	h := &ctlHandle{f: f, uid: callerUID(ctx)}
	if flags&syscall.O_ACCMODE != syscall.O_WRONLY {
		b, err := f.content(ctx)
		if err != nil {
			if errors.Is(err, jobs.ErrNoJob) {
				return nil, 0, f.fsys.toErrno(err) // the job is gone: ENOENT
			}
			// A read that fails fails (a training script must not save
			// an empty state), with the reason in errors.
			return nil, 0, f.fsys.ctlReadError(ctx, f.spec.name, err)
		}
		h.data = b
	}
	if writing {
		max := f.spec.max
		if max == 0 {
			max = maxPathDoc
		}
		h.doc = newBudgetedDocument(f.spec.doc(callerCred(ctx)), max, &f.fsys.docs, callerUID(ctx))
		if f.spec.wholeTree {
			h.doc.lineMax = maxPathLine
		}
	}
	return h, fuse.FOPEN_DIRECT_IO, 0
}

// ctlHandle is one open of a control file.
type ctlHandle struct {
	f    *ctlFile
	uid  uint32 // the opener's, for .epochfs/errors
	data []byte // what reads return

	mu  sync.Mutex // serialises the document's writes and closes
	doc *document  // nil unless opened for writing
}

var (
	_ fusefs.FileReader   = (*ctlHandle)(nil)
	_ fusefs.FileWriter   = (*ctlHandle)(nil)
	_ fusefs.FileFlusher  = (*ctlHandle)(nil)
	_ fusefs.FileReleaser = (*ctlHandle)(nil)
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

// Write feeds the document. Offsets are ignored: the document is the
// bytes in the order the writes arrive.
func (h *ctlHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.doc == nil {
		return 0, syscall.EBADF
	}
	// The wait first: the identity is checked after it.
	if err := h.waitAttrs(ctx, data); err != nil {
		return 0, h.f.fsys.ctlError(ctx, h.f.spec.name, err)
	}
	if err := h.f.identity(); err != nil {
		return 0, h.f.fsys.toErrno(err)
	}
	first := h.doc.err == nil
	if err := h.doc.write(data); err != nil {
		if first {
			return 0, h.f.fsys.ctlError(ctx, h.f.spec.name, err)
		}
		return 0, h.f.fsys.toErrno(err)
	}
	return uint32(len(data)), 0
}

// waitAttrs waits, when the lines of the document's unfinished line and
// data need the files' attributes (ctlSpec.attrs), until a walk of names
// first has read them.
func (h *ctlHandle) waitAttrs(ctx context.Context, data []byte) error {
	if h.f.spec.attrs == nil || h.doc.err != nil || h.f.fsys.o.Jobs == nil {
		return nil
	}
	pending := data
	if len(h.doc.tail) > 0 {
		pending = append(slices.Clip(h.doc.tail), data...)
	}
	if len(pending) == 0 || !h.f.spec.attrs(pending) {
		return nil
	}
	return h.f.fsys.o.Jobs.WaitAttrs(ctx)
}

// Flush is a close(2) of a descriptor: the document so far takes effect
// (or its error is returned to close).
func (h *ctlHandle) Flush(ctx context.Context) syscall.Errno {
	return h.end(ctx, (*document).close)
}

// Release is the last close: it applies what no flush did and makes the
// document final. Its error reaches no one but the log and
// .epochfs/errors.
func (h *ctlHandle) Release(ctx context.Context) syscall.Errno {
	return h.end(ctx, (*document).release)
}

func (h *ctlHandle) end(ctx context.Context, close func(*document) error) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.doc == nil {
		return 0
	}
	first := h.doc.err == nil
	if err := h.waitAttrs(ctx, nil); err != nil {
		// Its unfinished line cannot be taken: the document is
		// rejected, and still closed (what it holds is handed back).
		h.doc.fail(err)
	}
	err := close(h.doc)
	if n := h.doc.takeRefused(); n > 0 {
		h.f.fsys.ctlErrorAs(h.uid, h.f.spec.name, invalid("%d later writes of the rejected document refused", n))
	}
	if err == nil {
		return 0
	}
	if first {
		return h.f.fsys.ctlErrorAs(h.uid, h.f.spec.name, err)
	}
	return h.f.fsys.toErrno(err)
}

// ctlError logs a refused ctl write, keeps it for .epochfs/errors (shown
// to the caller and root only) and returns its errno (EINVAL for bad
// input, EACCES for a refusal).
func (fsys *FS) ctlError(ctx context.Context, file string, err error) syscall.Errno {
	return fsys.ctlErrorAs(callerUID(ctx), file, err)
}

// ctlErrorAs is ctlError for a request of user uid.
func (fsys *FS) ctlErrorAs(uid uint32, file string, err error) syscall.Errno {
	return fsys.ctlRecord(uid, file, "ctl write rejected", err)
}

// ctlReadError records a ctl file that could not be read (its open fails
// with the errno of err: EIO for a failure of what it reports on).
func (fsys *FS) ctlReadError(ctx context.Context, file string, err error) syscall.Errno {
	return fsys.ctlRecord(callerUID(ctx), file, "ctl read failed", err)
}

func (fsys *FS) ctlRecord(uid uint32, file, what string, err error) syscall.Errno {
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	fsys.log.Warn(what, zap.String("file", file), zap.String("reason", msg), zap.Uint32("uid", uid))
	fsys.errs.add(uid, file+": "+msg)
	// errors grew: the kernel's attributes of it (its size) are stale,
	// even within the tick its attribute timeout lasts. Attributes only:
	// no page lock is taken, so this is safe inside a request.
	fsys.server.InodeNotify(inoErrors, -1, 0)
	return fsys.toErrno(err)
}

// callerUID is the fs uid of the process behind a request (0 for calls
// that are not requests).
func callerUID(ctx context.Context) uint32 {
	if c, ok := ctx.(*fuse.Context); ok {
		return c.Uid
	}
	return 0
}

// denied returns an error that becomes EACCES, with a reason for
// .epochfs/errors.
func denied(reason string) error { return fmt.Errorf("%s: %w", reason, os.ErrPermission) }

// errorRing keeps the last few ctl errors with their time and the user
// whose request failed: a user reads only their own (another user's lines
// name paths and jobs that are not theirs); root reads all.
type errorRing struct {
	mu    sync.Mutex
	lines []errLine
}

type errLine struct {
	uid  uint32
	text string
}

// keepErrors is how many lines are kept in all, and per user.
const keepErrors = 20

func (r *errorRing) add(uid uint32, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, errLine{uid, time.Now().UTC().Format(time.RFC3339) + " " + msg})
	// Keep the last keepErrors of each user, and at most keepErrors
	// users' worth: one user's flood does not push out another's lines
	// for long, and the ring stays bounded.
	if len(r.lines) > keepErrors*keepErrors {
		r.lines = r.lines[len(r.lines)-keepErrors*keepErrors:]
	}
	n := 0
	for _, l := range r.lines {
		if l.uid == uid {
			n++
		}
	}
	if n > keepErrors {
		for i, l := range r.lines {
			if l.uid == uid {
				r.lines = append(r.lines[:i], r.lines[i+1:]...)
				break
			}
		}
	}
}

// renderFor renders the lines who may read: their own, or all for root
// (the last keepErrors of them).
func (r *errorRing) renderFor(who *catalog.Cred) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var keep []string
	for _, l := range r.lines {
		if who.Root() || l.uid == who.UID {
			keep = append(keep, l.text)
		}
	}
	if len(keep) > keepErrors {
		keep = keep[len(keep)-keepErrors:]
	}
	var b bytes.Buffer
	for _, l := range keep {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
