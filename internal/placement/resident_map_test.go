package placement

import (
	"testing"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// The kept Residents by entry: casKept swaps only the Resident it was
// given, and swapping to nil leaves the entry none.
func TestKeptResidentsByEntry(t *testing.T) {
	rc := newResidentCache(8, 4)
	e, f := catalog.NewFile("f", catalog.Attr{}), catalog.NewFile("f", catalog.Attr{})
	a, b := &Resident{e: e}, &Resident{e: e}
	if rc.keptOf(e) != nil {
		t.Fatal("a new cache keeps a Resident")
	}
	if rc.casKept(e, a, b) {
		t.Fatal("swapped a Resident that was not kept")
	}
	if rc.keptOf(e) != nil || rc.byEntry.Size() != 0 {
		t.Fatalf("a failed swap left %d kept", rc.byEntry.Size())
	}
	rc.storeKept(e, a)
	if rc.casKept(e, b, nil) || rc.keptOf(e) != a {
		t.Fatal("a swap from another Resident replaced the kept one")
	}
	if !rc.casKept(e, a, b) || rc.keptOf(e) != b || rc.keptOf(f) != nil {
		t.Fatal("a swap from the kept Resident did not take")
	}
	if !rc.casKept(e, b, nil) || rc.keptOf(e) != nil || rc.byEntry.Size() != 0 {
		t.Fatalf("a swap to none left %d kept", rc.byEntry.Size())
	}
}
