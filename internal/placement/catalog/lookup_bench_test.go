package catalog

import (
	"fmt"
	"testing"
)

// BenchmarkEntryLookup: what a LOOKUP of the mount does in the catalog,
// a search by name among a directory's 1,000 entries (ImageNet's
// directories hold about 1,300) made as a walk or a load makes them (one
// block of entries, their paths stored together), and the path an open
// then reads. Reports lookups per second.
func BenchmarkEntryLookup(b *testing.B) {
	const n = 1000
	var paths pathArena
	slab := sizedSlab(n)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%08d_%d.JPEG", i, i*7)
		e := slab.alloc()
		e.setKind(KindFile)
		e.setStored(paths.join("train/n01440764", names[i]))
		e.initAttr(Attr{Size: 1})
	}
	kids := blockKids(slab.block())
	b.ResetTimer()
	i, sum := 0, 0
	for b.Loop() {
		e := kids.Lookup(names[(i*7919)%n])
		sum += len(e.Path())
		i++
	}
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "lookups/s")
	if sum == -1 {
		b.Log(sum)
	}
}
