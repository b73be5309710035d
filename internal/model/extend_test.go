package model

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// randParams draws a valid parameter set that covers every regime: each
// throughput spans several orders of magnitude or is unbounded, the dataset
// ranges from a sliver to many times the budget, with and without an NVMe
// tier, local or remote cache, one to eight nodes.
func randParams(r *rand.Rand) Params {
	logU := func(lo, hi float64) float64 { return math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo))) }
	maybeInf := func(v float64) float64 {
		if r.IntN(5) == 0 {
			return Unbounded
		}
		return v
	}
	for {
		p := Params{
			TGPU:        maybeInf(logU(100, 50000)),
			TDA:         maybeInf(logU(100, 50000)),
			TA:          maybeInf(logU(100, 50000)),
			BPCIe:       maybeInf(logU(1e9, 1e11)),
			BCache:      maybeInf(logU(1e8, 1e11)),
			BStorage:    logU(1e7, 1e10),
			BNIC:        maybeInf(logU(1e8, 1e11)),
			SData:       logU(1e4, 1e6),
			NTotal:      math.Round(logU(1e3, 1e8)),
			M:           logU(1, 10),
			Nodes:       1 + r.IntN(8),
			CacheRemote: r.IntN(2) == 0,
			BNVMe:       maybeInf(logU(1e8, 1e10)),
		}
		if r.IntN(3) == 0 {
			p.CPCIe = logU(1e3, 1e7)
		}
		if r.IntN(3) == 0 {
			p.CNw = logU(1e3, 1e7)
		}
		data := p.NTotal * p.SData
		p.SCache = data * logU(0.005, 20)
		if r.IntN(10) == 0 {
			p.SCache = 0
		}
		if r.IntN(2) == 0 {
			p.SNVMe = data * logU(0.01, 3)
		}
		if p.Validate() == nil {
			return p
		}
	}
}

func randSplit(r *rand.Rand) Split {
	a, b := r.Float64(), r.Float64()
	if a > b {
		a, b = b, a
	}
	return Split{E: a, D: b - a, A: 1 - b}
}

func TestTierExtensionReducesToPaperWithoutNVMe(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 3000; i++ {
		p := randParams(r)
		p.CacheRemote = true
		p.SNVMe = 0
		s := randSplit(r)
		got, want := Evaluate(p, s).DSI, Paper(p, s)
		if !near(got, want) {
			t.Fatalf("params %+v split %v: extended model %v, paper's %v", p, s, got, want)
		}
		ps := Paths(p)
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"DSI_A", ps.Augmented.Rate, Eq1DSIA(p)}, {"DSI_D", ps.Decoded.Rate, Eq3DSID(p)},
			{"DSI_E", ps.Encoded.Rate, Eq5DSIE(p)}, {"DSI_S", ps.Storage.Rate, Eq7DSIS(p)},
		} {
			if !near(c.got, c.want) {
				t.Fatalf("params %+v: %s = %v, paper's %v", p, c.name, c.got, c.want)
			}
		}
	}
}

func TestLocalCacheHand(t *testing.T) {
	p := hand()
	p.CacheRemote = false
	p.BNVMe = 2e8
	p.SNVMe = 3e10 // 300000 samples
	ps := Paths(p)
	for _, c := range []struct {
		path  Path
		want  float64
		bound Component
	}{
		// local cache: 2·1e9/5e5 = 4000, no NIC; PCIe 20000; GPU 6000.
		{ps.Augmented, 4000, Cache},
		// + CPU augment 2·2500 = 5000.
		{ps.Decoded, 4000, Cache},
		// cache 2·1e9/1e5 = 20000; CPU decode+augment 3000.
		{ps.Encoded, 3000, CPUDecodeAugment},
		// min(DSI_E, 2·2e8/1e5 = 4000).
		{ps.NVMe, 3000, CPUDecodeAugment},
		// min(DSI_E, 1e8/1e5 = 1000, NIC 2·2e9/2e5 = 20000).
		{ps.Storage, 1000, Storage},
	} {
		if !near(c.path.Rate, c.want) || c.path.Bound != c.bound {
			t.Errorf("%s path: %v bound by %s, want %v bound by %s", c.path.Name, c.path.Rate, c.path.Bound, c.want, c.bound)
		}
	}
	p.BNVMe = 5e7 // 2·5e7/1e5 = 1000
	if np := Paths(p).NVMe; !near(np.Rate, 1000) || np.Bound != NVMeTier {
		t.Errorf("slow NVMe path: %v bound by %s, want 1000 by nvme", np.Rate, np.Bound)
	}
	p.BNVMe = 2e8
	// 50-30-20: N_A 40000, N_D 60000, N_E 500000, then 300000 on NVMe,
	// 100000 on the source:
	// (40000·4000 + 60000·4000 + 500000·3000 + 300000·3000 + 100000·1000)/1e6
	// = 160 + 240 + 1500 + 900 + 100 = 2900.
	res := Evaluate(p, Split{E: 0.5, D: 0.3, A: 0.2})
	c := res.Counts
	if !near(c.Augmented, 40000) || !near(c.Decoded, 60000) || !near(c.Encoded, 500000) || !near(c.NVMe, 300000) || !near(c.Storage, 100000) {
		t.Errorf("counts %+v, want 40000/60000/500000/300000/100000", c)
	}
	if !near(res.DSI, 2900) {
		t.Errorf("DSI = %v, want 2900", res.DSI)
	}
	if len(res.Used()) != 5 {
		t.Errorf("used paths %d, want 5", len(res.Used()))
	}
}

func TestNVMePathNeverFasterThanEncodedMemoryPath(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		p := randParams(r)
		ps := Paths(p)
		if ps.NVMe.Rate > ps.Encoded.Rate || ps.Storage.Rate > ps.Encoded.Rate || ps.Decoded.Rate > ps.Augmented.Rate {
			t.Fatalf("params %+v: paths %v/%v/%v/%v/%v out of order", p,
				ps.Augmented.Rate, ps.Decoded.Rate, ps.Encoded.Rate, ps.NVMe.Rate, ps.Storage.Rate)
		}
	}
}

func TestOverallNeverExceedsTheBoundsOfThePathsItUses(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 3000; i++ {
		p := randParams(r)
		s := randSplit(r)
		res := Evaluate(p, s)
		used := res.Used()
		if len(used) == 0 {
			t.Fatalf("params %+v split %v: no path used", p, s)
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, u := range used {
			lo, hi = math.Min(lo, u.Rate), math.Max(hi, u.Rate)
			for _, term := range u.Terms {
				if u.Rate > term.Rate {
					t.Fatalf("path %s: rate %v above its %s term %v", u.Name, u.Rate, term.Component, term.Rate)
				}
			}
		}
		tol := 1e-9 * hi
		if res.DSI > hi+tol || res.DSI < lo-tol {
			t.Fatalf("params %+v split %v: DSI %v outside the used paths' rates [%v, %v]", p, s, res.DSI, lo, hi)
		}
		// Bounds every path shares: the GPUs and PCIe.
		n := float64(p.Nodes)
		if res.DSI > n*p.TGPU*(1+1e-12) || res.DSI > n*p.BPCIe/(p.M*p.SData+p.CPCIe)*(1+1e-12) {
			t.Fatalf("params %+v: DSI %v above the GPU or PCIe bound", p, res.DSI)
		}
		c := res.Counts
		if sum := c.Augmented + c.Decoded + c.Encoded + c.NVMe + c.Storage; math.Abs(sum-p.NTotal) > 1e-6*p.NTotal {
			t.Fatalf("counts %+v sum to %v, want N_total %v", c, sum, p.NTotal)
		}
		if mem := p.M*p.SData*(c.Augmented+c.Decoded) + p.SData*c.Encoded; mem > p.SCache*(1+1e-9) {
			t.Fatalf("counts %+v use %v bytes of a %v budget", c, mem, p.SCache)
		}
	}
}

func TestValidateNamesTheBadField(t *testing.T) {
	for _, c := range []struct {
		edit func(*Params)
		name string
	}{
		{func(p *Params) { p.TGPU = -1 }, "T_GPU"},
		{func(p *Params) { p.TDA = math.NaN() }, "T_D+A"},
		{func(p *Params) { p.TA = 0 }, "T_A"},
		{func(p *Params) { p.BPCIe = -5 }, "B_PCIe"},
		{func(p *Params) { p.BCache = math.NaN() }, "B_cache"},
		{func(p *Params) { p.BStorage = 0 }, "B_storage"},
		{func(p *Params) { p.BNIC = -1 }, "B_NIC"},
		{func(p *Params) { p.BNVMe = math.NaN() }, "B_nvme"},
		{func(p *Params) { p.SCache = -1 }, "S_cache"},
		{func(p *Params) { p.SCache = math.Inf(1) }, "S_cache"},
		{func(p *Params) { p.SData = 0 }, "S_data"},
		{func(p *Params) { p.SData = math.NaN() }, "S_data"},
		{func(p *Params) { p.NTotal = 0 }, "N_total"},
		{func(p *Params) { p.M = 0 }, "M"},
		{func(p *Params) { p.CPCIe = -1 }, "C_PCIe"},
		{func(p *Params) { p.CNw = math.NaN() }, "C_nw"},
		{func(p *Params) { p.SNVMe = -1 }, "S_nvme"},
		{func(p *Params) { p.Nodes = 0 }, "n = 0"},
		{func(p *Params) { p.TGPU, p.BPCIe, p.BCache, p.BNIC = Unbounded, Unbounded, Unbounded, Unbounded }, "augmented path is unbounded"},
	} {
		p := hand()
		c.edit(&p)
		err := p.Validate()
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("Validate() = %v, want an ErrInvalid naming %q", err, c.name)
		}
		if _, err := Solve(p); err == nil {
			t.Errorf("Solve accepted bad input (%s)", c.name)
		}
		if _, err := BruteForce(p, 10); err == nil {
			t.Errorf("BruteForce accepted bad input (%s)", c.name)
		}
	}
	if err := hand().Validate(); err != nil {
		t.Errorf("hand-made parameters rejected: %v", err)
	}
}
