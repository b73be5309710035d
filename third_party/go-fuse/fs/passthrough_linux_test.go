// Copyright 2024 the Go-FUSE Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package fs

import (
	"context"
	"os"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// backingIDFile is a file handle whose backing file the test registered.
type backingIDFile struct {
	FileHandle
	id int32
}

func (f *backingIDFile) BackingID() (int32, bool) { return f.id, true }

// backingIDNode opens its file with a backing ID registered before the
// open.
type backingIDNode struct {
	Inode
	id    int32
	reads int
}

func (n *backingIDNode) Open(ctx context.Context, flags uint32) (FileHandle, uint32, syscall.Errno) {
	return &backingIDFile{id: n.id}, 0, 0
}

func (n *backingIDNode) Read(ctx context.Context, f FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n.reads++
	return fuse.ReadResultData(nil), 0
}

func (n *backingIDNode) Getattr(ctx context.Context, f FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	out.Size = 11
	return 0
}

// A file with a pre-registered backing ID is read by the kernel from the
// backing file, and the registration outlives its opens: the bridge
// leaves it to the file system.
func TestPassthroughBackingID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("passthrough requires CAP_SYS_ADMIN")
	}
	backing := t.TempDir() + "/backing"
	if err := os.WriteFile(backing, []byte("hello there"), 0o644); err != nil {
		t.Fatal(err)
	}
	bf, err := os.Open(backing)
	if err != nil {
		t.Fatal(err)
	}
	defer bf.Close()

	mnt := t.TempDir()
	n := &backingIDNode{}
	root := &Inode{}
	server, err := Mount(mnt, root, &Options{
		OnAdd: func(ctx context.Context) {
			ch := root.NewPersistentInode(ctx, n, StableAttr{Mode: syscall.S_IFREG})
			root.AddChild("file", ch, false)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Unmount()
	if 0 == server.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH {
		t.Skip("Kernel does not support passthrough")
	}
	id, errno := server.RegisterBackingFd(&fuse.BackingMap{Fd: int32(bf.Fd())})
	if errno != 0 {
		t.Fatalf("RegisterBackingFd: %v", errno)
	}
	n.id = id
	for i := 0; i < 2; i++ {
		got, err := os.ReadFile(mnt + "/file")
		if err != nil || string(got) != "hello there" {
			t.Fatalf("read %d: %q, %v", i, got, err)
		}
	}
	if n.reads > 0 {
		t.Errorf("%d reads reached the file system, want 0", n.reads)
	}
	// Every open is released: the registration is still the file
	// system's to drop.
	if errno := server.UnregisterBackingFd(id); errno != 0 {
		t.Errorf("UnregisterBackingFd after the opens: %v (the bridge dropped it)", errno)
	}
}
