package model

import (
	"math"
	"testing"
)

// hand is a parameter set with round numbers, so every equation can be
// worked out by hand in the comments below.
func hand() Params {
	return Params{
		TGPU: 3000, TDA: 1500, TA: 2500,
		BPCIe: 10e9, BCache: 1e9, BStorage: 1e8, BNIC: 2e9,
		SCache: 1e11, SData: 1e5, NTotal: 1e6, M: 5,
		CPCIe: 5e5, CNw: 1e5, Nodes: 2,
		CacheRemote: true, BNVMe: Unbounded,
	}
}

func near(a, b float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

func TestEquation1AugmentedPath(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Params)
		want float64
	}{
		// cache 1e9/(5·1e5) = 2000; NIC 2·2e9/(5e5+1e5) = 6666.7;
		// PCIe 2·10e9/(5e5+5e5) = 20000; GPU 2·3000 = 6000.
		{"cache bound", func(*Params) {}, 2000},
		// GPU 2·500 = 1000 < 2000.
		{"gpu bound", func(p *Params) { p.TGPU = 500 }, 1000},
		// NIC 2·1e8/(5e5+1e5) = 333.33.
		{"nic bound", func(p *Params) { p.BNIC = 1e8 }, 2e8 / 6e5},
		// PCIe 2·1e8/(5e5+5e5) = 200.
		{"pcie bound", func(p *Params) { p.BPCIe = 1e8 }, 200},
	} {
		p := hand()
		c.edit(&p)
		if got := Eq1DSIA(p); !near(got, c.want) {
			t.Errorf("%s: DSI_A = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestEquation3DecodedPath(t *testing.T) {
	p := hand()
	// Equation 1's terms (min 2000) and n·T_A = 5000.
	if got := Eq3DSID(p); !near(got, 2000) {
		t.Errorf("DSI_D = %v, want 2000", got)
	}
	p.TA = 400 // 2·400 = 800
	if got := Eq3DSID(p); !near(got, 800) {
		t.Errorf("CPU-augment bound: DSI_D = %v, want 800", got)
	}
}

func TestEquation5EncodedPath(t *testing.T) {
	p := hand()
	// cache 1e9/1e5 = 10000; NIC 2·2e9/(1e5+1e5) = 20000; CPU 2·1500 = 3000;
	// PCIe 2·10e9/(5e5+5e5) = 20000; GPU 6000.
	if got := Eq5DSIE(p); !near(got, 3000) {
		t.Errorf("DSI_E = %v, want 3000", got)
	}
	p.BCache = 2e8 // 2e8/1e5 = 2000
	if got := Eq5DSIE(p); !near(got, 2000) {
		t.Errorf("cache bound: DSI_E = %v, want 2000", got)
	}
}

func TestEquation7StoragePath(t *testing.T) {
	p := hand()
	// min(DSI_E = 3000, 1e8/1e5 = 1000)
	if got := Eq7DSIS(p); !near(got, 1000) {
		t.Errorf("DSI_S = %v, want 1000", got)
	}
	p.BStorage = 1e9 // 10000 > DSI_E
	if got := Eq7DSIS(p); !near(got, 3000) {
		t.Errorf("DSI_S = %v, want DSI_E = 3000", got)
	}
}

func TestEquations2468SampleCounts(t *testing.T) {
	p := hand()
	// N_A = min(1e6, 0.2·1e11/5e5) = 40000
	nA := Eq2NA(p, 0.2)
	// N_D = min(1e6 − 40000, 0.3·1e11/5e5 = 60000) = 60000
	nD := Eq4ND(p, nA, 0.3)
	// N_E = min(1e6 − 100000, 0.5·1e11/1e5 = 500000) = 500000
	nE := Eq6NE(p, nA, nD, 0.5)
	// N_storage = 1e6 − 600000 = 400000
	nS := Eq8NStorage(p, nA, nD, nE)
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"N_A", nA, 40000}, {"N_D", nD, 60000}, {"N_E", nE, 500000}, {"N_storage", nS, 400000}} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// A dataset of 70000 samples: N_A = 40000, N_D = min(30000, 60000),
	// N_E = min(0, …) = 0, nothing in storage.
	p.NTotal = 70000
	nA = Eq2NA(p, 0.2)
	nD = Eq4ND(p, nA, 0.3)
	nE = Eq6NE(p, nA, nD, 0.5)
	if !near(nA, 40000) || !near(nD, 30000) || nE != 0 || Eq8NStorage(p, nA, nD, nE) != 0 {
		t.Errorf("small dataset: N_A, N_D, N_E = %v, %v, %v; want 40000, 30000, 0", nA, nD, nE)
	}
	// All of it augmented when x_A's share holds it.
	if got := Eq2NA(p, 1); got != 70000 {
		t.Errorf("N_A = %v, want N_total = 70000", got)
	}
}

func TestEquation9Overall(t *testing.T) {
	p := hand()
	// 0.04·2000 + 0.06·2000 + 0.5·3000 + 0.4·1000 = 80 + 120 + 1500 + 400.
	got := Eq9DSIOverall(p, 40000, 60000, 500000, 400000, 2000, 2000, 3000, 1000)
	if !near(got, 2100) {
		t.Errorf("DSI_overall = %v, want 2100", got)
	}
	if got := Paper(p, Split{E: 0.5, D: 0.3, A: 0.2}); !near(got, 2100) {
		t.Errorf("Paper(50-30-20) = %v, want 2100", got)
	}
	// A path that serves nothing adds nothing, even when unbounded.
	if got := Eq9DSIOverall(p, 0, 0, 1e6, 0, math.Inf(1), math.Inf(1), 3000, 1000); got != 3000 {
		t.Errorf("DSI_overall with unused unbounded paths = %v, want 3000", got)
	}
}

func TestRingAllReduceBytes(t *testing.T) {
	for _, c := range []struct {
		n     int
		bytes float64
		want  float64
	}{
		{1, 100e6, 0},     // one peer: nothing to exchange
		{2, 100e6, 100e6}, // 2·1/2
		{4, 100e6, 150e6}, // 2·3/4
		{8, 98e6, 2 * 7 / 8.0 * 98e6},
	} {
		if got := RingAllReduceBytes(c.n, c.bytes); !near(got, c.want) {
			t.Errorf("RingAllReduceBytes(%d, %g) = %g, want %g", c.n, c.bytes, got, c.want)
		}
	}
}
