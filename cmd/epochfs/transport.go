package main

import (
	"runtime"

	"github.com/epochfs/epochfs/internal/fs"
)

// transportProcs raises GOMAXPROCS by the threads of the FUSE transport
// that wait in the kernel holding a P (fs.TransportThreads: the /dev/fuse
// readers, and one io_uring queue per online CPU). Without the extra Ps
// the Go runtime finds no idle P while they wait, takes theirs at every
// request and hands one back after it: futex calls and context switches
// on every request. It returns the readers to use and the CPUs for the
// daemon's own work (GOMAXPROCS before; preprocessing sizes its pool by
// it).
func transportProcs(mode fs.IoUringMode) (readers, cpus int) {
	cpus = runtime.GOMAXPROCS(0)
	readers = fs.DefaultReaders(cpus)
	runtime.GOMAXPROCS(cpus + fs.TransportThreads(mode, readers))
	return readers, cpus
}
