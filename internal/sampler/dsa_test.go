package sampler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func rangeSubset(a, b int) []int {
	s := make([]int, 0, b-a)
	for i := a; i < b; i++ {
		s = append(s, i)
	}
	return s
}

// dsaTrials runs one DSA round over all ODS jobs trials times, undoing each,
// and returns, per job, how often each sample was drawn, and how often the
// round's draws were all the same sample.
func dsaTrials(t *testing.T, s *Sampler, trials int) (map[string]map[int32]int, int) {
	t.Helper()
	if !s.dsaActive() {
		t.Fatal("DSA is not active")
	}
	counts := map[string]map[int32]int{}
	allShared := 0
	for range trials {
		var p []*job
		for _, j := range s.dsa.group {
			if j.eps[0].set.free > 0 {
				j.drawFor = j.ranks[0]
				p = append(p, j)
			}
		}
		s.dsaRound(p)
		first, same := int32(-1), true
		for _, j := range p {
			r := j.ranks[0]
			e := r.plan[len(r.plan)-1]
			r.plan = r.plan[:len(r.plan)-1]
			s.untake(j, r.ep, e)
			if counts[j.name] == nil {
				counts[j.name] = map[int32]int{}
			}
			counts[j.name][e]++
			if first >= 0 && e != first {
				same = false
			}
			first = e
		}
		if same {
			allShared++
		}
	}
	if err := s.check(); err != nil {
		t.Fatal(err)
	}
	return counts, allShared
}

// Per-draw marginal: for every job, the DSA draw is uniform over the job's
// free samples, with the jobs at different points of their epochs. Test:
// chi-square of 40 000 draws against uniform at p = 1e-4 (z = 3.72) per job.
func TestDSAPerDrawMarginalIsUniformOverEachJobsFreeSet(t *testing.T) {
	s, _ := New(Options{Samples: 1000, Seed: 3, Lookahead: 1})
	r := rand.New(rand.NewPCG(4, 4))
	cfgs := map[string][]int{
		"a": rangeSubset(0, 600),
		"b": rangeSubset(200, 900),
		"c": r.Perm(1000)[:500],
		"d": rangeSubset(0, 1000)[100:700],
	}
	for _, name := range []string{"a", "b", "c", "d"} {
		if err := s.RegisterJob(name, JobConfig{BatchSize: 10, Subset: cfgs[name]}); err != nil {
			t.Fatal(err)
		}
	}
	// Different progress: a read 30 batches, b 5, c 12, d none.
	for name, k := range map[string]int{"a": 30, "b": 5, "c": 12} {
		for range k {
			if _, _, err := s.Next(name); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, err := s.Next("d"); err != nil {
		t.Fatal(err)
	}
	counts, _ := dsaTrials(t, s, 40000)
	for _, name := range []string{"a", "b", "c", "d"} {
		j := s.jobs[name]
		var cells []int
		for l := 0; l < j.eps[0].set.n; l++ {
			if !j.eps[0].set.has(l) {
				cells = append(cells, counts[name][j.global(l)])
			}
		}
		drawn := 0
		for _, c := range counts[name] {
			drawn += c
		}
		x, crit := chiSquare(cells), chiSquareCritical(len(cells)-1, 3.72)
		t.Logf("job %s: %d free samples, chi-square %.1f (critical %.1f at p=1e-4)", name, len(cells), x, crit)
		if drawn != 40000 || x > crit {
			t.Errorf("job %s: draws not uniform over its free set: chi-square %.1f > %.1f (drawn %d)", name, x, crit, drawn)
		}
	}
}

// Joader's bound (appendix D, eq. 6 and 10): all n jobs draw the same sample
// with probability |∩ D_i| / max |D_i|; DSA reaches it. Checked on the first
// round of Table 1's dataset pairs and its 4-job case, 20 000 rounds each,
// within 4 standard errors.
func TestDSASharesDrawsAsOftenAsJoadersBound(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	cases := []struct {
		name    string
		subsets [][]int
	}{
		{"overlap 7500", [][]int{rangeSubset(0, 10000), rangeSubset(2500, 12500)}},
		{"overlap 2500", [][]int{rangeSubset(0, 10000), rangeSubset(7500, 17500)}},
		{"sizes 10000/5000", [][]int{rangeSubset(0, 10000), rangeSubset(0, 5000)}},
		{"sizes 10000/7500", [][]int{rangeSubset(0, 10000), rangeSubset(0, 7500)}},
		{"4 random", [][]int{r.Perm(13333)[:10000], r.Perm(13333)[:10000], r.Perm(13333)[:10000], r.Perm(13333)[:10000]}},
	}
	for _, c := range cases {
		s, _ := New(Options{Samples: 17500, Seed: 1, Lookahead: 1})
		in := map[int]int{}
		maxSize := 0
		for i, sub := range c.subsets {
			if err := s.RegisterJob(fmt.Sprint(i), JobConfig{BatchSize: 1, Subset: sub}); err != nil {
				t.Fatal(err)
			}
			for _, e := range sub {
				in[e]++
			}
			maxSize = max(maxSize, len(sub))
		}
		inter := 0
		for _, k := range in {
			if k == len(c.subsets) {
				inter++
			}
		}
		for i := range c.subsets {
			// The ranks have read: DSA draws for them.
			s.jobs[fmt.Sprint(i)].ranks[0].started = true
		}
		const trials = 20000
		_, shared := dsaTrials(t, s, trials)
		got, bound := float64(shared)/trials, float64(inter)/float64(maxSize)
		se := math.Sqrt(bound * (1 - bound) / trials)
		t.Logf("%s: all jobs share %.4f of the draws; bound |∩|/max|D| = %.4f", c.name, got, bound)
		if math.Abs(got-bound) > 4*se+1e-9 {
			t.Errorf("%s: shared %.4f, want %.4f ± %.4f", c.name, got, bound, 4*se)
		}
	}
}

// The chi-square check can fail: a draw that prefers the low half is rejected.
func TestChiSquareRejectsABiasedDraw(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	cells := make([]int, 500)
	for range 40000 {
		i := r.IntN(500)
		if i >= 250 && r.IntN(10) == 0 {
			i -= 250
		}
		cells[i]++
	}
	if x, crit := chiSquare(cells), chiSquareCritical(499, 3.72); x <= crit {
		t.Fatalf("a 10%% bias passes: chi-square %.1f <= %.1f", x, crit)
	}
}
