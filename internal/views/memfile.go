package views

import (
	"fmt"
	"sync"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// MemFiles gives batches the memory files the kernel serves them from in
// passthrough mode (internal/fs/jobviews.go registers a file's descriptor, FD, as
// the open's backing file). A memory file of 4 KiB pages costs more
// to fill and free than the batch's copy itself (page by page allocation,
// zeroing and page-cache insertion: 32–37 ms for 28 MiB, against 7–8 ms
// with huge pages), and the system's memfds rarely have huge pages
// (shmem_enabled is "never" by default). So the daemon mounts a tmpfs of
// its own with huge=within_size, detached (fsopen, fsmount: never in any
// mount table, gone with its descriptor), and a batch is an unnamed file
// there (O_TMPFILE). Without one (no fsmount: an old kernel or no
// CAP_SYS_ADMIN), batches are memfds.
//
// A memory file is never reused: a reader may have mapped the batch (a
// passthrough mmap maps the backing file itself), so a later batch must
// not write into it. A write lease would show when no open or mapping is
// left, but not the pages a reader spliced into a pipe or sent to a socket
// before closing, which a later batch would overwrite under them. It is
// freed when the last reference goes.
type MemFiles struct {
	mnt  int // the detached tmpfs, or -1
	once sync.Once
}

// NewMemFiles mounts the detached tmpfs (or, failing that, logs that
// batches go in memfds). Close lets go of it.
func NewMemFiles(log *zap.Logger) *MemFiles {
	m := &MemFiles{mnt: -1}
	fd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err == nil {
		defer unix.Close(fd)
		if err = unix.FsconfigSetString(fd, "huge", "within_size"); err == nil {
			if err = unix.FsconfigSetString(fd, "mode", "0700"); err == nil {
				err = unix.FsconfigCreate(fd)
			}
		}
		if err == nil {
			m.mnt, err = unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOEXEC|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
			if err != nil {
				m.mnt = -1
			}
		}
	}
	if err != nil {
		log.Info("batches in memfds: no tmpfs with huge pages", zap.Error(err))
	}
	return m
}

// Close lets go of the tmpfs; its files live on while referenced.
func (m *MemFiles) Close() {
	m.once.Do(func() {
		if m.mnt >= 0 {
			unix.Close(m.mnt)
		}
	})
}

// Alloc is an Alloc: a new memory file of n bytes, mapped.
func (m *MemFiles) Alloc(n int) (Buffer, error) {
	var fd int
	var err error
	if m.mnt >= 0 {
		fd, err = unix.Openat(m.mnt, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	} else {
		fd, err = unix.MemfdCreate("epochfs-batch", unix.MFD_CLOEXEC)
	}
	if err != nil {
		return nil, fmt.Errorf("memory file: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(n)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("memory file of %d bytes: %w", n, err)
	}
	buf, err := unix.Mmap(fd, 0, max(n, 1), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("mapping a memory file of %d bytes: %w", n, err)
	}
	return &memFile{fd: fd, buf: buf[:n]}, nil
}

// memFile is a batch's memory file, mapped.
type memFile struct {
	fd  int
	buf []byte
}

func (m *memFile) Bytes() []byte { return m.buf }

// FD is the memory file's descriptor, open while the Buffer is not freed.
func (m *memFile) FD() int { return m.fd }

func (m *memFile) Free() {
	unix.Munmap(m.buf[:cap(m.buf)])
	unix.Close(m.fd)
}
