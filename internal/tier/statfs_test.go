package tier

import (
	"errors"
	"testing"
	"time"

	"github.com/epochfs/epochfs/internal/testenv"
)

// Far from the floor, reservations reuse one statfs; the bytes installed
// since count against it; near the floor every reservation asks again.
func TestReservationsFarFromTheFloorReuseOneStatfs(t *testing.T) {
	disk := newFakeDisk(1<<40, 1<<41)
	tr := openTier(t, Options{Quota: 1 << 50, MinFreeBytes: 1 << 30, Statfs: disk.statfs})
	for i := 0; i < 100; i++ {
		r, err := tr.Reserve(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	if n := disk.calls.Load(); n != 1 {
		t.Errorf("100 reservations far from the floor called statfs %d times, want 1", n)
	}
	// Installed bytes count against the cached answer at once.
	r, err := tr.Reserve(1<<40 - 1<<30 - 1<<28)
	if err != nil {
		t.Fatal(err)
	}
	tmp, err := tr.Create("big", r)
	if err != nil {
		t.Fatal(err)
	}
	if err := tmp.f.Truncate(1<<40 - 1<<30 - 1<<28); err != nil {
		testenv.Skip(t, "cannot make a sparse file: %v", err)
	}
	if err := tmp.Install(1<<40 - 1<<30 - 1<<28); err != nil {
		t.Fatal(err)
	}
	tmp.Close()
	calls := disk.calls.Load()
	disk.free.Store(1<<30 + 1<<28) // what the file system now says
	if _, err := tr.Reserve(1 << 29); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Reserve(512 MiB) with 256 MiB above the floor: err = %v, want ErrNoSpace", err)
	}
	if disk.calls.Load() == calls {
		t.Error("a reservation close to the floor used the cached answer")
	}
	// Another process fills the disk: seen once the answer is older than
	// statfsMaxAge.
	now := time.Now()
	tr.now = func() time.Time { return now }
	disk.free.Store(1 << 40)
	if _, err := tr.Reserve(1 << 20); err != nil {
		t.Fatal(err)
	}
	disk.free.Store(1<<30 + 1<<10)
	if _, err := tr.Reserve(1 << 20); err != nil {
		t.Fatalf("within statfsMaxAge the cached answer stands: %v", err)
	}
	now = now.Add(statfsMaxAge)
	if _, err := tr.Reserve(1 << 20); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("after statfsMaxAge: err = %v, want ErrNoSpace", err)
	}
}

// Near the floor the cache is never trusted: each reservation sees the
// disk as it is now.
func TestReservationsNearTheFloorAskTheFileSystemEachTime(t *testing.T) {
	disk := newFakeDisk(statfsSlack, 1<<41)
	tr := openTier(t, Options{Quota: 1 << 50, Statfs: disk.statfs})
	for i := 0; i < 10; i++ {
		r, err := tr.Reserve(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	if n := disk.calls.Load(); n != 10 {
		t.Errorf("10 reservations within the slack called statfs %d times, want 10", n)
	}
}
