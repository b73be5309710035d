package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// roundingBound is how far the best point of a grid of step s can fall below
// the optimum x*: rounding x_E and x_A to the grid moves each by at most s/2
// and, writing DSI_overall·N_total in the cumulative counts
//
//	C1 = N_A, C2 = C1 + N_D, C3 = C2 + N_E, C4 = C3 + N_nvme
//	N_total·DSI = C1(r_A − r_D) + C2(r_D − r_E) + C3(r_E − r_V) + C4(r_V − r_S) + N_total·r_S
//
// C1 moves by at most K_A·s/2, C2 by K_A·s/2, C3 and C4 by |K_E − K_A|·s/2,
// with K_A = S_cache/(M·S_data) and K_E = S_cache/S_data.
func roundingBound(p Params, steps int) float64 {
	s := 1 / float64(steps)
	ps := Paths(p)
	kA := p.SCache / (p.M * p.SData)
	kE := p.SCache / p.SData
	rA, rD, rE, rV, rS := ps.Augmented.Rate, ps.Decoded.Rate, ps.Encoded.Rate, ps.NVMe.Rate, ps.Storage.Rate
	return s / 2 / p.NTotal * (kA*math.Abs(rA-rD) + kA*math.Abs(rD-rE) + math.Abs(kE-kA)*(math.Abs(rE-rV)+math.Abs(rV-rS)))
}

func TestExactSolverBeatsBruteForceWithinItsStep(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	stepsChoices := []int{10, 20, 50}
	n := 3000
	if testing.Short() {
		n = 500
	}
	for i := 0; i < n; i++ {
		p := randParams(r)
		steps := stepsChoices[i%3] // 10, 20, 50 %; the paper's 1 % every 15th set
		if i%15 == 0 {
			steps = DefaultSteps
		}
		exact, err := Solve(p)
		if err != nil {
			t.Fatal(err)
		}
		brute, err := BruteForce(p, steps)
		if err != nil {
			t.Fatal(err)
		}
		if err := exact.Split.Validate(); err != nil {
			t.Fatalf("params %+v: exact split %+v: %v", p, exact.Split, err)
		}
		tol := 1e-9 * math.Max(exact.DSI, brute.DSI)
		if exact.DSI < brute.DSI-tol {
			t.Fatalf("params %+v: exact %v (%v) below brute force %v (%v)", p, exact.DSI, exact.Split, brute.DSI, brute.Split)
		}
		if gap, bound := exact.DSI-brute.DSI, roundingBound(p, steps); gap > bound+tol {
			t.Fatalf("params %+v: brute force at 1/%d is %v below the exact optimum, more than its rounding %v", p, steps, gap, bound)
		}
		// The split reported reproduces the prediction.
		if again := Evaluate(p, exact.Split).DSI; !near(again, exact.DSI) {
			t.Fatalf("params %+v: Evaluate(exact split) = %v, Solve said %v", p, again, exact.DSI)
		}
		// No random split does better.
		for j := 0; j < 20; j++ {
			s := randSplit(r)
			if v := Evaluate(p, s).DSI; v > exact.DSI+tol {
				t.Fatalf("params %+v: split %v gives %v, above the exact optimum %v (%v)", p, s, v, exact.DSI, exact.Split)
			}
		}
	}
}

func TestAddingBudgetNeverLowersTheOptimum(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for i := 0; i < 2000; i++ {
		p := randParams(r)
		a, err := Solve(p)
		if err != nil {
			t.Fatal(err)
		}
		q := p
		q.SCache = p.SCache*(1+r.Float64()*3) + r.Float64()*p.SData*100
		b, err := Solve(q)
		if err != nil {
			t.Fatal(err)
		}
		if b.DSI < a.DSI*(1-1e-9) {
			t.Fatalf("params %+v: budget %v → %v lowered the optimum %v → %v", p, p.SCache, q.SCache, a.DSI, b.DSI)
		}
	}
}

// §6: "when the dataset is small, it is advantageous to have preprocessed
// data in the cache". When the whole dataset fits augmented and the
// augmented path is the fastest, the split is all augmented.
func TestDatasetThatFitsAugmentedIsAllAugmented(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	checked := 0
	for i := 0; i < 20000 && checked < 500; i++ {
		p := randParams(r)
		p.SCache = p.NTotal * p.M * p.SData * (1 + r.Float64()*3)
		ps := Paths(p)
		a := ps.Augmented.Rate
		if !(a > ps.Decoded.Rate && a > ps.Encoded.Rate && a > ps.NVMe.Rate && a > ps.Storage.Rate) {
			continue
		}
		checked++
		res, err := Solve(p)
		if err != nil {
			t.Fatal(err)
		}
		if e, d, aa := res.Split.Pct(); e != 0 || d != 0 || aa != 100 {
			t.Fatalf("params %+v: split %v, want 0-0-100", p, res.Split)
		}
		if !near(res.DSI, a) {
			t.Fatalf("params %+v: DSI %v, want the augmented path's %v", p, res.DSI, a)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d parameter sets had the augmented path fastest", checked)
	}
}

// §6: "for larger datasets … using an encoded cache is better". When the
// dataset is far larger than the budget and the source is the bottleneck, a
// byte of memory buys M times more samples encoded than preprocessed, and
// encoded takes the budget unless a preprocessed path gains M times more per
// sample.
func TestDatasetFarLargerThanBudgetIsMostlyEncoded(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	checked := 0
	for i := 0; i < 20000 && checked < 500; i++ {
		p := randParams(r)
		p.SNVMe = 0
		p.SCache = p.NTotal * p.SData * (0.001 + r.Float64()*0.05)
		ps := Paths(p)
		gainE := (ps.Encoded.Rate - ps.Storage.Rate) / p.SData
		gainA := (ps.Augmented.Rate - ps.Storage.Rate) / (p.M * p.SData)
		if !(ps.Storage.Bound == Storage && gainE > gainA) {
			continue
		}
		checked++
		res, err := Solve(p)
		if err != nil {
			t.Fatal(err)
		}
		if res.Split.E < 0.5 {
			t.Fatalf("params %+v: split %v, want mostly encoded", p, res.Split)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d parameter sets were storage-bound", checked)
	}
	// And with Table 5's AWS server (storage-bound at 256 MB/s) as the
	// dataset grows from half the 64 GB budget to 16 times it, the share of
	// encoded memory never falls and ends at 100 %.
	p := table5AWS()
	p.SCache = 64e9
	prev := -1.0
	for _, gb := range []float64{32, 64, 128, 256, 512, 1024} {
		p.NTotal = math.Round(gb * 1e9 / p.SData)
		res, err := Solve(p)
		if err != nil {
			t.Fatal(err)
		}
		if res.Split.E < prev-1e-9 {
			t.Errorf("AWS, %g GB: encoded share %v fell from %v", gb, res.Split.E, prev)
		}
		prev = res.Split.E
	}
	if prev != 1 {
		t.Errorf("AWS, 1 TB over 64 GB: encoded share %v, want 1", prev)
	}
}

func TestSolveWithoutMemory(t *testing.T) {
	p := hand()
	p.SCache = 0
	res, err := Solve(p)
	if err != nil {
		t.Fatal(err)
	}
	// Everything from storage: DSI_S = 1000.
	if !near(res.DSI, 1000) || res.Counts.Storage != p.NTotal {
		t.Errorf("no budget: DSI %v, counts %+v; want 1000, all from storage", res.DSI, res.Counts)
	}
}

func TestDecideForcedSplitAndSingleForms(t *testing.T) {
	p := hand()
	forced := Split{E: 0.5, D: 0.3, A: 0.2}
	d, err := Decide(p, &forced)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Forced || !near(d.Chosen.DSI, 2100) {
		t.Errorf("forced 50-30-20: %v, want 2100", d.Chosen.DSI)
	}
	if d.Optimum.DSI < d.Chosen.DSI {
		t.Errorf("optimum %v below the forced split's %v", d.Optimum.DSI, d.Chosen.DSI)
	}
	// All encoded: 1e6 samples at 1e5 B = 1e11 = the budget: all at DSI_E.
	if !near(d.AllEncoded.DSI, 3000) {
		t.Errorf("all encoded: %v, want 3000", d.AllEncoded.DSI)
	}
	// All augmented: 200000 at 2000, 800000 at 1000 → 1200.
	if !near(d.AllAugmented.DSI, 1200) {
		t.Errorf("all augmented: %v, want 1200", d.AllAugmented.DSI)
	}
	if len(d.Why()) < 4 {
		t.Errorf("Why() too short: %q", d.Why())
	}
	bad := Split{E: 0.5, D: 0.6}
	if _, err := Decide(p, &bad); err == nil {
		t.Error("Decide accepted a split summing to 1.1")
	}
	u, err := Decide(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e, dd, a := u.Chosen.Split.Pct(); e+dd+a != 100 || u.Forced {
		t.Errorf("optimum split %v-%v-%v forced=%v", e, dd, a, u.Forced)
	}
}

func BenchmarkSolve(b *testing.B) {
	p := table5InHouse()
	p.SCache, p.NTotal = 115*(1<<30), 1.3e6
	for b.Loop() {
		if _, err := Solve(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBruteForce1Pct(b *testing.B) {
	p := table5InHouse()
	p.SCache, p.NTotal = 115*(1<<30), 1.3e6
	for b.Loop() {
		if _, err := BruteForce(p, DefaultSteps); err != nil {
			b.Fatal(err)
		}
	}
}
