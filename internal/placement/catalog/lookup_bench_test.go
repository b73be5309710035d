package catalog

import (
	"fmt"
	"testing"
)

// BenchmarkEntryLookup: what a LOOKUP of the mount does in the catalog,
// a search by name among a directory's 1,000 entries (ImageNet's
// directories hold about 1,300), and the path an open then reads.
// Reports lookups per second.
func BenchmarkEntryLookup(b *testing.B) {
	kids := make([]*Entry, 1000)
	names := make([]string, len(kids))
	for i := range kids {
		names[i] = fmt.Sprintf("n%08d_%d.JPEG", i, i*7)
		kids[i] = NewFile("train/n01440764/"+names[i], Attr{Size: 1})
	}
	b.ResetTimer()
	n, sum := 0, 0
	for b.Loop() {
		e := lookupIn(kids, names[(n*7919)%len(names)])
		sum += len(e.Path())
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "lookups/s")
	if sum == -1 {
		b.Log(sum)
	}
}
