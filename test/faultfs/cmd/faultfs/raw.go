package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// faultRaw wraps the loopback's raw file system. In down mode every request
// that has an answer gets EIO before it reaches the loopback, the way sshfs
// answers once its server is gone. The wrapper sits at the raw layer rather
// than around the node types so that no operation can slip past it: each
// method of fuse.RawFileSystem is listed here, and a new one in go-fuse
// passes through only if it is added below.
//
// FORGET, RELEASE and RELEASEDIR always pass through: the kernel does not
// wait for their answer, and failing them would leak the loopback's inodes
// and descriptors. INIT, DESTROY (OnUnmount), String and SetDebug are not
// requests of a user.
//
// Every request that goes through failing is also counted by operation
// (lowercase: "lookup", "getattr", "open", "read", "opendir", "readdir"
// (READDIR and READDIRPLUS both),
// ...) and delayed by the operation's delay, if one is set: the "counts"
// and "delay" commands (main.go).
type faultRaw struct {
	fuse.RawFileSystem
	down   *atomic.Bool
	counts sync.Map // operation → *atomic.Int64
	delays sync.Map // operation → time.Duration
}

var _ fuse.RawFileSystem = (*faultRaw)(nil)

// failing counts a request of operation op, waits for op's delay and
// reports whether the request must fail.
func (f *faultRaw) failing(op string) bool {
	n, _ := f.counts.LoadOrStore(op, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	if d, ok := f.delays.Load(op); ok {
		time.Sleep(d.(time.Duration))
	}
	return f.down.Load()
}

// countLine is the answer to "counts": "counts OP=N OP=N ..." sorted by
// operation.
func (f *faultRaw) countLine() string {
	var ops []string
	f.counts.Range(func(k, v any) bool {
		ops = append(ops, fmt.Sprintf("%s=%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	sort.Strings(ops)
	return strings.TrimSpace("counts " + strings.Join(ops, " "))
}

func (f *faultRaw) Lookup(c <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if f.failing("lookup") {
		return fuse.EIO
	}
	return f.RawFileSystem.Lookup(c, h, name, out)
}

func (f *faultRaw) GetAttr(c <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if f.failing("getattr") {
		return fuse.EIO
	}
	return f.RawFileSystem.GetAttr(c, in, out)
}

func (f *faultRaw) SetAttr(c <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if f.failing("setattr") {
		return fuse.EIO
	}
	return f.RawFileSystem.SetAttr(c, in, out)
}

func (f *faultRaw) Mknod(c <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	if f.failing("mknod") {
		return fuse.EIO
	}
	return f.RawFileSystem.Mknod(c, in, name, out)
}

func (f *faultRaw) Mkdir(c <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	if f.failing("mkdir") {
		return fuse.EIO
	}
	return f.RawFileSystem.Mkdir(c, in, name, out)
}

func (f *faultRaw) Unlink(c <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if f.failing("unlink") {
		return fuse.EIO
	}
	return f.RawFileSystem.Unlink(c, h, name)
}

func (f *faultRaw) Rmdir(c <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if f.failing("rmdir") {
		return fuse.EIO
	}
	return f.RawFileSystem.Rmdir(c, h, name)
}

func (f *faultRaw) Rename(c <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	if f.failing("rename") {
		return fuse.EIO
	}
	return f.RawFileSystem.Rename(c, in, oldName, newName)
}

func (f *faultRaw) Link(c <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	if f.failing("link") {
		return fuse.EIO
	}
	return f.RawFileSystem.Link(c, in, name, out)
}

func (f *faultRaw) Symlink(c <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	if f.failing("symlink") {
		return fuse.EIO
	}
	return f.RawFileSystem.Symlink(c, h, target, name, out)
}

func (f *faultRaw) Readlink(c <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	if f.failing("readlink") {
		return nil, fuse.EIO
	}
	return f.RawFileSystem.Readlink(c, h)
}

func (f *faultRaw) Access(c <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	if f.failing("access") {
		return fuse.EIO
	}
	return f.RawFileSystem.Access(c, in)
}

func (f *faultRaw) GetXAttr(c <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	if f.failing("getxattr") {
		return 0, fuse.EIO
	}
	return f.RawFileSystem.GetXAttr(c, h, attr, dest)
}

func (f *faultRaw) ListXAttr(c <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	if f.failing("listxattr") {
		return 0, fuse.EIO
	}
	return f.RawFileSystem.ListXAttr(c, h, dest)
}

func (f *faultRaw) SetXAttr(c <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	if f.failing("setxattr") {
		return fuse.EIO
	}
	return f.RawFileSystem.SetXAttr(c, in, attr, data)
}

func (f *faultRaw) RemoveXAttr(c <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	if f.failing("removexattr") {
		return fuse.EIO
	}
	return f.RawFileSystem.RemoveXAttr(c, h, attr)
}

func (f *faultRaw) Create(c <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	if f.failing("create") {
		return fuse.EIO
	}
	return f.RawFileSystem.Create(c, in, name, out)
}

func (f *faultRaw) Tmpfile(c <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	if f.failing("tmpfile") {
		return fuse.EIO
	}
	return f.RawFileSystem.Tmpfile(c, in, out)
}

func (f *faultRaw) Open(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if f.failing("open") {
		return fuse.EIO
	}
	return f.RawFileSystem.Open(c, in, out)
}

func (f *faultRaw) Read(c <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	if f.failing("read") {
		return nil, fuse.EIO
	}
	return f.RawFileSystem.Read(c, in, buf)
}

func (f *faultRaw) Lseek(c <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	if f.failing("lseek") {
		return fuse.EIO
	}
	return f.RawFileSystem.Lseek(c, in, out)
}

func (f *faultRaw) GetLk(c <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	if f.failing("getlk") {
		return fuse.EIO
	}
	return f.RawFileSystem.GetLk(c, in, out)
}

func (f *faultRaw) SetLk(c <-chan struct{}, in *fuse.LkIn) fuse.Status {
	if f.failing("setlk") {
		return fuse.EIO
	}
	return f.RawFileSystem.SetLk(c, in)
}

func (f *faultRaw) SetLkw(c <-chan struct{}, in *fuse.LkIn) fuse.Status {
	if f.failing("setlkw") {
		return fuse.EIO
	}
	return f.RawFileSystem.SetLkw(c, in)
}

func (f *faultRaw) Write(c <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	if f.failing("write") {
		return 0, fuse.EIO
	}
	return f.RawFileSystem.Write(c, in, data)
}

func (f *faultRaw) Writev(c <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	if f.failing("writev") {
		return 0, fuse.EIO
	}
	return f.RawFileSystem.Writev(c, in, data)
}

func (f *faultRaw) CopyFileRange(c <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	if f.failing("copyfilerange") {
		return 0, fuse.EIO
	}
	return f.RawFileSystem.CopyFileRange(c, in)
}

func (f *faultRaw) Ioctl(c <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	if f.failing("ioctl") {
		return fuse.EIO
	}
	return f.RawFileSystem.Ioctl(c, in, inbuf, out, outbuf)
}

func (f *faultRaw) Flush(c <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	if f.failing("flush") {
		return fuse.EIO
	}
	return f.RawFileSystem.Flush(c, in)
}

func (f *faultRaw) Fsync(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if f.failing("fsync") {
		return fuse.EIO
	}
	return f.RawFileSystem.Fsync(c, in)
}

func (f *faultRaw) Fallocate(c <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	if f.failing("fallocate") {
		return fuse.EIO
	}
	return f.RawFileSystem.Fallocate(c, in)
}

func (f *faultRaw) OpenDir(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if f.failing("opendir") {
		return fuse.EIO
	}
	return f.RawFileSystem.OpenDir(c, in, out)
}

func (f *faultRaw) ReadDir(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if f.failing("readdir") {
		return fuse.EIO
	}
	return f.RawFileSystem.ReadDir(c, in, out)
}

func (f *faultRaw) ReadDirPlus(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if f.failing("readdir") {
		return fuse.EIO
	}
	return f.RawFileSystem.ReadDirPlus(c, in, out)
}

func (f *faultRaw) FsyncDir(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if f.failing("fsyncdir") {
		return fuse.EIO
	}
	return f.RawFileSystem.FsyncDir(c, in)
}

func (f *faultRaw) StatFs(c <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	if f.failing("statfs") {
		return fuse.EIO
	}
	return f.RawFileSystem.StatFs(c, h, out)
}

func (f *faultRaw) Statx(c <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	if f.failing("statx") {
		return fuse.EIO
	}
	return f.RawFileSystem.Statx(c, in, out)
}
