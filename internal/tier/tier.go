// Package tier is a local tier of epochfs: a directory with a byte quota
// and a free-space floor, on tmpfs or a local NVMe/SSD, that holds whole
// copies of dataset files. (The dataset's source is package source.)
//
// A tier file is installed atomically: it is written to a temp file under
// DIR/.tmp and renamed to its name, so a partial copy never has a name a
// reader could open. Durability is batched: Sync makes every copy installed
// before it durable with one syncfs(2) of the tier's file system, and the
// catalog records a copy only after a Sync that followed its install (the
// placer hooks Sync into the catalog's batch writes). An fsync of each file
// and of its directory made placing small files several times slower than
// cp -r. A crash may leave an installed copy that is not durable, but then
// it is not recorded either: the next mount does not know it and places the
// file again over it. Leftover temp files are removed when the tier opens.
// A tier never evicts: space is reserved before a copy starts and released
// only when a copy fails or its file is removed.
//
// The copy of the dataset file PATH is named DIR/data/PATH, unless that name
// is too long for the tier's file system (longer than PATH_MAX, or a
// component longer than the file system's name limit, read at Open): it is
// then DIR/hashed/XY/SHA, SHA the hex SHA-256 of PATH and XY its first two
// digits (names.go). The rule depends only on DIR, PATH and the file
// system's name limit, so nothing records it: the catalog records which tier
// holds a copy, and the name follows from the rule at every mount. A tier
// moved to a file system with a shorter name limit finds such copies missing;
// the placer checks every recorded copy at mount and places those again.
//
// A tier tracks its health from its errors (health.go): after a run of I/O
// errors it stops taking copies for a while and callers fall back to the
// source. An error about one file (its name too long, missing, not
// permitted) says nothing about the tier's storage and never rests it.
package tier

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Errors returned by a Tier. Callers match them with errors.Is.
var (
	// ErrNoSpace means the quota or the free-space floor leaves no room.
	ErrNoSpace = errors.New("tier: no space")
	// ErrUnhealthy means the tier failed recently and takes no copies for now.
	ErrUnhealthy = errors.New("tier: unhealthy")
	// ErrShortCopy means the source gave fewer or more bytes than expected.
	ErrShortCopy = errors.New("tier: size changed during copy")
)

// Options describe one tier.
type Options struct {
	Name         string
	Dir          string  // root directory; created 0700
	Quota        int64   // bytes of file data the tier may hold
	MinFreeBytes int64   // keep at least this many bytes free on the file system
	MinFreePct   float64 // or this percentage of it (the larger floor wins)
	// Statfs reports the file system's free and total bytes; nil means
	// statfs(2) on Dir. Tests set it to simulate a filling disk.
	Statfs func(dir string) (free, total uint64, err error)
	// Syncfs flushes the file system holding dir to stable storage; nil
	// means syncfs(2). Tests set it to simulate a failing disk.
	Syncfs func(dir string) error
	// RequireMount refuses a directory on the root file system, or whose
	// parent is missing (mount.go): the tier must be a disk of its own.
	RequireMount bool
	// Owner, if set, is the catalog the directory must belong to: it is
	// recorded at first use, and Open fails with an *OwnedError when the
	// directory belongs to another (owner.go).
	Owner *Owner
}

const (
	dataDir   = "data"
	hashedDir = "hashed"
	tmpDir    = ".tmp"
	// after this many consecutive I/O errors the tier rests for coolDown.
	maxErrors = 3
	coolDown  = 30 * time.Second
)

// Tier is a local directory that holds whole-file copies.
type Tier struct {
	opts Options

	used     atomic.Int64 // bytes of installed files
	files    atomic.Int64 // installed files
	reserved atomic.Int64 // bytes reserved by copies in progress

	// nameMax is the longest file name the tier's file system takes
	// (statfs f_namelen at Open); Path hashes longer names.
	nameMax int

	mu        sync.Mutex // serialises Reserve's check-and-add with commit
	fsFree    uint64     // free bytes of the last statfs (guarded by mu)
	fsTotal   uint64
	fsUsed    int64     // used when it was taken
	fsAt      time.Time // when; zero: none cached
	now       func() time.Time
	unsynced  atomic.Int64 // copies installed since the last Sync began
	errRun    atomic.Int32
	restUntil atomic.Int64 // unix nanos; 0 = healthy
	errTotal  atomic.Int64
}

// Open checks the tier's root (SecureDir: created 0700 when missing, refused
// when another user could have prepared it), creates its directories
// (0700), removes leftover temp files,
// reads the file system's name limit and checks that the directory is
// writable.
func Open(o Options) (*Tier, error) {
	if o.Name == "" || o.Dir == "" {
		return nil, fmt.Errorf("tier: name and directory are required")
	}
	if o.Quota <= 0 {
		return nil, fmt.Errorf("tier %s: quota must be positive", o.Name)
	}
	// Every dataset file has a name in the tier, hashed if need be; the
	// hashed names must fit.
	if len(filepath.Clean(o.Dir))+len("/"+hashedDir+"/xy/")+2*sha256.Size >= pathMax {
		return nil, fmt.Errorf("tier %s: directory path is too long (%d bytes) to hold file names", o.Name, len(o.Dir))
	}
	t := &Tier{opts: o, now: time.Now}
	if t.opts.Statfs == nil {
		t.opts.Statfs = statfs
	}
	if t.opts.Syncfs == nil {
		t.opts.Syncfs = syncfs
	}
	// The root is trusted only if nobody else could have prepared it
	// (secure.go); it is created 0700 when missing. Its subdirectories are
	// ours, never symlinks.
	if o.RequireMount {
		if err := checkOwnMount(o.Dir); err != nil {
			return nil, fmt.Errorf("tier %s: %w", o.Name, err)
		}
	}
	if err := SecureDir(o.Dir); err != nil {
		return nil, fmt.Errorf("tier %s: %w", o.Name, err)
	}
	if o.Owner != nil {
		if err := claim(o.Dir, *o.Owner); err != nil {
			return nil, fmt.Errorf("tier %s: %w", o.Name, err)
		}
	}
	uid := uint32(os.Geteuid())
	for _, d := range []string{dataDir, hashedDir} {
		d = filepath.Join(o.Dir, d)
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("tier %s: %w", o.Name, err)
		}
		if err := checkOwnDir(d, uid); err != nil {
			return nil, fmt.Errorf("tier %s: %w", o.Name, err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("tier %s: %w", o.Name, err)
		}
	}
	t.nameMax = nameLimit(o.Dir)
	tmp := filepath.Join(o.Dir, tmpDir)
	if err := os.RemoveAll(tmp); err != nil {
		return nil, fmt.Errorf("tier %s: remove leftover temp files: %w", o.Name, err)
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("tier %s: %w", o.Name, err)
	}
	probe, err := os.CreateTemp(tmp, "probe-*")
	if err != nil {
		return nil, fmt.Errorf("tier %s: %s is not writable: %w", o.Name, o.Dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return t, nil
}

// Name is the tier's name.
func (t *Tier) Name() string { return t.opts.Name }

// Dir is the tier's root directory.
func (t *Tier) Dir() string { return t.opts.Dir }

// Quota is the tier's byte quota.
func (t *Tier) Quota() int64 { return t.opts.Quota }

// Used is the bytes of installed files.
func (t *Tier) Used() int64 { return t.used.Load() }

// Files is the number of installed files.
func (t *Tier) Files() int64 { return t.files.Load() }

// Reserved is the bytes held by copies in progress.
func (t *Tier) Reserved() int64 { return t.reserved.Load() }

// Errors is the number of storage errors the tier has seen, no-space
// errors included; errors of single files are not counted (health.go).
func (t *Tier) Errors() int64 { return t.errTotal.Load() }

// Account records an installed file found at start (from the catalog).
func (t *Tier) Account(size int64) {
	t.used.Add(size)
	t.files.Add(1)
}

// Reservation holds space for one copy until it is installed or dropped.
type Reservation struct {
	t    *Tier
	size int64
	done atomic.Bool
}

// Reserve holds size bytes for a copy, or returns ErrNoSpace when the quota
// or the free-space floor has no room, or ErrUnhealthy.
func (t *Tier) Reserve(size int64) (*Reservation, error) {
	if !t.Healthy() {
		return nil, ErrUnhealthy
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.used.Load()+t.reserved.Load()+size > t.opts.Quota {
		return nil, ErrNoSpace
	}
	if free, total, err := t.statfs(size); err == nil {
		floor := uint64(t.opts.MinFreeBytes)
		if p := uint64(t.opts.MinFreePct / 100 * float64(total)); p > floor {
			floor = p
		}
		// Bytes reserved by copies in progress are not yet written.
		need := uint64(size) + uint64(t.reserved.Load()) + floor
		if free < need {
			return nil, ErrNoSpace
		}
	} else {
		t.noteError(err)
		return nil, fmt.Errorf("%w: statfs: %w", ErrUnhealthy, err)
	}
	t.reserved.Add(size)
	return &Reservation{t: t, size: size}, nil
}

// Cached statfs. A warmup reserves thousands of copies a second, each
// under the tier's lock; a statfs per reservation would serialise them on
// a system call. An answer is reused for statfsMaxAge, less the bytes
// installed since (a conservative estimate: those bytes were partly
// written, so partly counted, already), as long as it leaves statfsSlack
// of room above what a reservation needs; closer to the floor, or older,
// the file system is asked again. What another process writes meanwhile
// is seen up to statfsMaxAge late, within the slack's reach.
const (
	statfsMaxAge = time.Second
	statfsSlack  = 256 << 20
)

// statfs returns the file system's free and total bytes for a reservation
// of size, from the cache when it is safe (see above). t.mu is held.
func (t *Tier) statfs(size int64) (free, total uint64, err error) {
	if !t.fsAt.IsZero() && t.now().Sub(t.fsAt) < statfsMaxAge {
		free = t.fsFree
		if grown := t.used.Load() - t.fsUsed; grown > 0 {
			free -= min(free, uint64(grown))
		}
		floor := max(uint64(t.opts.MinFreeBytes), uint64(t.opts.MinFreePct/100*float64(t.fsTotal)))
		if free >= uint64(size)+uint64(t.reserved.Load())+floor+statfsSlack {
			return free, t.fsTotal, nil
		}
	}
	free, total, err = t.opts.Statfs(t.opts.Dir)
	if err != nil {
		t.fsAt = time.Time{}
		return 0, 0, err
	}
	t.fsFree, t.fsTotal, t.fsUsed, t.fsAt = free, total, t.used.Load(), t.now()
	return free, total, nil
}

// Release gives the space back (the copy failed).
func (r *Reservation) Release() {
	if r.done.CompareAndSwap(false, true) {
		r.t.reserved.Add(-r.size)
	}
}

// commit turns the reservation into installed bytes. It holds the tier's
// lock: Reserve reads used and reserved one after the other and must not
// see the bytes in neither.
func (r *Reservation) commit() {
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	if r.done.CompareAndSwap(false, true) {
		r.t.reserved.Add(-r.size)
		r.t.used.Add(r.size)
		r.t.files.Add(1)
	}
}

// Temp is a copy in progress: write it, then Install or Abort it.
type Temp struct {
	t   *Tier
	res *Reservation
	f   *os.File
	rel string
}

// Create starts a copy of the dataset file rel under a reservation.
func (t *Tier) Create(rel string, res *Reservation) (*Temp, error) {
	f, err := os.CreateTemp(filepath.Join(t.opts.Dir, tmpDir), "copy-*")
	if err != nil {
		t.noteError(err)
		return nil, t.wrap("create temp", rel, err)
	}
	return &Temp{t: t, res: res, f: f, rel: rel}, nil
}

// File is the temp file; readers may pread what has been written so far.
// It stays open and valid after Install (it then is the installed file).
func (tp *Temp) File() *os.File { return tp.f }

// Write appends to the temp file.
func (tp *Temp) Write(p []byte) (int, error) {
	n, err := tp.f.Write(p)
	if err != nil {
		tp.t.noteError(err)
		return n, tp.t.wrap("write", tp.rel, err)
	}
	return n, nil
}

// Install checks the temp file holds size bytes and renames it into place.
// The copy is durable once a Sync that began after Install returned has
// returned. On error the temp file is removed.
func (tp *Temp) Install(size int64) (err error) {
	defer func() {
		if err != nil {
			tp.Abort()
		}
	}()
	st, err := tp.f.Stat()
	if err != nil {
		tp.t.noteError(err)
		return tp.t.wrap("stat temp", tp.rel, err)
	}
	if st.Size() != size {
		return fmt.Errorf("%w: %s: wrote %d bytes, expected %d", ErrShortCopy, tp.rel, st.Size(), size)
	}
	dst := tp.t.Path(tp.rel)
	dir := filepath.Dir(dst)
	// The directories on the way to a file's name, and the name itself,
	// are that file's: their errors say nothing about the tier's storage
	// unless they are I/O errors (health.go). A hashed name's directory
	// (hashed/XY) is made here as well.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tp.t.noteFileError(err)
		return tp.t.wrap("mkdir", tp.rel, err)
	}
	if err := os.Rename(tp.f.Name(), dst); err != nil {
		tp.t.noteFileError(err)
		return tp.t.wrap("rename", tp.rel, err)
	}
	tp.t.unsynced.Add(1)
	tp.res.commit()
	tp.t.errRun.Store(0)
	return nil
}

// Sync makes every copy installed before the call durable: one syncfs(2)
// of the tier's file system for all of them. It does nothing when no copy
// was installed since the last Sync. On error the copies count as not
// synced (the next Sync tries again) and the tier's health counts it.
// Calls must not overlap (the catalog's writer makes them).
func (t *Tier) Sync() error {
	n := t.unsynced.Swap(0)
	if n == 0 {
		return nil
	}
	if err := t.opts.Syncfs(t.opts.Dir); err != nil {
		t.unsynced.Add(n)
		t.noteError(err)
		return fmt.Errorf("tier %s: syncfs: %w", t.opts.Name, err)
	}
	return nil
}

// Unsynced is the number of copies installed since the last Sync began.
func (t *Tier) Unsynced() int64 { return t.unsynced.Load() }

// Abort removes the temp file and releases the reservation. The file
// descriptor stays open for readers still using it; call Close after.
func (tp *Temp) Abort() {
	os.Remove(tp.f.Name())
	tp.res.Release()
}

// Close closes the temp (or installed) file's descriptor.
func (tp *Temp) Close() error { return tp.f.Close() }

// Remove deletes the installed copy of rel (size bytes), e.g. when the
// source changed.
func (t *Tier) Remove(rel string, size int64) error {
	err := os.Remove(t.Path(rel))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.noteFileError(err)
		return t.wrap("remove", rel, err)
	}
	if err == nil || errors.Is(err, os.ErrNotExist) {
		t.used.Add(-size)
		t.files.Add(-1)
	}
	return nil
}

// Discard removes the copy of rel without unaccounting it: a copy the
// tier never accounted (a recorded one, before the mount checked it).
func (t *Tier) Discard(rel string) error {
	err := os.Remove(t.Path(rel))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.noteFileError(err)
		return t.wrap("remove", rel, err)
	}
	return nil
}

// OpenFile opens the installed copy of rel for reading.
func (t *Tier) OpenFile(rel string) (*os.File, error) {
	f, err := os.OpenFile(t.Path(rel), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		t.noteFileError(err)
		return nil, t.wrap("open", rel, err)
	}
	return f, nil
}

// OpenFD opens the installed copy of rel with a raw descriptor and returns
// it with the copy's size. The read path uses it: a raw descriptor skips
// the Go runtime's poller registration and blocking-mode switches that an
// *os.File costs at every open.
func (t *Tier) OpenFD(rel string) (fd int, size int64, err error) {
	name := t.Path(rel)
	fd, err = syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		t.noteFileError(err)
		return -1, 0, t.wrap("open", rel, &os.PathError{Op: "open", Path: name, Err: err})
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		t.noteError(err)
		return -1, 0, t.wrap("stat", rel, err)
	}
	return fd, st.Size, nil
}

func (t *Tier) wrap(op, rel string, err error) error {
	if isNoSpace(err) {
		return fmt.Errorf("tier %s: %s %s: %w (%w)", t.opts.Name, op, rel, ErrNoSpace, err)
	}
	return fmt.Errorf("tier %s: %s %s: %w", t.opts.Name, op, rel, err)
}

func statfs(dir string) (free, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

func syncfs(dir string) error {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	err = unix.Syncfs(fd)
	syscall.Close(fd)
	return err
}

// CheckPaths reports an error when dir lies inside src or src inside dir.
func CheckPaths(src, dir string) error {
	s, err := filepath.EvalSymlinks(src)
	if err != nil {
		s = filepath.Clean(src)
	}
	return CheckPathsResolved(s, dir, src)
}

// CheckPathsResolved is CheckPaths for a source whose symlinks are
// resolved already (s; src is its name for errors): it never looks at the
// source, which may hang.
func CheckPathsResolved(s, dir, src string) error {
	d := filepath.Clean(dir)
	if r, err := filepath.EvalSymlinks(existingPrefix(d)); err == nil {
		d = filepath.Join(r, strings.TrimPrefix(d, existingPrefix(d)))
	}
	if within(d, s) {
		return fmt.Errorf("%s lies inside the source %s", dir, src)
	}
	if within(s, d) {
		return fmt.Errorf("the source %s lies inside %s", src, dir)
	}
	return nil
}

func existingPrefix(p string) string {
	for {
		if _, err := os.Lstat(p); err == nil {
			return p
		}
		parent := filepath.Dir(p)
		if parent == p {
			return p
		}
		p = parent
	}
}

func within(p, root string) bool {
	if p == root {
		return true
	}
	if root == "/" {
		return true
	}
	return strings.HasPrefix(p, root+string(filepath.Separator))
}

var _ io.Writer = (*Temp)(nil)
