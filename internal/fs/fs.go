// Package fs is the FUSE face of epochfs: it translates kernel requests
// into calls on the placement layer and serves the control files under
// .epochfs/. Policy lives below; this package only translates.
//
// Node types: node (a dataset file, directory or symlink, backed by a
// catalog.Entry), ctlDir and ctlFile (the control surface). Open of a
// resident file hands the kernel the tier file's descriptor (passthrough)
// when the mount supports it; otherwise the file is served in cached mode
// with FOPEN_KEEP_CACHE. The kernel refuses a passthrough open while a
// cached-mode open of the same inode is live (and the reverse) with EIO, so
// each inode counts its open handles by mode and a new open joins the mode
// already in use (file.go). The descriptor and its kernel registration are
// kept between opens, so a repeat open makes no system call; each handle
// names the registration to go-fuse's bridge, which puts it in the reply
// (fusefs.FileBackingIDer: backing.go).
package fs

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/epochfs/epochfs/internal/jobs"
	"github.com/epochfs/epochfs/internal/placement"
	"github.com/epochfs/epochfs/internal/preprocess"
	"github.com/epochfs/epochfs/internal/status"
	"github.com/epochfs/epochfs/internal/views"
	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/puzpuzpuz/xsync/v3"
	"go.uber.org/zap"
)

// Options configure a mount.
type Options struct {
	Placer     *placement.Placer
	Source     string // shown in status
	Mountpoint string
	Version    string
	Logger     *zap.Logger
	// Timeout is the kernel entry and attribute cache time for dataset
	// files. Default DefaultTimeout: the dataset is read-only, and every
	// change the daemon learns of (an open's validation, refresh, verify)
	// is pushed to the kernel (events.go), in every validation mode; the
	// timeout only bounds how long the kernel keeps what nothing changed.
	Timeout time.Duration
	// NoPassthrough disables FUSE passthrough even if the kernel has it.
	NoPassthrough bool
	// Prewarm registers the copies already in the tiers with the kernel
	// in the background after mounting (prewarm.go).
	Prewarm bool
	// IoUring selects the transport (transport.go; "" is IoUringAuto);
	// Readers bounds the goroutines that wait on /dev/fuse (0:
	// DefaultReaders of GOMAXPROCS).
	IoUring IoUringMode
	Readers int
	// Model renders .epochfs/model (the DSI model's inputs and split);
	// nil leaves the file out.
	Model func() []byte
	// Jobs serves .epochfs/jobs/ (training jobs and their sample order);
	// nil leaves the directory out.
	Jobs *jobs.Manager
	// Views serves .epochfs/views/decoded/ with the mount's default
	// pipeline (its static steps); nil leaves views out.
	Views *preprocess.View
	// Debug logs every FUSE request.
	Debug bool
	// MoreStatus, if set, adds status keys after the mount's own (the
	// cluster's cluster.* keys).
	MoreStatus func(*status.Doc)
	// DocBudget bounds the bytes the open ctl documents of one user
	// (root aside) hold together (DefaultDocBudget if 0).
	DocBudget int
}

// DefaultTimeout is Options.Timeout's default: a day, so that a training
// run of many hours sends no LOOKUP or GETATTR again for files it has seen
// (with an hour, every file was looked up again each hour).
const DefaultTimeout = 24 * time.Hour

// FS is one mounted dataset.
type FS struct {
	o      Options
	p      *placement.Placer
	log    *zap.Logger
	server *fuse.Server
	root   *node

	passthrough atomic.Bool   // some tier's files go through passthrough
	ptTiers     []atomic.Bool // per tier: its files may be passed through
	// backings is the registration the passthrough opens of an inode name,
	// by inode number (file.go, backing.go).
	backings     *xsync.MapOf[uint64, *backing]
	ptRegistered atomic.Int64 // backing files registered since the mount
	ptBackings   atomic.Int64 // registrations held now
	ptRefused    atomic.Int64 // registrations the kernel refused
	ptRefusedLog atomic.Bool
	// batchesPassthrough: batch opens the kernel serves from a memory file.
	batchesPassthrough atomic.Int64
	batchMem           *views.MemFiles // set before passthrough is on
	// Live handles of dataset files: in passthrough mode (with the direct
	// I/O ones beside them), and in cached mode.
	ptHandles, cachedHandles atomic.Int64
	xattrs                   atomic.Int64 // GETXATTR and LISTXATTR requests of dataset entries
	// Listings of dataset directories the daemon served (dir.go): opens,
	// and entries sent (a listing the kernel has cached sends none).
	dirOpens, dirEntries atomic.Int64
	dropsPending         atomic.Int64 // drop documents closed whose last descriptor is not
	seenMu               sync.Mutex   // guards seenErrs and seenLast (errno.go: logOnce)
	seenErrs             map[string]struct{}
	seenLast             time.Time
	errs                 errorRing
	docs                 docBudget
	prewarm              prewarm
	start                time.Time
}

// Mount mounts the dataset at o.Mountpoint and returns once the kernel
// answers requests on it.
func Mount(o Options) (*FS, error) {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.DocBudget == 0 {
		o.DocBudget = DefaultDocBudget
	}
	if o.IoUring == "" {
		o.IoUring = IoUringAuto
	}
	fsys := &FS{o: o, p: o.Placer, log: o.Logger, start: time.Now(), docs: docBudget{max: o.DocBudget}, backings: xsync.NewMapOf[uint64, *backing]()}
	fsys.ptTiers = make([]atomic.Bool, len(o.Placer.Tiers()))
	root := o.Placer.Catalog().Root()
	ra, rv := root.Snapshot()
	fsys.root = newNode(fsys, root, ra, rv)
	neg := o.Timeout
	fo := &fusefs.Options{
		EntryTimeout:    &o.Timeout,
		AttrTimeout:     &o.Timeout,
		NegativeTimeout: &neg,
		MountOptions: fuse.MountOptions{
			AllowOther:   os.Geteuid() == 0,
			Options:      []string{"default_permissions"},
			FsName:       o.Source,
			Name:         "epochfs",
			DirectMount:  true,
			MaxWrite:     1 << 20,
			MaxReadAhead: 1 << 20,
			// Many readers of small files: let the kernel keep many reads
			// in flight.
			MaxBackground: 64,
			// READDIRPLUS only where the caller looks at the entries: the
			// first reply of a listing, and the next ones once a child
			// was looked up (ls -l). A names-only walk (ls -R, find,
			// os.walk, ImageFolder) then creates no inode per entry, in
			// the kernel or here.
			ExtraCapabilities: fuse.CAP_READDIRPLUS_AUTO,
			Debug:             o.Debug,
		},
		RootStableAttr: &fusefs.StableAttr{Ino: 1},
		// Modes as the source has them: without this go-fuse shows a
		// file whose permission bits are all zero as 0644.
		NullPermissions: true,
		// The kernel's node IDs are our inode numbers (ino.go).
		ExternalNodeID: true,
	}
	if o.IoUring == IoUringOn {
		if ok, why := IoUringAvailable(); !ok {
			return nil, fmt.Errorf("fs: fuse.io_uring = \"on\": %w: %s", ErrNoIoUring, why)
		}
	}
	o.transportOptions(&fo.MountOptions)
	// fusefs.Mount: the bridge answers a passthrough open with the
	// registration its handle names (backing.go).
	server, err := fuse.NewServer(fusefs.NewNodeFS(fsys.root, fo), o.Mountpoint, &fo.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("fs: mount %s: %w", o.Mountpoint, err)
	}
	fsys.server = server
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		return nil, fmt.Errorf("fs: mount %s: %w", o.Mountpoint, err)
	}
	if err := fsys.checkTransport(); err != nil {
		if uerr := server.Unmount(); uerr != nil {
			err = fmt.Errorf("%w (and unmount: %w)", err, uerr)
		}
		server.Wait()
		return nil, err
	}
	if !o.NoPassthrough && fsys.probePassthrough() {
		fsys.batchMem = views.NewMemFiles(fsys.log)
		fsys.passthrough.Store(true)
		if o.Prewarm {
			fsys.startPrewarm()
		}
	}
	return fsys, nil
}

// probePassthrough registers a file of each tier with the kernel once.
// go-fuse turns passthrough off for the whole mount after the first failed
// registration, so the mount finds out here, not at a user's open, and
// never hands the kernel a file of a tier that failed the probe.
func (fsys *FS) probePassthrough() bool {
	on := false
	for i, t := range fsys.p.Tiers() {
		ok, why := fsys.probeTier(t.Dir())
		fsys.ptTiers[i].Store(ok)
		on = on || ok
		if ok {
			fsys.log.Info("passthrough on", zap.String("tier", t.Name()))
		} else {
			fsys.log.Info("passthrough off", zap.String("tier", t.Name()), zap.String("reason", why))
		}
		if !ok && why == "registration refused" {
			// A refusal may have turned go-fuse's passthrough off for good.
			for j := range fsys.ptTiers {
				fsys.ptTiers[j].Store(false)
			}
			return false
		}
	}
	return on
}

func (fsys *FS) probeTier(dir string) (bool, string) {
	f, err := os.CreateTemp(dir+"/.tmp", "probe-*")
	if err != nil {
		return false, "cannot create a tier file: " + err.Error()
	}
	defer os.Remove(f.Name())
	defer f.Close()
	id, errno := fsys.server.RegisterBackingFd(&fuse.BackingMap{Fd: int32(f.Fd())})
	if errno != 0 {
		return false, "registration refused"
	}
	fsys.server.UnregisterBackingFd(id)
	return true, ""
}

// passthroughTier reports whether files of tier i go through passthrough.
func (fsys *FS) passthroughTier(i int) bool {
	return i >= 0 && i < len(fsys.ptTiers) && fsys.ptTiers[i].Load()
}

// Passthrough reports whether resident files are served by passthrough.
func (fsys *FS) Passthrough() bool { return fsys.passthrough.Load() }

// Unmount unmounts; Wait returns when the server has stopped.
func (fsys *FS) Unmount() error {
	err := fsys.server.Unmount()
	fsys.stopPrewarm()
	return err
}

// Wait blocks until the mount is gone (unmounted here or from outside).
func (fsys *FS) Wait() {
	fsys.server.Wait()
	fsys.stopPrewarm()
	if fsys.batchMem != nil {
		fsys.batchMem.Close()
	}
}
