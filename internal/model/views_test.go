package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// viewsBase is one job on one node with every bandwidth unbounded: the
// CPU alone bounds it.
func viewsBase() Params {
	return Params{
		Views: true, Jobs: 1, Nodes: 1,
		TGPU: Unbounded, TDA: 1000, TA: 4000,
		BPCIe: Unbounded, BCache: Unbounded, BStorage: Unbounded, BNIC: Unbounded, BNVMe: Unbounded,
		SData: 100e3, NTotal: 1000, M: 5, MA: 1.5, SCache: 1e9, Window: 100,
	}
}

func TestViewsHandWorked(t *testing.T) {
	for _, c := range []struct {
		name  string
		set   func(p *Params)
		split Split
		want  float64
		bound Component
	}{
		{"encoded: every sample decoded and augmented", nil, AllEncoded, 1000, CPU},
		// Half the dataset decoded: 500/4000 + 500/1000 s per epoch.
		{"half decoded", func(p *Params) { p.SCache = 500 * 5 * 100e3 }, AllDecoded, 1000 / (0.5/4 + 0.5), CPU},
		{"all decoded", nil, AllDecoded, 4000, CPU},
		// Augmented memory is no cache: one job still makes every sample.
		{"augmented, one job", nil, AllAugmented, 1000, CPU},
		// Three jobs sharing every production: 3000 deliveries per 1000 made.
		{"augmented, three jobs", func(p *Params) { p.Jobs = 3 }, AllAugmented, 3000, CPU},
		// Three jobs, no augmented memory: each makes its own.
		{"three jobs, no augmented memory", func(p *Params) { p.Jobs = 3 }, AllEncoded, 1000, CPU},
		// N_A = W/2: half shared, P = 1000·(0.5 + 1.5) = 2000 per 3000 delivered.
		{"three jobs, half the window", func(p *Params) { p.Jobs = 3; p.SCache = 50 * 1.5 * 100e3 }, AllAugmented, 1500, CPU},
		// Ingestion on the same CPUs: 1/1000 + 1/2000 s per sample.
		{"ingest on CPU", func(p *Params) { p.TGPU = 2000; p.IngestOnCPU = true }, AllEncoded, 1 / (1.0/1000 + 1.0/2000), CPU},
		{"ingest on a GPU", func(p *Params) { p.TGPU = 2000 }, AllEncoded, 1000, CPU},
		{"slow GPU", func(p *Params) { p.TGPU = 500 }, AllEncoded, 500, GPU},
		// The source: 1000 samples × 100 kB at 50 MB/s takes 2 s.
		{"source bound", func(p *Params) { p.SCache = 0; p.BStorage = 50e6 }, AllEncoded, 500, Storage},
		// Half in memory, half from the source at 25 MB/s: 500 × 100 kB / 25e6 = 2 s.
		{"half from the source", func(p *Params) { p.SCache = 500 * 100e3; p.BStorage = 25e6 }, AllEncoded, 500, Storage},
		// An NVMe tier takes what memory does not hold.
		{"nvme", func(p *Params) { p.SCache = 0; p.SNVMe = 1e12; p.BNVMe = 20e6; p.BStorage = 1 }, AllEncoded, 200, NVMeTier},
		// PCIe carries every delivered tensor: 150 kB × 1000 / 75 MB/s = 2 s.
		{"pcie", func(p *Params) { p.BPCIe = 75e6 }, AllEncoded, 500, PCIe},
		// Decoded reads from memory: 1000 × 500 kB / 1 GB/s, and 1000 × 150 kB delivered.
		{"memory bandwidth", func(p *Params) { p.BCache = 1e9; p.TA = Unbounded }, AllDecoded, 1000 / (0.5 + 0.15), Cache},
	} {
		p := viewsBase()
		if c.set != nil {
			c.set(&p)
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r := Evaluate(p, c.split)
		if !near(r.DSI, c.want) || r.Views == nil || r.Views.Bound != c.bound {
			b := Component("")
			if r.Views != nil {
				b = r.Views.Bound
			}
			t.Errorf("%s: DSI %v bound %s, want %v bound %s", c.name, r.DSI, b, c.want, c.bound)
		}
	}
}

func TestViewsValidate(t *testing.T) {
	for name, set := range map[string]func(p *Params){
		"remote cache": func(p *Params) { p.CacheRemote = true },
		"jobs":         func(p *Params) { p.Jobs = -1 },
		"M_A":          func(p *Params) { p.MA = math.NaN() },
		"W":            func(p *Params) { p.Window = math.Inf(1) },
		"unbounded":    func(p *Params) { p.TDA = Unbounded },
	} {
		p := viewsBase()
		set(&p)
		if err := p.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func randViewsParams(r *rand.Rand) Params {
	for {
		p := randParams(r)
		p.Views, p.CacheRemote = true, false
		p.Jobs = 1 + r.IntN(4)
		p.MA = p.M * (0.1 + r.Float64())
		p.Window = float64(r.IntN(2000))
		p.IngestOnCPU = r.IntN(2) == 0
		p.TA = math.Max(p.TA, p.TDA) // augmenting a decoded sample costs no more than decoding it too
		if p.Validate() == nil {
			return p
		}
	}
}

// The search finds the best split of a finer grid, within a small
// tolerance, and no random split beats it by more.
func TestViewsSolverAgainstAFinerGrid(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	n := 300
	if testing.Short() {
		n = 60
	}
	for i := 0; i < n; i++ {
		p := randViewsParams(r)
		best, err := Solve(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := best.Split.Validate(); err != nil {
			t.Fatalf("split %+v: %v", best.Split, err)
		}
		if again := Evaluate(p, best.Split).DSI; !near(again, best.DSI) {
			t.Fatalf("Evaluate(best split) = %v, Solve said %v", again, best.DSI)
		}
		grid, err := BruteForce(p, 200)
		if err != nil {
			t.Fatal(err)
		}
		if best.DSI < grid.DSI*(1-1e-3) {
			t.Fatalf("params %+v: solver %v (%v) below the 0.5 %% grid's %v (%v)", p, best.DSI, best.Split, grid.DSI, grid.Split)
		}
		for j := 0; j < 20; j++ {
			s := randSplit(r)
			if v := Evaluate(p, s).DSI; v > best.DSI*(1+1e-3) {
				t.Fatalf("params %+v: split %v gives %v, above the solver's %v (%v)", p, s, v, best.DSI, best.Split)
			}
		}
	}
}

// More memory never lowers the optimum (a given split may lose: decoded
// samples are more bytes to read than encoded ones on a node bound by its
// memory bandwidth, but the best split need not use them).
func TestViewsMoreMemoryNeverLowersTheOptimum(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for i := 0; i < 100; i++ {
		p := randViewsParams(r)
		a, err := Solve(p)
		if err != nil {
			t.Fatal(err)
		}
		p.SCache *= 1.5
		b, err := Solve(p)
		if err != nil {
			t.Fatal(err)
		}
		if b.DSI < a.DSI*(1-1e-3) {
			t.Fatalf("params %+v: %v (%v) with more memory, %v (%v) before", p, b.DSI, b.Split, a.DSI, a.Split)
		}
	}
}

func TestViewsSplitsFollowTheRules(t *testing.T) {
	// One job, a dataset that fits decoded: decode it all; augmented
	// memory buys one job nothing.
	p := viewsBase()
	p.SCache = 1000*5*100e3 + 1000*100e3
	r, err := Solve(p)
	if err != nil {
		t.Fatal(err)
	}
	if r.Counts.Decoded < 1000-1e-6 || !near(r.DSI, 4000) {
		t.Errorf("one job: %v decoded, DSI %v; want all 1000 decoded at 4000", r.Counts.Decoded, r.DSI)
	}
	// Three jobs: a window's worth of augmented memory, the rest decoded.
	p.Jobs = 3
	r, err = Solve(p)
	if err != nil {
		t.Fatal(err)
	}
	if r.Views.Shared < 1-1e-9 || r.Counts.Decoded < 990 {
		t.Errorf("three jobs: shared %v, %v decoded (split %v)", r.Views.Shared, r.Counts.Decoded, r.Split)
	}
	if r.Split.A*p.SCache > 2*100*1.5*100e3 {
		t.Errorf("three jobs: %v bytes of augmented memory for a window of %v", r.Split.A*p.SCache, 100*1.5*100e3)
	}
}

func BenchmarkSolveViews(b *testing.B) {
	p := viewsBase()
	p.Jobs, p.NTotal, p.SCache, p.IngestOnCPU, p.TGPU = 3, 1.3e6, 115*(1<<30), true, 5000
	for b.Loop() {
		if _, err := Solve(p); err != nil {
			b.Fatal(err)
		}
	}
}
