package catalog

import "testing"

// BenchmarkEntryReads: what the read path and the sampler read of an
// entry for every open and draw (its attributes with their version, its
// tier), over 64 Ki entries so that the entries come from memory, not
// from the CPU's caches alone. Reports entries read per second.
func BenchmarkEntryReads(b *testing.B) {
	es := make([]*Entry, 1<<16)
	for i := range es {
		e := newOfKind(KindFile)
		e.initAttr(Attr{Size: int64(i), Mtime: int64(i) * 1e9, Mode: 0o100644, Nlink: 1, Blocks: 8, Atime: 1, Ctime: 2})
		e.SetTier(i % 3)
		es[i] = e
	}
	b.ResetTimer()
	var sum int64
	n := 0
	for b.Loop() {
		e := es[n&(len(es)-1)]
		a, v := e.Snapshot()
		sum += a.Size + int64(v) + int64(e.Tier())
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "entries/s")
	if sum == -1 {
		b.Log(sum)
	}
}
