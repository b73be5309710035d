package placement

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// Half the dataset gone from the source at once: a refresh removes at most
// max_drop of it and keeps the rest (copies included), the opens of kept
// files serve their copies, or fail with ErrDropHeld (EIO) without one,
// never ErrVanished; a refresh with AllowDrop removes what is gone.
func TestOnePassNeverRemovesMoreThanMaxDrop(t *testing.T) {
	d := dataset{}
	for i := range 40 {
		d[fmt.Sprintf("c%d/f%02d", i%4, i)] = content(fmt.Sprint(i), 1000+i)
	}
	e := newEnv(t, d, oneTier(1<<30), Options{MaxDrop: 0.10, Validate: ValidateOpen})
	e.p.warmups.queueAll()
	e.waitResident()
	// The files of c0 and c1 (20) removed from the source.
	for p := range d {
		if p[:2] == "c0" || p[:2] == "c1" {
			if err := os.Remove(filepath.Join(e.src, p)); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := e.scrub(ScrubRequest{Kind: ScrubRefresh})
	if s.Removed > 4 || s.Removed+s.Held != 20 || s.Errors != 1 {
		t.Fatalf("refresh with half the dataset gone: %+v; want at most 4 removed (10%% of 40), the other files held, one error", s)
	}
	if e.cat.Files() != 40-s.Removed {
		t.Errorf("catalog has %d files, want %d", e.cat.Files(), 40-s.Removed)
	}
	// Every kept file keeps its copy; an open of one is not ENOENT.
	kept := 0
	for p := range d {
		en := e.cat.Find(p)
		if en == nil || p[:2] == "c2" || p[:2] == "c3" {
			continue
		}
		kept++
		if en.Tier() < 0 {
			t.Errorf("%s held but its copy dropped", p)
		}
		// Resident: served from its copy, as during an outage.
		if err := e.openRead(p, d[p]); err != nil {
			t.Errorf("held resident %s: %v, want its copy", p, err)
		}
	}
	// Without a copy: EIO (ErrDropHeld), not "no such file".
	var bare *catalog.Entry
	for p := range d {
		if en := e.cat.Find(p); en != nil && (p[:2] == "c0" || p[:2] == "c1") {
			bare = en
			break
		}
	}
	e.p.op.dropCopy(bare, bare.Tier())
	if _, err := e.p.Open(context.Background(), bare); !errors.Is(err, ErrDropHeld) {
		t.Errorf("open of held %s without a copy: %v, want ErrDropHeld", bare.Path(), err)
	}
	if int64(kept) != s.Held || e.p.val.heldDrops() < s.Held {
		t.Errorf("%d files kept, refresh held %d, DropsHeld %d", kept, s.Held, e.p.val.heldDrops())
	}
	// The rest of the dataset reads as before.
	for p, want := range d {
		if p[:2] != "c2" && p[:2] != "c3" {
			continue
		}
		if err := e.openRead(p, want); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	// With AllowDrop the refresh removes the rest.
	s = e.scrub(ScrubRequest{Kind: ScrubRefresh, AllowDrop: true})
	if s.Held != 0 || s.Errors != 0 || s.Removed != int64(kept) || e.cat.Files() != 20 {
		t.Errorf("refresh --allow-drop: %+v, catalog %d files; want the %d kept files removed, 20 left", s, e.cat.Files(), kept)
	}
	e.checkAccounting()
	// A small deletion is under the guard.
	os.Remove(filepath.Join(e.src, "c2/f02"))
	if s = e.scrub(ScrubRequest{Kind: ScrubRefresh}); s.Removed != 1 || s.Held != 0 {
		t.Errorf("one file gone of 20: %+v, want it removed", s)
	}
}
