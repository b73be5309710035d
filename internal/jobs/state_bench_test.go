package jobs

import (
	"fmt"
	"testing"

	"github.com/epochfs/epochfs/internal/placement/catalog"
	"github.com/epochfs/epochfs/internal/sampler"
)

// BenchmarkStateOfImageNet: the state of a job of 8 ranks over ImageNet's
// 1,281,167 training samples half way through an epoch (the densest set,
// the largest document), saved (snapshot, path order and hash, encoding)
// and resumed by a job of 4 ranks (parse, path order and hash, mapping,
// the sampler's resume). Reports the document's size (docs/sampling.md,
// "Resuming a job").
func BenchmarkStateOfImageNet(b *testing.B) {
	const n = 1_281_167
	files := make([]*catalog.Entry, n)
	for i := range files {
		class := i / 1282
		files[i] = catalog.NewFile(fmt.Sprintf("train/n%08d/n%08d_%d.JPEG", 1440000+class, 1440000+class, i), catalog.Attr{})
	}
	numbered := catalog.NumberingOf(files)
	noneGone := func(int) bool { return false }
	s, err := sampler.New(sampler.Options{Samples: n, Lease: -1})
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{BatchSize: 256, Seed: 1, Sampler: sampler.KindODS, WorldSize: 8}
	if err := s.RegisterJob("a", sampler.JobConfig{BatchSize: 256, Seed: 1, WorldSize: 8}); err != nil {
		b.Fatal(err)
	}
	for range n / 2 / (8 * 256) {
		for r := range 8 {
			if _, _, err := s.NextRank("a", r); err != nil {
				b.Fatal(err)
			}
		}
	}
	var doc []byte
	b.Run("save", func(b *testing.B) {
		for b.Loop() {
			sn, err := s.Snapshot("a")
			if err != nil {
				b.Fatal(err)
			}
			order, hash := epochOrder(&numbered, noneGone, n, sn.Subset, sn.Size)
			if doc, err = stateOf("a", cfg, sn, order, hash, numberedOf(&numbered, nil)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(doc)), "state-bytes")
	})
	s2, err := sampler.New(sampler.Options{Samples: n, Lease: -1})
	if err != nil {
		b.Fatal(err)
	}
	if err := s2.RegisterJob("b", sampler.JobConfig{BatchSize: 256, Seed: 1, WorldSize: 4}); err != nil {
		b.Fatal(err)
	}
	b.Run("resume", func(b *testing.B) {
		for b.Loop() {
			d, err := parseState(doc)
			if err != nil {
				b.Fatal(err)
			}
			sn, err := s2.Snapshot("b")
			if err != nil {
				b.Fatal(err)
			}
			order, hash := epochOrder(&numbered, noneGone, n, sn.Subset, sn.Size)
			if hash != d.Hash {
				b.Fatal("hash differs")
			}
			if err := s2.Resume("b", resumeEpochs(d, order, sn.Size, nil)); err != nil {
				b.Fatal(err)
			}
		}
	})
	st, _ := s2.Status("b")
	if st.Resumed == 0 || st.PerRank != (n-st.Resumed+3)/4 {
		b.Fatalf("resumed %d, per rank %d", st.Resumed, st.PerRank)
	}
}
