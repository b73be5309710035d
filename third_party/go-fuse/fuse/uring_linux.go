// Copyright 2026 the Go-FUSE Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package fuse

// FUSE over io_uring (Linux 6.14 and later, fuse module parameter
// enable_uring=Y; see the kernel's Documentation/filesystems/fuse-io-uring.rst).
//
// When MountOptions.EnableIoUring is set and the kernel offers
// CAP_OVER_IO_URING in INIT, the server sets up one io_uring per possible
// CPU before it answers INIT (if that fails, INIT is answered without the
// flag and /dev/fuse is used as before). After the INIT reply each queue
// registers its entries (FUSE_IO_URING_CMD_REGISTER); once every queue has
// one, the kernel sends requests to the queue of the CPU the caller runs
// on. A request arrives as the completion of an entry's command; the answer
// is committed, and the entry's next request fetched, by one
// FUSE_IO_URING_CMD_COMMIT_AND_FETCH: one io_uring_enter(2) per request,
// instead of a read(2) and a write(2).
//
// Each queue is served by a goroutine locked to its OS thread (pinned to
// the queue's CPU where allowed): the kernel delivers a request to an entry
// in the context of the thread that submitted the entry's command, so every
// command is submitted by a queue's own threads, which live until the
// queue stops. Requests are handled inline, on the thread that waits for
// them, as libfuse does. A request whose handler blocks would hold up the
// other requests of its CPU, so a handler that has run for longer than
// ringStallAfter while requests wait in its queue gets a helper: another
// locked thread of the same queue takes over waiting and serving (at most
// one thread per entry; idle helpers stay parked until the queue stops).
//
// FORGET and INTERRUPT still come through /dev/fuse (the kernel sends them
// there), so the classic reader keeps running; interrupts find ring
// requests in the same in-flight table. Notifications are written to
// /dev/fuse as before.
//
// Teardown: at unmount (or when the connection is aborted) the kernel
// completes every waiting command with ENOTCONN; a queue stops when all of
// its entries have ended, and then closes its ring and frees its buffers.
// Each queue also polls an eventfd, so stopRings can end queues whose
// commands the kernel never took (a failed registration).

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel ABI: include/uapi/linux/io_uring.h and include/uapi/linux/fuse.h.
const (
	ioringSetupCQSize = 1 << 3
	ioringSetupSQE128 = 1 << 10

	ioringFeatSingleMmap = 1 << 0

	ioringOffSQRing = 0
	ioringOffCQRing = 0x8000000
	ioringOffSQEs   = 0x10000000

	ioringEnterGetEvents = 1 << 0

	ioringOpPollAdd  = 6
	ioringOpUringCmd = 46

	sqe128Size = 128
	cqeSize    = 16

	fuseIoUringCmdRegister       = 1
	fuseIoUringCmdCommitAndFetch = 2

	// struct fuse_uring_req_header's in_out and op_in.
	ringInOutSize = 128
	ringOpInSize  = 128

	// user_data of a queue's eventfd poll.
	ringStopToken = ^uint64(0)
)

// Serving policy.
const (
	// A handler that has run this long while requests wait in its queue
	// gets a helper thread.
	ringStallAfter = 50 * time.Millisecond
	// A thread that answers requests without being rescheduled yields
	// this often: the Go runtime takes the P of a goroutine that has not
	// been rescheduled for 10ms whenever it enters a system call (see
	// readerYieldEvery). Each yield of a locked thread costs a hand-off
	// through another thread, so it is as rare as it can safely be.
	ringYieldEvery = readerYieldEvery
	// The default number of entries per queue.
	defaultIoUringQueueDepth = 16
)

type ioSqringOffsets struct {
	Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
	UserAddr                                                        uint64
}

type ioCqringOffsets struct {
	Head, Tail, RingMask, RingEntries, Overflow, Cqes, Flags, Resv1 uint32
	UserAddr                                                        uint64
}

type ioUringParams struct {
	SqEntries, CqEntries, Flags, SqThreadCPU, SqThreadIdle, Features, WqFd uint32
	Resv                                                                   [3]uint32
	SqOff                                                                  ioSqringOffsets
	CqOff                                                                  ioCqringOffsets
}

// ringEntInOut is struct fuse_uring_ent_in_out.
type ringEntInOut struct {
	Flags     uint64
	CommitID  uint64
	PayloadSz uint32
	Padding   uint32
	Reserved  uint64
}

// ringReqHeader is struct fuse_uring_req_header: the request's in header
// (and then the reply's out header), the opcode's struct, and the entry's
// in_out.
type ringReqHeader struct {
	InOut    [ringInOutSize]byte
	OpIn     [ringOpInSize]byte
	EntInOut ringEntInOut
}

// ringSQE is struct io_uring_sqe at the 128 bytes of IORING_SETUP_SQE128,
// its unions named for the two operations submitted here:
// IORING_OP_POLL_ADD and IORING_OP_URING_CMD.
type ringSQE struct {
	Opcode uint8
	Flags  uint8
	Ioprio uint16
	Fd     int32
	// CmdOp is the command of IORING_OP_URING_CMD (the union with off).
	CmdOp uint32
	_     uint32
	Addr  uint64
	Len   uint32
	// OpFlags is the union of per-operation flags: poll32_events for
	// IORING_OP_POLL_ADD.
	OpFlags     uint32
	UserData    uint64
	BufIndex    uint16
	Personality uint16
	SpliceFdIn  int32
	// Cmd is the command's area (the union with addr3), 80 bytes with
	// SQE128: struct fuse_uring_cmd_req for FUSE's commands.
	Cmd ringCmdReq
}

// ringCmdReq is struct fuse_uring_cmd_req, padded to the 80 bytes of an
// SQE128's command area.
type ringCmdReq struct {
	Flags    uint64
	CommitID uint64
	Qid      uint16
	_        [6]uint8
	_        [56]byte
}

// Neither struct may differ in size from the kernel's: a compile error
// (a constant index out of range, or an overflow) if one does.
var (
	_ = [1]struct{}{}[unsafe.Sizeof(ringSQE{})-sqe128Size]
	_ = [1]struct{}{}[unsafe.Sizeof(ringReqHeader{})-(ringInOutSize+ringOpInSize+32)]
	_ = [1]struct{}{}[unsafe.Sizeof(ringCQE{})-cqeSize]
)

// uring is one io_uring instance: its descriptor and its mapped rings.
type uring struct {
	fd             int
	sqMap, cqMap   []byte
	sqeMap         []byte
	sqes           []ringSQE // sqeMap as SQEs
	sqHead, sqTail *uint32
	sqMask         uint32
	sqEntries      uint32
	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           []ringCQE
	pendingSubmit  uint32 // SQEs written but not yet passed to io_uring_enter
}

func newUring(entries uint32) (*uring, error) {
	p := ioUringParams{Flags: ioringSetupSQE128 | ioringSetupCQSize, CqEntries: 2 * entries}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &uring{fd: int(fd)}
	fail := func(what string, err error) (*uring, error) {
		r.close()
		return nil, fmt.Errorf("io_uring %s: %w", what, err)
	}
	sqSize := int(p.SqOff.Array + p.SqEntries*4)
	cqSize := int(p.CqOff.Cqes + p.CqEntries*cqeSize)
	if p.Features&ioringFeatSingleMmap != 0 {
		sqSize = max(sqSize, cqSize)
	}
	var err error
	r.sqMap, err = unix.Mmap(r.fd, ioringOffSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fail("mmap sq", err)
	}
	if p.Features&ioringFeatSingleMmap != 0 {
		r.cqMap = r.sqMap
	} else if r.cqMap, err = unix.Mmap(r.fd, ioringOffCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fail("mmap cq", err)
	}
	if r.sqeMap, err = unix.Mmap(r.fd, ioringOffSQEs, int(p.SqEntries)*sqe128Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fail("mmap sqes", err)
	}
	r.sqes = unsafe.Slice((*ringSQE)(unsafe.Pointer(&r.sqeMap[0])), p.SqEntries)
	u32 := func(m []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&m[off])) }
	r.sqHead, r.sqTail = u32(r.sqMap, p.SqOff.Head), u32(r.sqMap, p.SqOff.Tail)
	r.sqMask, r.sqEntries = *u32(r.sqMap, p.SqOff.RingMask), p.SqEntries
	// SQE i always sits in array slot i.
	for i := uint32(0); i < p.SqEntries; i++ {
		*u32(r.sqMap, p.SqOff.Array+4*i) = i
	}
	r.cqHead, r.cqTail = u32(r.cqMap, p.CqOff.Head), u32(r.cqMap, p.CqOff.Tail)
	r.cqMask = *u32(r.cqMap, p.CqOff.RingMask)
	r.cqes = unsafe.Slice((*ringCQE)(unsafe.Pointer(&r.cqMap[p.CqOff.Cqes])), p.CqEntries)
	return r, nil
}

func (r *uring) close() {
	if r.cqMap != nil && (r.sqMap == nil || &r.cqMap[0] != &r.sqMap[0]) {
		unix.Munmap(r.cqMap)
	}
	for _, m := range [][]byte{r.sqeMap, r.sqMap} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	r.sqes, r.sqeMap, r.cqMap, r.sqMap = nil, nil, nil, nil
	if r.fd >= 0 {
		syscall.Close(r.fd)
		r.fd = -1
	}
}

// sqe returns the next free SQE, zeroed. The caller holds the queue's lock.
func (r *uring) sqe() *ringSQE {
	tail := *r.sqTail
	if tail-atomic.LoadUint32(r.sqHead) >= r.sqEntries {
		// Not reached: a queue has one SQE per entry, plus the poll.
		panic("fuse: io_uring submission queue full")
	}
	s := &r.sqes[tail&r.sqMask]
	*s = ringSQE{}
	atomic.StoreUint32(r.sqTail, tail+1)
	r.pendingSubmit++
	return s
}

// enter submits n SQEs and, with wait, waits for a completion. It returns
// how many SQEs the kernel took.
func (r *uring) enter(n uint32, wait bool) (uint32, error) {
	var flags, min uintptr
	if wait {
		flags, min = ioringEnterGetEvents, 1
	}
	for {
		m, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(n), min, flags, 0, 0)
		switch errno {
		case 0:
			return uint32(m), nil
		case syscall.EINTR:
			if wait {
				// Nothing was submitted (a submission returns
				// its count, even if the wait is interrupted).
				return 0, nil
			}
		default:
			return 0, errno
		}
	}
}

type ringCQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// ringEntry is a request slot of a queue: the header and payload buffers
// registered with the kernel, and the request they hold.
type ringEntry struct {
	idx      int
	iov      [2]unix.Iovec
	hdr      *ringReqHeader
	payload  []byte
	commitID uint64
	// in holds the in header and the opcode's struct contiguously, as
	// parseRequest wants them.
	in    [unsafe.Sizeof(InHeader{}) + ringOpInSize]byte
	req   requestAlloc
	ended bool
}

// ringQueue is the io_uring of one CPU and the threads that serve it.
//
// mu guards the submission and completion queues and the fields below it;
// it is never held across a handler or a wait in the kernel.
type ringQueue struct {
	pool    *ringPool
	qid     int
	depth   int
	ring    *uring
	evfd    int
	entries []ringEntry
	bufs    [][]byte // mapped header and payload memory

	mu      sync.Mutex
	live    int         // entries that have not ended
	poller  *ringThread // the thread that waits for completions
	threads int
	idle    []*ringThread // parked threads
	stopped bool

	// Stall detection, read by the pool's monitor without mu: when the
	// poller started its current handler (UnixNano, 0 if none).
	busy     atomic.Int64
	busySeq  atomic.Uint64
	helpers  atomic.Int64 // helper threads started
	requests atomic.Int64 // requests answered
}

// ringThread is one locked OS thread serving a queue.
type ringThread struct {
	wake   chan struct{}
	tid    int
	cpus   unix.CPUSet // the thread's CPUs before it was pinned
	pinned bool
}

// newRingThread locks the calling goroutine to its thread and pins the
// thread to the queue's CPU, until done.
func (q *ringQueue) newRingThread() *ringThread {
	runtime.LockOSThread()
	t := &ringThread{wake: make(chan struct{}, 1), tid: unix.Gettid()}
	t.pinned = q.pin(&t.cpus)
	return t
}

// done gives the thread back to the Go runtime as it found it. (Letting
// it end with the goroutine instead would make the kernel send the
// parent-death signal of every child process that this thread happened
// to start before it served the queue: Go reuses threads.)
func (t *ringThread) done() {
	if t.pinned {
		if err := unix.SchedSetaffinity(0, &t.cpus); err != nil {
			// A thread pinned to one CPU must not go back to the
			// pool: let it end with the goroutine.
			return
		}
	}
	runtime.UnlockOSThread()
}

// ringPool is the set of queues of one server.
type ringPool struct {
	ms         *Server
	depth      int
	maxPayload int
	queues     []*ringQueue
	done       sync.WaitGroup
	stopping   chan struct{} // closed when the pool stops
	stopOnce   sync.Once

	// The monitor parks after a quiet second; the first handler after
	// that wakes it.
	monitorIdle atomic.Bool
	kick        chan struct{}

	// refused is set when the kernel refused a registration: it then
	// goes on through the device (it turns io_uring off for the
	// connection).
	refused atomic.Bool
}

// cpuList parses a kernel CPU list ("0-3,8,10-11") from a sysfs file.
func cpuList(path string) (map[int]bool, int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	set, n := map[int]bool{}, 0
	for _, r := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		z := a
		if err == nil && isRange {
			z, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || z < a || z >= 1<<16 {
			return nil, 0, fmt.Errorf("%s: bad CPU list %q", path, b)
		}
		for c := a; c <= z; c++ {
			set[c] = true
		}
		n = max(n, z+1)
	}
	return set, n, nil
}

// ringMaxPayload is the kernel's minimum payload buffer size: the largest
// of FUSE_MIN_READ_BUFFER, max_write and max_pages pages.
func ringMaxPayload(maxWrite int) int {
	pages := (maxWrite-1)/syscall.Getpagesize() + 1
	return max(_FUSE_MIN_READ_BUFFER, maxWrite, pages*syscall.Getpagesize())
}

// newRingPool sets up every queue's ring and buffers (no command is
// submitted yet). Each queue's first thread is started here, locked and
// pinned, and waits for start.
func newRingPool(ms *Server) (*ringPool, error) {
	// The kernel keeps one queue per possible CPU and uses the rings
	// once every queue has an entry; a CPU that is not online gets one.
	_, n, err := cpuList("/sys/devices/system/cpu/possible")
	if err != nil {
		return nil, fmt.Errorf("io_uring queues: %w", err)
	}
	online, _, err := cpuList("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, fmt.Errorf("io_uring queues: %w", err)
	}
	depth := ms.opts.IoUringQueueDepth
	if depth <= 0 {
		depth = defaultIoUringQueueDepth
	}
	p := &ringPool{ms: ms, depth: depth, maxPayload: ringMaxPayload(ms.opts.MaxWrite),
		stopping: make(chan struct{}), kick: make(chan struct{}, 1)}
	errs := make(chan error, n)
	for qid := 0; qid < n; qid++ {
		q := &ringQueue{pool: p, qid: qid, evfd: -1, threads: 1, depth: depth}
		if !online[qid] {
			q.depth = 1
		}
		p.queues = append(p.queues, q)
		p.done.Add(1)
		go q.first(errs)
	}
	var first error
	for range p.queues {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		p.stop()
		p.done.Wait()
		return nil, first
	}
	return p, nil
}

// setup creates the queue's ring, eventfd and entries.
func (q *ringQueue) setup() error {
	p := q.pool
	var err error
	if q.ring, err = newUring(uint32(q.depth + 1)); err != nil {
		return err
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	q.evfd = fd
	const hdrSize = int(unsafe.Sizeof(ringReqHeader{}))
	hm, err := unix.Mmap(-1, 0, q.depth*hdrSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("map headers: %w", err)
	}
	q.bufs = append(q.bufs, hm)
	hdrs := unsafe.Slice((*ringReqHeader)(unsafe.Pointer(&hm[0])), q.depth)
	pl, err := unix.Mmap(-1, 0, q.depth*p.maxPayload, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("map payloads: %w", err)
	}
	q.bufs = append(q.bufs, pl)
	q.entries = make([]ringEntry, q.depth)
	for i := range q.entries {
		e := &q.entries[i]
		e.idx = i
		e.hdr = &hdrs[i]
		e.payload = pl[i*p.maxPayload : (i+1)*p.maxPayload : (i+1)*p.maxPayload]
		e.iov[0].Base, e.iov[0].Len = &e.hdr.InOut[0], uint64(hdrSize)
		e.iov[1].Base, e.iov[1].Len = &e.payload[0], uint64(len(e.payload))
		e.req.cancel = make(chan struct{})
	}
	q.live = q.depth
	return nil
}

// release frees what setup made. The queue's threads have stopped.
func (q *ringQueue) release() {
	if q.ring != nil {
		q.ring.close()
	}
	q.mu.Lock()
	if q.evfd >= 0 {
		syscall.Close(q.evfd)
		q.evfd = -1
	}
	q.mu.Unlock()
	for _, b := range q.bufs {
		unix.Munmap(b)
	}
	q.bufs = nil
}

// pin binds the calling thread to the queue's CPU when this process may
// run there (the kernel routes a caller's requests to the queue of its
// CPU); old receives the thread's CPUs before.
func (q *ringQueue) pin(old *unix.CPUSet) bool {
	if unix.SchedGetaffinity(0, old) != nil || !old.IsSet(q.qid) {
		return false
	}
	var one unix.CPUSet
	one.Set(q.qid)
	return unix.SchedSetaffinity(0, &one) == nil
}

// first is the queue's first thread: it sets the queue up, reports, waits
// for the INIT reply, registers the entries and serves.
func (q *ringQueue) first(errs chan<- error) {
	defer q.pool.done.Done()
	me := q.newRingThread()
	err := q.setup()
	if err != nil {
		err = fmt.Errorf("queue %d: %w", q.qid, err)
	}
	errs <- err
	if err != nil {
		q.release()
		me.done()
		return
	}
	select {
	case <-q.pool.ms.ringStart:
	case <-q.pool.stopping:
		q.release()
		me.done()
		return
	}
	q.mu.Lock()
	for i := range q.entries {
		q.prepRegister(&q.entries[i])
	}
	s := q.ring.sqe()
	s.Opcode = ioringOpPollAdd
	s.Fd = int32(q.evfd)
	s.OpFlags = unix.POLLIN
	s.UserData = ringStopToken
	q.poller = me
	q.mu.Unlock()
	q.serve(me)
	q.threadDone()
	me.done()
}

// prepRegister queues the REGISTER command of e.
func (q *ringQueue) prepRegister(e *ringEntry) {
	s := q.ring.sqe()
	q.prepCmd(s, e, fuseIoUringCmdRegister)
	s.Addr = uint64(uintptr(unsafe.Pointer(&e.iov[0])))
	s.Len = uint32(len(e.iov))
}

// prepCommit queues the COMMIT_AND_FETCH command of e.
func (q *ringQueue) prepCommit(e *ringEntry) {
	s := q.ring.sqe()
	q.prepCmd(s, e, fuseIoUringCmdCommitAndFetch)
	s.Cmd.CommitID = e.commitID
}

func (q *ringQueue) prepCmd(s *ringSQE, e *ringEntry, cmd uint32) {
	s.Opcode = ioringOpUringCmd
	s.Fd = int32(q.pool.ms.fuseFD.fd)
	s.CmdOp = cmd
	s.UserData = uint64(e.idx)
	s.Cmd.Qid = uint16(q.qid)
}

// serve runs on a queue thread until the queue stops. The thread that
// holds the polling role waits for completions and handles the requests
// they carry inline; a thread without it parks until help gives it back.
func (q *ringQueue) serve(me *ringThread) {
	lastYield := time.Now()
	for {
		q.mu.Lock()
		if q.stopped {
			q.mu.Unlock()
			return
		}
		if q.poller != me {
			q.idle = append(q.idle, me)
			q.mu.Unlock()
			<-me.wake
			continue
		}
		e, stop := q.reap()
		if stop {
			q.mu.Unlock()
			q.stop()
			return
		}
		if e == nil {
			n := q.ring.pendingSubmit
			q.ring.pendingSubmit = 0
			q.mu.Unlock()
			m, err := q.ring.enter(n, true)
			if err != nil {
				q.pool.ms.opts.Logger.Printf("fuse: io_uring queue %d: %v", q.qid, err)
				q.stop()
				return
			}
			if m < n {
				q.mu.Lock()
				q.ring.pendingSubmit += n - m
				q.mu.Unlock()
			}
			continue
		}
		// Answers of earlier requests go to the kernel before this
		// handler runs: it may block, and they must not wait for it.
		n := q.ring.pendingSubmit
		q.ring.pendingSubmit = 0
		q.busySeq.Add(1)
		q.busy.Store(time.Now().UnixNano())
		q.mu.Unlock()
		if q.pool.monitorIdle.Load() {
			q.pool.kickMonitor()
		}
		if n > 0 {
			if m, err := q.ring.enter(n, false); err != nil || m < n {
				q.mu.Lock()
				q.ring.pendingSubmit += n - m
				q.mu.Unlock()
			}
		}

		q.handle(e)

		q.mu.Lock()
		if !e.ended {
			q.prepCommit(e)
		}
		if q.poller == me {
			q.busy.Store(0)
			q.mu.Unlock()
		} else {
			// A helper polls now; submit the commit here (this
			// thread then owns the entry's next fetch).
			n := q.ring.pendingSubmit
			q.ring.pendingSubmit = 0
			q.mu.Unlock()
			m, err := q.ring.enter(n, false)
			if err != nil || m < n {
				q.mu.Lock()
				q.ring.pendingSubmit += n - m
				q.mu.Unlock()
			}
		}
		if time.Since(lastYield) > ringYieldEvery {
			runtime.Gosched()
			lastYield = time.Now()
		}
	}
}

// reap takes one completion: the entry holding a new request, or nil when
// the completion queue is empty. stop reports that the queue has ended.
// The caller holds mu.
func (q *ringQueue) reap() (e *ringEntry, stop bool) {
	r := q.ring
	for {
		head := *r.cqHead
		if head == atomic.LoadUint32(r.cqTail) {
			return nil, false
		}
		c := r.cqes[head&r.cqMask]
		atomic.StoreUint32(r.cqHead, head+1)
		if c.UserData == ringStopToken {
			return nil, true
		}
		if c.UserData >= uint64(len(q.entries)) {
			continue
		}
		e := &q.entries[c.UserData]
		switch {
		case c.Res == 0:
			q.requests.Add(1)
			return e, false
		case c.Res == -int32(syscall.EAGAIN) || c.Res == -int32(syscall.EINTR):
			// Submitted before the connection was initialized:
			// again.
			if e.commitID == 0 {
				q.prepRegister(e)
			} else {
				q.prepCommit(e)
			}
		default:
			// ENOTCONN, ECONNABORTED, ECANCELED: the connection is
			// going away. Anything else ends the entry too.
			if c.Res != -int32(syscall.ENOTCONN) && c.Res != -int32(syscall.ECONNABORTED) && c.Res != -int32(syscall.ECANCELED) {
				what := "commit"
				if e.commitID == 0 {
					what = "registration"
					q.pool.refused.Store(true)
				}
				q.pool.ms.opts.Logger.Printf("fuse: io_uring queue %d entry %d: %s: %v", q.qid, e.idx, what, syscall.Errno(-c.Res))
			}
			e.ended = true
			q.live--
			if q.live == 0 {
				return nil, true
			}
		}
	}
}

// stop ends the queue: its parked threads return, and so does each busy
// one after its handler.
func (q *ringQueue) stop() {
	q.mu.Lock()
	q.stopped = true
	idle := q.idle
	q.idle = nil
	q.mu.Unlock()
	for _, t := range idle {
		t.wake <- struct{}{}
	}
}

// handle answers the request in e and leaves the answer in e's buffers:
// the out header in in_out, the opcode's struct and the payload in the
// payload buffer, their size in ring_ent_in_out.
func (q *ringQueue) handle(e *ringEntry) {
	ms := q.pool.ms
	if ms.opts.SingleThreaded {
		ms.requestProcessingMu.Lock()
		defer ms.requestProcessingMu.Unlock()
	}
	const inHeaderSize = int(unsafe.Sizeof(InHeader{}))
	ino := &e.hdr.EntInOut
	e.commitID = ino.CommitID
	hdr := (*InHeader)(unsafe.Pointer(&e.hdr.InOut[0]))
	psz := int(min(ino.PayloadSz, uint32(len(e.payload))))
	// in_args[0], the opcode's struct, is in op_in; the other arguments
	// (names, data, extensions) are the payload.
	opsz := max(0, min(int(hdr.Length)-inHeaderSize-psz, ringOpInSize))
	copy(e.in[:], e.hdr.InOut[:inHeaderSize])
	copy(e.in[inHeaderSize:], e.hdr.OpIn[:opsz])
	clear(e.in[inHeaderSize+opsz:])

	req := &e.req
	if req.interrupted {
		req.interrupted = false
		req.cancel = make(chan struct{})
	}
	req.clear()
	// Zero-extended: a struct shorter than ours (an older kernel) reads
	// as zeros beyond its end.
	h, inSize, outSize, outPayloadSize, code := parseRequest(e.in[:], &ms.kernelSettings, ms.negotiatedFlags)
	req.inputBuf = e.in[:max(inSize, inHeaderSize)]
	req.inPayload = e.payload[:psz]
	req.status = code
	if !code.Ok() && code != ENOSYS {
		ms.opts.Logger.Printf("parseRequest: %v", code)
	}
	if code.Ok() {
		req.status = req.splitExt(&req.extInline)
		if !req.status.Ok() {
			ms.opts.Logger.Printf("op %s: bad request extension: %v", h.Name, req.status)
		}
	}
	req.outHeaderBuf = req.outHeaderInline[:]
	req.outDataBuf = req.outDataInline[:outSize]
	clear(req.outHeaderBuf)
	clear(req.outDataBuf)
	// The payload is written straight into the ring buffer, after the
	// opcode's struct.
	if outPayloadSize > 0 {
		if outSize+outPayloadSize <= len(e.payload) {
			req.outPayload = e.payload[outSize : outSize+outPayloadSize]
		} else {
			req.outPayload = ms.buffers.AllocBuffer(uint32(outPayloadSize))
			req.bufferPoolOutputBuf = req.outPayload
		}
	}
	ms.protocolServer.handleRequest(h, &req.request)

	sz := 0
	switch {
	case req.suppressReply:
		// Nothing to answer, but the entry must be committed to be
		// used again.
		if req.readResult != nil {
			req.readResult.Done()
			req.readResult = nil
		}
		req.status, req.outDataBuf = OK, nil
		req.serializeHeader(0)
	case !req.status.Ok():
	default:
		sz = copy(e.payload, req.outDataBuf)
		if rr := req.readResult; rr != nil {
			n, st := readInto(rr, e.payload[sz:min(len(e.payload), sz+rr.Size())])
			rr.Done()
			req.readResult = nil
			if !st.Ok() {
				req.status, n = st, 0
			}
			// The header said the size asked for; say what was read.
			req.serializeHeader(n)
			sz += n
		} else if len(req.outPayload) > 0 {
			if &req.outPayload[0] != &e.payload[sz] {
				copy(e.payload[sz:], req.outPayload)
			}
			sz += len(req.outPayload)
		}
	}
	if req.bufferPoolOutputBuf != nil {
		ms.buffers.FreeBuffer(req.bufferPoolOutputBuf)
		req.bufferPoolOutputBuf = nil
	}
	if !req.status.Ok() {
		sz = 0
	}
	copy(e.hdr.InOut[:], req.outHeaderBuf)
	ino.PayloadSz = uint32(sz)
}

// readInto reads a read result into dst.
func readInto(rr ReadResult, dst []byte) (int, Status) {
	switch rr.(type) {
	case withReadv, withSlice:
		return readIntoIov(rr, [][]byte{dst})
	}
	b, st := rr.Bytes(dst)
	if !st.Ok() {
		return 0, st
	}
	return copy(dst, b), OK
}

// threadDone is called when a queue thread returns; the last one releases
// the queue.
func (q *ringQueue) threadDone() {
	q.mu.Lock()
	q.threads--
	last := q.threads == 0
	q.mu.Unlock()
	if last {
		q.release()
	}
}

// start lets the queues register their entries (after the INIT reply).
func (p *ringPool) start() {
	close(p.ms.ringStart)
	p.done.Add(1)
	go p.watch()
}

// stop ends every queue, through its eventfd if a thread waits in the
// kernel.
func (p *ringPool) stop() {
	p.stopOnce.Do(func() { close(p.stopping) })
	for _, q := range p.queues {
		q.mu.Lock()
		if q.evfd >= 0 {
			var one [8]byte
			one[0] = 1
			syscall.Write(q.evfd, one[:])
		}
		q.mu.Unlock()
		q.stop()
	}
}

func (p *ringPool) kickMonitor() {
	if p.monitorIdle.CompareAndSwap(true, false) {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// watch gives a helper to a queue whose poller has been in one handler for
// ringStallAfter while completions wait. It parks after a quiet second.
func (p *ringPool) watch() {
	defer p.done.Done()
	t := time.NewTicker(ringStallAfter)
	defer t.Stop()
	// Per queue: the handler sequence number last seen, and the one a
	// helper was last given for.
	seen := make([]uint64, len(p.queues))
	helped := make([]uint64, len(p.queues))
	quiet := 0
	for {
		select {
		case <-p.stopping:
			return
		case <-t.C:
		}
		now := time.Now().UnixNano()
		active := false
		for i, q := range p.queues {
			start, seq := q.busy.Load(), q.busySeq.Load()
			if seq != seen[i] || start != 0 {
				active = true
			}
			seen[i] = seq
			if start == 0 || now-start < int64(ringStallAfter) || helped[i] == seq {
				continue
			}
			q.mu.Lock()
			waiting := !q.stopped && *q.ring.cqHead != atomic.LoadUint32(q.ring.cqTail)
			q.mu.Unlock()
			if waiting {
				helped[i] = seq
				q.help(seq)
			}
		}
		if active {
			quiet = 0
			continue
		}
		if quiet++; quiet*int(ringStallAfter) < int(time.Second) {
			continue
		}
		// Park. A handler that starts from here on sees the flag and
		// kicks; one that started since this tick's look is seen by
		// the look again below (the flag is set first, so one of the
		// two always sees the other).
		p.monitorIdle.Store(true)
		if p.busyOrMoved(seen) && p.monitorIdle.CompareAndSwap(true, false) {
			quiet = 0
			continue
		}
		t.Stop()
		select {
		case <-p.stopping:
			return
		case <-p.kick:
		}
		quiet = 0
		t.Reset(ringStallAfter)
	}
}

// busyOrMoved reports whether a queue is in a handler, or has started one
// since the sequence numbers in seen.
func (p *ringPool) busyOrMoved(seen []uint64) bool {
	for i, q := range p.queues {
		if q.busy.Load() != 0 || q.busySeq.Load() != seen[i] {
			return true
		}
	}
	return false
}

// help hands the polling role to a parked thread of q, or to a new one,
// if the poller is still in the handler it started as number seq.
func (q *ringQueue) help(seq uint64) {
	q.mu.Lock()
	if q.stopped || q.busy.Load() == 0 || q.busySeq.Load() != seq {
		q.mu.Unlock()
		return
	}
	if n := len(q.idle); n > 0 {
		t := q.idle[n-1]
		q.idle = q.idle[:n-1]
		q.poller = t
		q.mu.Unlock()
		t.wake <- struct{}{}
		return
	}
	if q.threads >= q.depth {
		// Every entry can be held by a thread already.
		q.mu.Unlock()
		return
	}
	q.threads++
	q.mu.Unlock()
	q.helpers.Add(1)
	q.pool.done.Add(1)
	go func() {
		defer q.pool.done.Done()
		t := q.newRingThread()
		q.mu.Lock()
		// Take over unless the stall ended meanwhile (then park).
		if q.busy.Load() != 0 && q.busySeq.Load() == seq {
			q.poller = t
		}
		q.mu.Unlock()
		q.serve(t)
		q.threadDone()
		t.done()
	}()
}

// setupRings sets up the io_uring queues when the INIT reply in req
// enables FUSE over io_uring; if they cannot be set up, it takes the flag
// out of the reply and the server stays on the device.
func (ms *Server) setupRings(req *requestAlloc) {
	if !req.status.Ok() || ms.negotiatedFlags&CAP_OVER_IO_URING == 0 {
		return
	}
	p, err := newRingPool(ms)
	if err == nil {
		ms.uring = p
		return
	}
	ms.opts.Logger.Printf("fuse: FUSE over io_uring offered, but not used: %v", err)
	out := (*InitOut)(req.outData())
	out.setFlags(out.Flags64() &^ CAP_OVER_IO_URING)
	ms.negotiatedFlags &^= CAP_OVER_IO_URING
}

// startRings lets the queues register their entries: from Serve, after the
// INIT reply and the file system's Init (the kernel holds requests until
// every queue has registered).
func (ms *Server) startRings() {
	if ms.uring != nil {
		ms.uring.start()
	}
}

// stopRings ends the queues and waits for their threads; their rings and
// buffers are released.
func (ms *Server) stopRings() {
	if ms.uring != nil {
		ms.uring.stop()
		ms.uring.done.Wait()
	}
}

// IoUring reports whether requests come through FUSE over io_uring (see
// MountOptions.EnableIoUring) and how much the rings did.
func (ms *Server) IoUring() IoUringStats {
	p := ms.uring
	if p == nil || p.refused.Load() {
		return IoUringStats{}
	}
	st := IoUringStats{On: true, Queues: len(p.queues), Depth: p.depth}
	for _, q := range p.queues {
		st.Requests += q.requests.Load()
		st.Helpers += q.helpers.Load()
	}
	return st
}
