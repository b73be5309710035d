package fs

// The FUSE transport: how requests travel between the kernel and the
// daemon (go-fuse's server, patched in third_party/go-fuse).
//
//   - io_uring: FUSE over io_uring (Linux 6.14+, the fuse module's
//     enable_uring=Y). One ring per CPU; a request is fetched and its
//     answer committed by one io_uring_enter(2), on a thread pinned to the
//     CPU the request came from.
//   - dev: read(2) and write(2) on /dev/fuse by a bounded set of reader
//     goroutines, each answering the request it read before reading again.
//
// Both keep each waiting thread's Go P while it waits in the kernel, so
// the daemon needs as many extra Ps as there are such threads
// (TransportThreads; the CLI raises GOMAXPROCS by that much), or the Go
// runtime takes a P back at every request and hands it over again.

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/epochfs/epochfs/internal/status"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// IoUringMode is the configuration of FUSE over io_uring (fuse.io_uring).
type IoUringMode string

// The modes.
const (
	IoUringAuto IoUringMode = "auto" // when the kernel offers it
	IoUringOn   IoUringMode = "on"   // the mount fails without it
	IoUringOff  IoUringMode = "off"  // always /dev/fuse
)

// ErrNoIoUring: fuse.io_uring = "on" and the kernel does not offer it.
var ErrNoIoUring = errors.New("FUSE over io_uring is not available")

// uringParam is the fuse module's switch for FUSE over io_uring.
const uringParam = "/sys/module/fuse/parameters/enable_uring"

// IoUringAvailable reports whether the kernel offers FUSE over io_uring to
// new mounts, and if not, why.
func IoUringAvailable() (bool, string) {
	b, err := os.ReadFile(uringParam)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, "this kernel has no FUSE over io_uring (Linux 6.14 or later, built with CONFIG_FUSE_IO_URING)"
	case err != nil:
		return false, fmt.Sprintf("cannot read %s: %v", uringParam, err)
	case strings.TrimSpace(string(b)) != "Y":
		return false, "the fuse module's enable_uring is off (" + uringParam + "; docs/admin.md says how to turn it on)"
	}
	return true, ""
}

// DefaultReaders is the number of goroutines that wait on /dev/fuse for a
// daemon with cpus CPUs (go-fuse's default: at least 2, at most 16).
func DefaultReaders(cpus int) int { return min(max(cpus, 2), 16) }

// TransportThreads is the number of threads of the transport that wait in
// the kernel holding a Go P, for a mount with the given io_uring mode and
// readers: the readers, and with io_uring one queue per online CPU.
func TransportThreads(mode IoUringMode, readers int) int {
	n := readers
	if ok, _ := IoUringAvailable(); ok && mode != IoUringOff {
		n += onlineCPUs()
	}
	return n
}

// onlineCPUs counts the online CPUs (every one may send requests to its
// queue, whatever this process's affinity).
func onlineCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	n := 0
	for _, r := range strings.Split(strings.TrimSpace(string(b)), ",") {
		var lo, hi int
		if c, _ := fmt.Sscanf(r, "%d-%d", &lo, &hi); c == 2 && hi >= lo {
			n += hi - lo + 1
		} else if c >= 1 {
			n++
		}
	}
	if n == 0 {
		return runtime.NumCPU()
	}
	return n
}

// transportOptions sets the transport's go-fuse options.
func (o *Options) transportOptions(mo *fuse.MountOptions) {
	mo.EnableIoUring = o.IoUring != IoUringOff
	mo.MaxReaders = o.Readers
}

// checkTransport fails a mount that asked for io_uring and did not get it.
func (fsys *FS) checkTransport() error {
	if fsys.o.IoUring != IoUringOn || fsys.server.IoUring().On {
		return nil
	}
	why := "the kernel did not offer it at mount"
	if ok, reason := IoUringAvailable(); !ok {
		why = reason
	}
	return fmt.Errorf("fs: fuse.io_uring = \"on\": %w: %s", ErrNoIoUring, why)
}

// Transport names the transport in use: "io_uring" or "dev".
func (fsys *FS) Transport() string { return transportName(fsys.server.IoUring()) }

func transportName(st fuse.IoUringStats) string {
	if st.On {
		return "io_uring"
	}
	return "dev"
}

// transportStatus is the transport's part of the status.
func (fsys *FS) transportStatus(d *status.Doc) {
	st := fsys.server.IoUring()
	d.Text("transport", transportName(st))
	d.Int("io_uring_queues", int64(st.Queues))
	d.Int("io_uring_requests", st.Requests)
	d.Int("io_uring_helpers", st.Helpers)
}
