package placement

import (
	"context"
	"path"
	"strings"
	"sync"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"go.uber.org/zap"
)

// Filling the directory tree a reader goes through in no order.
//
// A reader that opens the files of a tree in a random order (a shuffling
// DataLoader, one worker or many) waits for the source's round trips at
// every file it opens first: the copy it starts cannot run ahead of it,
// since nobody knows which file comes next, and so epoch 1 over a PFS
// with latency is no faster than reading the PFS directly (sequential.go
// reads ahead of a reader in path order only). But a reader that has
// opened many files of one tree is going through that tree: after
// Options.FillAfter first opens of non-resident files by one user, the
// rest of the smallest directory holding them all is queued for the
// background workers, in path order, and the reader finds more and more
// of its files resident or being copied. The same reader going on
// outside that directory starts a new count, and its directory is filled
// in turn.
//
// Only files the user who read could open are queued (their uid and
// primary gid against the catalog's modes: files readable only through a
// supplementary group are left to be copied when read), so a fill copies
// nothing its reader could not have read itself. Copies go through the
// workers (placement.workers at once), behind the reads' own copies.

// filler counts each user's first opens of non-resident files.
type filler struct {
	mu    sync.Mutex
	users map[uint32]*fillCount
}

type fillCount struct {
	n    int      // first opens counted since the last fill
	dir  string   // the smallest directory holding them ("" is the root)
	done []string // the directories filled for this user
}

// callerKey carries the user an open is made for (WithCaller).
type callerKey struct{}

// WithCaller marks ctx as a request of the user uid, gid: the fill an
// open may start queues only files that user could open.
func WithCaller(ctx context.Context, uid, gid uint32) context.Context {
	return context.WithValue(ctx, callerKey{}, catalog.Cred{UID: uid, GID: gid})
}

// callerOf is the user ctx was made for; nil (root: every file) when ctx
// names none.
func callerOf(ctx context.Context) *catalog.Cred {
	if c, ok := ctx.Value(callerKey{}).(catalog.Cred); ok {
		return &c
	}
	return nil
}

// noteFill counts an open of e, a file that had no copy when it was
// opened (its copy may have ended since), and fills its tree when the
// count reaches FillAfter.
func (p *copier) noteFill(ctx context.Context, e *catalog.Entry) {
	if p.o.FillAfter <= 0 || p.walking() {
		return
	}
	who := callerOf(ctx)
	uid := uint32(0)
	if who != nil {
		uid = who.UID
	}
	dir := path.Dir(e.Path())
	if dir == "." {
		dir = ""
	}
	f := &p.fill
	f.mu.Lock()
	if f.users == nil {
		f.users = map[uint32]*fillCount{}
	}
	u := f.users[uid]
	if u == nil {
		u = &fillCount{}
		f.users[uid] = u
	}
	for _, d := range u.done {
		if under(dir, d) {
			f.mu.Unlock()
			return
		}
	}
	if u.n == 0 {
		u.dir = dir
	} else {
		u.dir = commonDir(u.dir, dir)
	}
	u.n++
	if u.n < p.o.FillAfter {
		f.mu.Unlock()
		return
	}
	d := u.dir
	kept := u.done[:0]
	for _, old := range u.done {
		if !under(old, d) {
			kept = append(kept, old)
		}
	}
	u.done = append(kept, d)
	u.n, u.dir = 0, ""
	f.mu.Unlock()
	p.fillTree(d, who)
}

// fillTree queues the files of dir that who could open and that have no
// copy, in path order, from a goroutine.
func (p *copier) fillTree(dir string, who *catalog.Cred) {
	root := p.cat.Find(dir)
	if root == nil || root.Kind() != catalog.KindDir {
		return
	}
	p.fills.Add(1)
	p.log.Info("filling a directory read in no order", zap.String("dir", "/"+dir),
		zap.Int("after_files", p.o.FillAfter), zap.Stringer("for", who))
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		catalog.FilesUnderAs(who, root, func(f *catalog.Entry) bool {
			if !p.wants(f) || f.Gone() {
				return true
			}
			p.fillQueued.Add(1)
			p.queued.Add(1)
			return p.enqueueCounted(p.ctx, f) == nil // nil unless shutting down
		})
	}()
}

// under reports whether dir is d or inside it ("" is the root).
func under(dir, d string) bool {
	return d == "" || dir == d || strings.HasPrefix(dir, d+"/")
}

// commonDir is the deepest directory holding both a and b.
func commonDir(a, b string) string {
	for !under(b, a) {
		if i := strings.LastIndexByte(a, '/'); i >= 0 {
			a = a[:i]
		} else {
			return ""
		}
	}
	return a
}
