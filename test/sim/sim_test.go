package sim

import (
	"testing"
)

// Three ODS jobs at equal speeds over a dataset 20 % resident take about one
// dataset's worth of non-resident data from the source per epoch (DESIGN.md:
// ≤ 1.2 × (1 − f) × N), independent random jobs about three; every job's
// every epoch is a permutation of the dataset.
func TestODSSourceFetchesPerEpochNearOneNonResidentDataset(t *testing.T) {
	base := Config{Samples: 3000, Jobs: []Job{{Speed: 1000}, {Speed: 1000}, {Speed: 1000}},
		ResidentFraction: 0.2, BufferSlots: 30, SourceRate: 3000, Epochs: 3, BatchSize: 32, Seed: 3}
	ratio := map[Policy]float64{}
	for _, p := range []Policy{ODS, MINIO} {
		c := base
		c.Policy = p
		r, err := Run(c)
		if err != nil {
			t.Fatal(err)
		}
		for i, j := range r.Jobs {
			if !j.Exact || j.Coverage != 1 || j.Epochs != c.Epochs {
				t.Fatalf("%s: job %d: exact %v coverage %v epochs %d", p, i, j.Exact, j.Coverage, j.Epochs)
			}
		}
		ratio[p] = r.FetchesPerEpoch / float64(r.NonResident)
		t.Logf("%s: hit rate %.3f, source fetches per epoch %.2f × (1−f)N, wait %.2f s", p, r.HitRate, ratio[p], r.Jobs[0].Wait)
	}
	if ratio[ODS] > 1.2 {
		t.Errorf("ods: %.2f × (1−f)N source fetches per epoch, want ≤ 1.2", ratio[ODS])
	}
	if ratio[MINIO] < 2.9 {
		t.Errorf("independent jobs: %.2f × (1−f)N per epoch, want ≈ 3", ratio[MINIO])
	}
}

// Joader Table 1, a dataset pair of equal sizes overlapping by a quarter,
// one buffer slot: DSA reaches the minimum |D1 ∪ D2| (within 0.1 %), where
// independent sampling misses |D1| + |D2|.
func TestDSAReachesJoadersMinimumMissesWithOneSlot(t *testing.T) {
	c := Config{Samples: 4000, Jobs: []Job{{Speed: 1, Subset: Range(0, 2000)}, {Speed: 1, Subset: Range(1500, 3500)}},
		BufferSlots: 1, Epochs: 1, BatchSize: 1, Lookahead: 1, Seed: 5, NoSubstitution: true}
	miss := map[Policy]int{}
	for _, p := range []Policy{ODS, Random} {
		c.Policy = p
		r, err := Run(c)
		if err != nil {
			t.Fatal(err)
		}
		miss[p] = r.SourceFetches
	}
	t.Logf("misses: DSA %d, independent %d, minimum 3500, maximum 4000", miss[ODS], miss[Random])
	if miss[ODS] > 3504 {
		t.Errorf("DSA: %d misses, want ≈ 3500", miss[ODS])
	}
	if miss[Random] < 3950 {
		t.Errorf("independent: %d misses with one slot, want ≈ 4000", miss[Random])
	}
}

func TestRunRejectsBadConfigs(t *testing.T) {
	for _, c := range []Config{{}, {Samples: 10}, {Samples: 10, Jobs: []Job{{}}, ResidentFraction: -0.1}} {
		if _, err := Run(c); err == nil {
			t.Errorf("Run(%+v) accepted", c)
		}
	}
}
