package placement

import (
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/epochfs/epochfs/internal/tier"

	"github.com/epochfs/epochfs/internal/testenv"
)

// residentPages counts the pages of path in the page cache.
func residentPages(t *testing.T, path string) (in, total int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	for _, v := range vec {
		if v&1 != 0 {
			in++
		}
	}
	return in, len(vec)
}

func TestReadaheadBringsAResidentCopyIntoThePageCache(t *testing.T) {
	d := dataset{"a/big": make([]byte, 4<<20), "a/small": []byte("x")}
	for i := range d["a/big"] {
		d["a/big"][i] = byte(i * 7)
	}
	// A disk tier: a memory tier's pages cannot be dropped.
	e := newEnv(t, d, []tier.Options{{Name: "disk", Quota: 1 << 30, Dir: filepath.Join(t.TempDir(), "disk")}}, Options{})
	e.readAllFiles()
	e.waitResident()
	copyPath := e.tiers[0].Path("a/big")
	// Copies are made durable by batch (syncfs): write this one back, or
	// its pages are dirty and cannot be dropped. Pages under writeback or
	// still being read by the copier can survive one FADV_DONTNEED, so
	// drop until they are gone.
	dropDeadline := time.Now().Add(10 * time.Second)
	for {
		dropPages(t, copyPath)
		in, total := residentPages(t, copyPath)
		if in <= total/4 {
			break
		}
		if time.Now().After(dropDeadline) {
			testenv.Skip(t, "after FADV_DONTNEED for 10s %d of %d pages are still cached: this file system keeps them, cannot test", in, total)
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.p.Buffer().Readahead(e.entry("a/big"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		in, total := residentPages(t, copyPath)
		if in == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readahead: %d of %d pages cached after 20s", in, total)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A directory and a file with no copy: nothing to do, no panic.
	e.p.Buffer().Readahead(e.entry("a"))
	gone := e.entry("a/small")
	gone.SetTier(-1)
	e.p.Buffer().Readahead(gone)
}

// dropPages writes path back and asks the kernel to drop its cached pages.
func dropPages(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}
