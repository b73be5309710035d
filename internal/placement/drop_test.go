package placement

import (
	"context"
	"testing"

	"github.com/epochfs/epochfs/internal/placement/catalog"
)

// DropCopies removes the copies it is given (and only they): their tier
// files and records go, the tier's accounting follows, the files read
// from the source byte for byte and are copied again when read.
func TestDropCopiesRemovesThemAndReadsFallBackToTheSource(t *testing.T) {
	d := fillDataset()
	e := newEnv(t, d, oneTier(1<<30), Options{})
	e.p.warmups.queueAll()
	e.waitResident()
	var drop []*catalog.Entry
	var bytes int64
	for _, p := range d.Paths()[:10] {
		drop = append(drop, e.entry(p))
		bytes += int64(len(d[p]))
	}
	n, b := e.p.Scrubber().Drop(append(drop, drop[0])) // a file twice: dropped once
	if n != 10 || b != bytes {
		t.Fatalf("dropped %d copies of %d bytes, want 10 of %d", n, b, bytes)
	}
	if f, fb := e.p.Scrubber().Dropped(); f != 10 || fb != bytes {
		t.Errorf("Dropped() = %d, %d", f, fb)
	}
	for i, p := range d.Paths() {
		if resident := e.entry(p).Tier() >= 0; resident != (i >= 10) {
			t.Errorf("%s resident=%v after dropping the first 10", p, resident)
		}
	}
	e.checkAccounting()
	opens := e.source.Stats().Opens
	for _, p := range d.Paths()[:10] {
		got, err := e.p.ReadFile(context.Background(), e.entry(p))
		if err != nil || string(got) != string(d[p]) {
			t.Fatalf("%s after its drop: %d bytes, %v", p, len(got), err)
		}
	}
	if e.source.Stats().Opens-opens != 10 {
		t.Errorf("%d source opens for the 10 dropped files", e.source.Stats().Opens-opens)
	}
	e.waitResident() // copied again when read
	e.checkAccounting()
}
