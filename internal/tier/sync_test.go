package tier

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
)

// installCopy places one copy of size bytes named rel.
func installCopy(t *testing.T, tr *Tier, rel string, size int) {
	t.Helper()
	res, err := tr.Reserve(int64(size))
	if err != nil {
		t.Fatal(err)
	}
	tp, err := tr.Create(rel, res)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	if _, err := tp.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if err := tp.Install(int64(size)); err != nil {
		t.Fatal(err)
	}
}

// One Sync makes every copy installed before it durable; a Sync with
// nothing new does not touch the file system; a failed Sync leaves the
// copies to the next one and counts as a tier error.
func TestSyncFlushesEveryCopyInstalledBeforeItOnce(t *testing.T) {
	var calls atomic.Int64
	var fail atomic.Bool
	tr := openTier(t, Options{Quota: 1 << 30, Syncfs: func(dir string) error {
		calls.Add(1)
		if fail.Load() {
			return syscall.EIO
		}
		return syncfs(dir)
	}})
	if err := tr.Sync(); err != nil || calls.Load() != 0 {
		t.Fatalf("Sync with nothing installed: err %v, %d syncfs calls", err, calls.Load())
	}
	for i := 0; i < 20; i++ {
		installCopy(t, tr, fmt.Sprintf("d/f%02d", i), 1000)
	}
	if n := tr.Unsynced(); n != 20 {
		t.Fatalf("%d copies unsynced after 20 installs", n)
	}
	if err := tr.Sync(); err != nil || calls.Load() != 1 || tr.Unsynced() != 0 {
		t.Fatalf("Sync of 20 copies: err %v, %d syncfs calls, %d left", err, calls.Load(), tr.Unsynced())
	}
	if err := tr.Sync(); err != nil || calls.Load() != 1 {
		t.Fatalf("a second Sync with nothing new called syncfs (%d calls, err %v)", calls.Load(), err)
	}
	installCopy(t, tr, "d/g", 1000)
	fail.Store(true)
	if err := tr.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("failing syncfs: err %v, want EIO", err)
	}
	if tr.Unsynced() != 1 || tr.Errors() != 1 {
		t.Errorf("after a failed Sync: %d unsynced (want 1), %d tier errors (want 1)", tr.Unsynced(), tr.Errors())
	}
	fail.Store(false)
	if err := tr.Sync(); err != nil || tr.Unsynced() != 0 {
		t.Errorf("Sync after the disk recovered: err %v, %d unsynced", err, tr.Unsynced())
	}
}
