package daemon

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"

	"github.com/epochfs/epochfs/internal/cluster"
	"github.com/epochfs/epochfs/internal/fs"
	"github.com/epochfs/epochfs/internal/mounts"
)

// Serve is the daemon process: it makes the process-wide settings that
// are the daemon's and not its libraries' (the open-file limit, the
// collector's memory limit, Redis's logger, the transport's threads),
// assembles the mount (New), reports it ready (ready, then systemd's
// sd_notify), and serves until the mount goes away or ctx ends; then it
// closes the mount and forgets its users if it was unmounted by another
// hand than `epochfs unmount`. onReady, if set, runs once the mount
// answers; its error is logged.
func Serve(ctx context.Context, o Options, ready *mounts.Readiness, onReady func() error) error {
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
		o.Logger = log
	}
	// Hold no directory busy: every path is absolute by now.
	os.Chdir("/")
	raiseNoFile(log)
	cluster.QuietRedis()
	readers, cpus := ProcsForTransport(o.FUSE.IoUring)
	o.FUSE.Readers = readers
	if o.Views != nil && o.Views.Workers <= 0 {
		o.Views.Workers = cpus
	}
	lastLog := time.Now()
	o.Progress = func(n int64) {
		if time.Since(lastLog) > 5*time.Second {
			lastLog = time.Now()
			log.Info("walking the source", zap.Int64("entries", n))
		}
	}
	m, err := New(ctx, o)
	if err != nil {
		return err
	}
	setMemoryLimit(m.MemoryBudget(), log)
	relCtx, endRelease := context.WithCancel(context.Background())
	defer endRelease()
	pageOut := func() {
		if n, err := m.Catalog().PageOut(); err != nil {
			log.Warn("cannot hand back the catalog's mapped pages", zap.Error(err))
		} else {
			log.Debug("catalog's mapped pages handed back", zap.Int64("mapped_bytes", n))
		}
	}
	go releaseAfterCopies(relCtx, m.Placer().Stats, pageOut, log)
	go releaseAfterWalk(relCtx, m.Placer().Ready(), pageOut, log)
	go releaseWhenQuiet(relCtx, releaseEvery, readHeap, pageOut, log)
	log.Info("mounted", zap.String("source", o.Source), zap.String("mountpoint", o.Mountpoint),
		zap.Bool("passthrough", m.FS().Passthrough()), zap.String("transport", m.FS().Transport()), zap.Int64("files", m.Catalog().Files()),
		zap.Bool("walked", m.Catalog().Walked()), zap.Int("pid", os.Getpid()),
		zap.String("metrics", m.MetricsAddr()))
	ready.Ready()
	if onReady != nil {
		if err := onReady(); err != nil {
			log.Warn("mounted, but the user could not be recorded", zap.Error(err))
		}
	}
	// systemd (Type=notify): the mount answers now. Without NOTIFY_SOCKET
	// this does nothing.
	if _, err := sddaemon.SdNotify(false, fmt.Sprintf("READY=1\nMAINPID=%d\nSTATUS=serving %s at %s", os.Getpid(), o.Source, o.Mountpoint)); err != nil {
		log.Warn("sd_notify READY failed", zap.Error(err))
	}
	select {
	case <-m.Done():
		log.Info("unmounted")
	case <-ctx.Done():
		log.Info("signal received; unmounting")
	}
	sddaemon.SdNotify(false, "STOPPING=1")
	err = m.Close()
	// Unmounted by umount(8), fusermount3 or a signal rather than by
	// `epochfs unmount`: the mount point's users and keep go with the
	// mount, so that the next mount there starts afresh.
	mounts.ForgetUsersIfUnmounted(o.Mountpoint)
	return err
}

// ProcsForTransport raises GOMAXPROCS by the threads of the FUSE transport
// that wait in the kernel holding a P (fs.TransportThreads: the /dev/fuse
// readers, and one io_uring queue per online CPU). Without the extra Ps
// the Go runtime finds no idle P while they wait, takes theirs at every
// request and hands one back after it: futex calls and context switches
// on every request. It returns the readers to use and the CPUs for the
// daemon's own work (GOMAXPROCS before; preprocessing sizes its pool by
// it).
func ProcsForTransport(mode fs.IoUringMode) (readers, cpus int) {
	cpus = runtime.GOMAXPROCS(0)
	readers = fs.DefaultReaders(cpus)
	runtime.GOMAXPROCS(cpus + fs.TransportThreads(mode, readers))
	return readers, cpus
}

// memoryMargin is the part of the daemon's memory beyond its budgets that
// does not grow with the dataset (FUSE and copy buffers, pools, the Go
// runtime): measured at about 260 MiB with three jobs of views
// (docs/benchmarks.md, "Preprocessed views"), with room.
const memoryMargin = 384 << 20

// setMemoryLimit asks Go's collector to keep the heap within the mount's
// budgets (caches and shared buffer) plus its overhead: what it holds once
// mounted (the catalog's tree above all) and memoryMargin. By default the
// collector lets the heap grow to twice what is live, which for gigabytes
// of caches is gigabytes more. A GOMEMLIMIT in the environment wins.
func setMemoryLimit(budget int64, log *zap.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	limit := budget + int64(ms.HeapAlloc) + memoryMargin
	debug.SetMemoryLimit(limit)
	log.Info("memory limit", zap.Int64("bytes", limit), zap.Int64("budgets", budget), zap.Uint64("heap_at_mount", ms.HeapAlloc))
}

// raiseNoFile lifts RLIMIT_NOFILE to its hard limit: every open dataset
// file holds a tier or source descriptor.
//
// The hard limit is raised too, to the kernel's ceiling (fs.nr_open), when
// the process may (CAP_SYS_RESOURCE): a hard limit of a few thousand (a
// container's default) leaves a cached-mode mount few kept descriptors
// (placement.DefaultOpenFiles is half the limit). A process-wide effect,
// so it is the daemon's to make, not a library's.
func raiseNoFile(log *zap.Logger) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return
	}
	if data, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if ceil, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64); err == nil && r.Max < ceil {
			if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: ceil, Max: ceil}) == nil {
				return
			}
		}
	}
	if r.Cur < r.Max {
		r.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
			log.Warn("cannot raise the open-file limit", zap.Error(err))
		}
	}
}
