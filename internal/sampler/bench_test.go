package sampler

import "testing"

// BenchmarkDraws: the sampler's hot path, an ODS job over ImageNet's
// 1,281,167 samples read in batches of 256 (NextRank: draws, plans, hand
// outs, epoch starts). Reports samples handed out per second.
func BenchmarkDraws(b *testing.B) {
	const n = 1_281_167
	s, err := New(Options{Samples: n, Lease: -1, BufferSlots: 1024})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.RegisterJob("a", JobConfig{BatchSize: 256, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	handed := 0
	for b.Loop() {
		batch, _, err := s.Next("a")
		if err != nil {
			b.Fatal(err)
		}
		handed += len(batch)
	}
	b.ReportMetric(float64(handed)/b.Elapsed().Seconds(), "samples/s")
}
