package mounts

import (
	"os"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/testenv"
	"golang.org/x/sys/unix"
)

// A watch of the mount table wakes when a mount comes or goes, once a
// change, and not while nothing changes.
func TestATableWatchWakesWhenTheMountTableChanges(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Skip(t, "mounting a tmpfs needs root")
	}
	w, err := WatchTable()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if changed, err := w.Wait(50 * time.Millisecond); changed || err != nil {
		t.Fatalf("nothing mounted: Wait = %v, %v; want no change", changed, err)
	}
	dir := t.TempDir()
	mounted := make(chan error, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		mounted <- unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m")
	}()
	start := time.Now()
	changed, err := w.Wait(10 * time.Second)
	if merr := <-mounted; merr != nil {
		t.Fatalf("mount a tmpfs: %v", merr)
	}
	defer unix.Unmount(dir, 0)
	if !changed || err != nil || time.Since(start) > 5*time.Second {
		t.Fatalf("a tmpfs mounted: Wait = %v, %v after %v; want a change at once", changed, err, time.Since(start))
	}
	if changed, err := w.Wait(50 * time.Millisecond); changed || err != nil {
		t.Fatalf("told of the mount already: Wait = %v, %v; want no change", changed, err)
	}
	if err := unix.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	if changed, err := w.Wait(time.Second); !changed || err != nil {
		t.Fatalf("the tmpfs unmounted: Wait = %v, %v; want a change", changed, err)
	}
}
