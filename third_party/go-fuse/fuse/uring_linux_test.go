// Copyright 2026 the Go-FUSE Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package fuse

import (
	"bytes"
	"errors"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The structs shared with the kernel have its layout: the offsets of
// include/uapi/linux/io_uring.h and include/uapi/linux/fuse.h.
func TestIoUringStructsHaveTheKernelsLayout(t *testing.T) {
	var sqe ringSQE
	var hdr ringReqHeader
	var cqe ringCQE
	for _, c := range []struct {
		field     string
		got, want uintptr
	}{
		{"io_uring_sqe.opcode", unsafe.Offsetof(sqe.Opcode), 0},
		{"io_uring_sqe.fd", unsafe.Offsetof(sqe.Fd), 4},
		{"io_uring_sqe.cmd_op", unsafe.Offsetof(sqe.CmdOp), 8},
		{"io_uring_sqe.addr", unsafe.Offsetof(sqe.Addr), 16},
		{"io_uring_sqe.len", unsafe.Offsetof(sqe.Len), 24},
		{"io_uring_sqe.poll32_events", unsafe.Offsetof(sqe.OpFlags), 28},
		{"io_uring_sqe.user_data", unsafe.Offsetof(sqe.UserData), 32},
		{"io_uring_sqe.buf_index", unsafe.Offsetof(sqe.BufIndex), 40},
		{"io_uring_sqe.personality", unsafe.Offsetof(sqe.Personality), 42},
		{"io_uring_sqe.splice_fd_in", unsafe.Offsetof(sqe.SpliceFdIn), 44},
		{"io_uring_sqe.cmd", unsafe.Offsetof(sqe.Cmd), 48},
		{"io_uring_sqe (SQE128)", unsafe.Sizeof(sqe), 128},
		{"fuse_uring_cmd_req.commit_id", unsafe.Offsetof(sqe.Cmd.CommitID), 8},
		{"fuse_uring_cmd_req.qid", unsafe.Offsetof(sqe.Cmd.Qid), 16},
		{"fuse_uring_req_header.op_in", unsafe.Offsetof(hdr.OpIn), 128},
		{"fuse_uring_req_header.ring_ent_in_out", unsafe.Offsetof(hdr.EntInOut), 256},
		{"fuse_uring_req_header", unsafe.Sizeof(hdr), 288},
		{"fuse_uring_ent_in_out.commit_id", unsafe.Offsetof(hdr.EntInOut.CommitID), 8},
		{"fuse_uring_ent_in_out.payload_sz", unsafe.Offsetof(hdr.EntInOut.PayloadSz), 16},
		{"io_uring_cqe.res", unsafe.Offsetof(cqe.Res), 8},
		{"io_uring_cqe.flags", unsafe.Offsetof(cqe.Flags), 12},
		{"io_uring_cqe", unsafe.Sizeof(cqe), 16},
	} {
		if c.got != c.want {
			t.Errorf("%s at %d, the kernel's at %d", c.field, c.got, c.want)
		}
	}
}

// kernelOffersIoUring reports whether new mounts can use FUSE over
// io_uring (the fuse module's enable_uring).
func kernelOffersIoUring() bool {
	b, err := os.ReadFile("/sys/module/fuse/parameters/enable_uring")
	return err == nil && strings.TrimSpace(string(b)) == "Y"
}

// ringFS serves one directory of files "f0".."f9" (size 4 KiB each, data
// from their index); reading "slow" blocks until release is closed or the
// request is interrupted.
type ringFS struct {
	defaultRawFileSystem

	slowEntered chan struct{}
	release     chan struct{}
	interrupted chan struct{}
}

func newRingFS() *ringFS {
	return &ringFS{slowEntered: make(chan struct{}, 16), release: make(chan struct{}), interrupted: make(chan struct{}, 16)}
}

const ringFileSize = 4096

func (f *ringFS) attr(ino uint64, out *Attr) {
	*out = Attr{Ino: ino, Mode: S_IFREG | 0o644, Nlink: 1, Size: ringFileSize}
	if ino == 1 {
		out.Mode, out.Size = S_IFDIR|0o755, 0
	}
}

func (f *ringFS) Lookup(cancel <-chan struct{}, header *InHeader, name string, out *EntryOut) Status {
	var ino uint64
	switch {
	case name == "slow":
		ino = 100
	case len(name) == 2 && name[0] == 'f' && name[1] >= '0' && name[1] <= '9':
		ino = uint64(name[1]-'0') + 2
	default:
		return ENOENT
	}
	out.NodeId, out.Generation = ino, 1
	f.attr(ino, &out.Attr)
	return OK
}

func (f *ringFS) GetAttr(cancel <-chan struct{}, in *GetAttrIn, out *AttrOut) Status {
	f.attr(in.NodeId, &out.Attr)
	return OK
}

func (f *ringFS) Open(cancel <-chan struct{}, in *OpenIn, out *OpenOut) Status {
	// Direct I/O: every read comes to the server.
	out.OpenFlags = FOPEN_DIRECT_IO
	return OK
}

func (f *ringFS) Read(cancel <-chan struct{}, in *ReadIn, buf []byte) (ReadResult, Status) {
	if in.NodeId == 100 {
		f.slowEntered <- struct{}{}
		select {
		case <-f.release:
		case <-cancel:
			f.interrupted <- struct{}{}
			return nil, EINTR
		}
	}
	end := min(int64(in.Offset)+int64(len(buf)), ringFileSize)
	n := 0
	for off := int64(in.Offset); off < end; off++ {
		buf[n] = byte(in.NodeId) + byte(off)
		n++
	}
	return ReadResultData(buf[:n]), OK
}

func (f *ringFS) Release(cancel <-chan struct{}, in *ReleaseIn) {}

func ringWant(ino uint64) []byte {
	b := make([]byte, ringFileSize)
	for i := range b {
		b[i] = byte(ino) + byte(i)
	}
	return b
}

// mountRing mounts fs with EnableIoUring; the server is unmounted at the
// end of the test.
func mountRing(t *testing.T, fs RawFileSystem) (*Server, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting with DirectMount needs root")
	}
	mnt := t.TempDir()
	srv, err := NewServer(fs, mnt, &MountOptions{
		EnableIoUring: true,
		DirectMount:   true,
		Logger:        log.New(io.Discard, "", 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("Unmount: %v", err)
		}
	})
	return srv, mnt
}

// Whatever the kernel offers, the mount serves: through the rings when the
// kernel has them on, through the device otherwise.
func TestIoUringIsUsedWhenOfferedAndFallsBackOtherwise(t *testing.T) {
	srv, mnt := mountRing(t, newRingFS())
	for i := 0; i < 10; i++ {
		name := filepath.Join(mnt, "f"+string(rune('0'+i)))
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if want := ringWant(uint64(i) + 2); !bytes.Equal(got, want) {
			t.Fatalf("%s: read %d bytes that differ from the file's %d", name, len(got), len(want))
		}
	}
	st := srv.IoUring()
	if offered := kernelOffersIoUring(); st.On != offered {
		t.Fatalf("IoUring().On = %v, but the kernel offers FUSE over io_uring: %v", st.On, offered)
	}
	if st.On && (st.Requests < 10 || st.Queues < 1) {
		t.Fatalf("IoUring() = %+v: want the requests counted on at least one queue", st)
	}
	if !st.On && st.Requests != 0 {
		t.Fatalf("IoUring() = %+v without the rings", st)
	}
}

// onCPU runs f on a thread bound to cpu (requests go to that CPU's queue).
func onCPU(t *testing.T, cpu int, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var set, old unix.CPUSet
		unix.SchedGetaffinity(0, &old)
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			t.Errorf("bind to CPU %d: %v", cpu, err)
			return
		}
		defer unix.SchedSetaffinity(0, &old)
		f()
	}()
	<-done
}

// A request whose handler blocks does not hold up the other requests of
// its CPU's queue: a helper thread takes over the queue, and the answers
// of requests handled before it (in the same batch of completions) reach
// the kernel before the handler blocks. Each round starts a read of "slow"
// together with reads of other files from the same CPU, so that their
// requests and the slow one arrive in one batch now and then.
func TestIoUringASlowHandlerDoesNotHoldUpItsQueue(t *testing.T) {
	if !kernelOffersIoUring() {
		t.Skip("the kernel does not offer FUSE over io_uring (enable_uring)")
	}
	fs := newRingFS()
	srv, mnt := mountRing(t, fs)
	const rounds = 8 // each leaves one entry (of 16) held by a blocked read
	slowDone := make(chan error, rounds)
	defer func() {
		close(fs.release)
		for i := 0; i < rounds; i++ {
			if err := <-slowDone; err != nil {
				t.Errorf("a slow read: %v", err)
			}
		}
	}()
	for r := 0; r < rounds; r++ {
		go onCPU(t, 0, func() {
			_, err := os.ReadFile(filepath.Join(mnt, "slow"))
			slowDone <- err
		})
		// Other reads from the same CPU complete while "slow" blocks.
		// The deadline is a liveness bound: each read takes
		// microseconds.
		var readErr error
		finished := make(chan struct{})
		go onCPU(t, 0, func() {
			defer close(finished)
			for i := 0; i < 20; i++ {
				if _, err := os.ReadFile(filepath.Join(mnt, "f"+string(rune('0'+i%10)))); err != nil {
					readErr = err
					return
				}
			}
		})
		select {
		case <-finished:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: reads on the slow request's CPU did not complete while it blocked", r)
		}
		if readErr != nil {
			t.Fatal(readErr)
		}
		<-fs.slowEntered
	}
	if st := srv.IoUring(); st.Helpers < 1 {
		t.Errorf("IoUring() = %+v: want a helper thread", st)
	}
}

// An interrupted request's handler sees its cancel channel closed (the
// kernel sends INTERRUPT through the device, the request came through a
// ring).
func TestIoUringInterruptReachesTheHandler(t *testing.T) {
	fs := newRingFS()
	_, mnt := mountRing(t, fs)
	cmd := exec.Command("cat", filepath.Join(mnt, "slow"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fs.slowEntered:
	case <-time.After(30 * time.Second):
		t.Fatal("the read never reached the server")
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-fs.interrupted:
	case <-time.After(30 * time.Second):
		close(fs.release)
		t.Fatal("the handler never saw the interrupt")
	}
	cmd.Wait()
}

// After the unmount no ring, eventfd or pinned thread of the server is left.
func TestIoUringLeavesNothingBehind(t *testing.T) {
	if !kernelOffersIoUring() {
		t.Skip("the kernel does not offer FUSE over io_uring (enable_uring)")
	}
	before := anonFDs(t)
	fs := newRingFS()
	mnt := t.TempDir()
	srv, err := NewServer(fs, mnt, &MountOptions{EnableIoUring: true, DirectMount: true, Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(mnt, "f1")); err != nil {
		t.Fatal(err)
	}
	var tids []int
	for _, q := range srv.uring.queues {
		q.mu.Lock()
		for _, th := range append(append([]*ringThread{}, q.idle...), q.poller) {
			if th != nil {
				tids = append(tids, th.tid)
			}
		}
		q.mu.Unlock()
	}
	if len(tids) == 0 {
		t.Fatal("no queue thread recorded")
	}
	if got := anonFDs(t); got["[io_uring]"] < len(srv.uring.queues) {
		t.Fatalf("descriptors while mounted: %v, want one ring per queue", got)
	}
	if err := srv.Unmount(); err != nil {
		t.Fatal(err)
	}
	srv.Wait()
	if after := anonFDs(t); after["[io_uring]"] != before["[io_uring]"] || after["[eventfd]"] != before["[eventfd]"] {
		t.Errorf("descriptors before the mount %v, after the unmount %v", before, after)
	}
	// The queues' threads go back to the Go runtime unpinned.
	for _, tid := range tids {
		var set unix.CPUSet
		err := unix.SchedGetaffinity(tid, &set)
		if errors.Is(err, syscall.ESRCH) {
			continue // ended
		}
		if err != nil {
			t.Fatal(err)
		}
		if set.Count() != runtime.NumCPU() {
			t.Errorf("thread %d still bound to %d CPUs of %d after the unmount", tid, set.Count(), runtime.NumCPU())
		}
	}
}

// anonFDs counts this process's anonymous-inode descriptors by kind.
func anonFDs(t *testing.T) map[string]int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue
		}
		if kind, ok := strings.CutPrefix(target, "anon_inode:"); ok {
			out[kind]++
		}
	}
	return out
}
