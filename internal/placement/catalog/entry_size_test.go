package catalog

import (
	"testing"
	"unsafe"
)

// An entry stays 160 bytes with the placer's residency in it: its marks
// share one word (placement/residency), and every file of a dataset has
// one entry.
func TestEntrySizeWithResidency(t *testing.T) {
	if n := unsafe.Sizeof(Entry{}); n > 160 {
		t.Errorf("catalog.Entry is %d bytes, want at most 160", n)
	}
}
