package model

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// Seneca's Table 5 (performance model values) for its three servers, read
// with decimal units for rates (Gb/s = 1e9 bit/s, MB/s = 1e6 B/s) and binary
// units for sizes (114.62 KB × 1.3 M = 142 GB, Table 6's footprint, only
// when KB and GB are KiB and GiB). Table 5 gives no C_PCIe or C_nw: 0.

const kib = 1024.0

func table5InHouse() Params {
	return Params{
		TGPU: 4550, TDA: 2132, TA: 4050,
		BNIC: 10e9 / 8, BPCIe: 32e9, BCache: 10e9 / 8, BStorage: 500e6,
		SCache: 64 * (1 << 30), SData: 114.62 * kib, M: 5.12, NTotal: 1.3e6,
		Nodes: 1, CacheRemote: true, BNVMe: Unbounded,
	}
}

func table5AWS() Params {
	return Params{
		TGPU: 9989, TDA: 3432, TA: 6520,
		BNIC: 10e9 / 8, BPCIe: 32e9, BCache: 10e9 / 8, BStorage: 256e6,
		SCache: 64 * (1 << 30), SData: 114.62 * kib, M: 5.12, NTotal: 1.3e6,
		Nodes: 1, CacheRemote: true, BNVMe: Unbounded,
	}
}

func table5Azure() Params {
	return Params{
		TGPU: 14301, TDA: 9783, TA: 12930,
		BNIC: 80e9 / 8, BPCIe: 64e9, BCache: 30e9 / 8, BStorage: 250e6,
		SCache: 64 * (1 << 30), SData: 114.62 * kib, M: 5.12, NTotal: 1.3e6,
		Nodes: 1, CacheRemote: true, BNVMe: Unbounded,
	}
}

// table6 is Seneca's Table 6: datasets and the MDP splits the paper chose
// for each server (115 GB cache for the in-house servers, 400 GB for AWS
// and Azure, §7).
type table6Dataset struct {
	name    string
	samples float64
	kib     float64 // average image size
	paper   [5]string
}

var table6 = []table6Dataset{
	{"ImageNet-1K", 1.3e6, 114.62, [5]string{"58-42-0", "40-59-1", "0-81-19", "0-48-52", "0-53-47"}},
	{"OpenImages V7", 1.9e6, 315.84, [5]string{"62-37-1", "58-41-1", "52-48-0", "5-95-0", "6-93-1"}},
	{"ImageNet-22K", 14e6, 91.39, [5]string{"100-0-0", "100-0-0", "100-0-0", "100-0-0", "100-0-0"}},
}

type table6Server struct {
	name   string
	params func() Params
	nodes  int
	gib    float64
}

var table6Servers = []table6Server{
	{"1×in-house", table5InHouse, 1, 115},
	{"2×in-house", table5InHouse, 2, 115},
	{"AWS p3.8xlarge", table5AWS, 1, 400},
	{"1×Azure", table5Azure, 1, 400},
	{"2×Azure", table5Azure, 2, 400},
}

// table6Params sets a dataset on a server. Table 5's M = 5.12 is for
// ImageNet-1K; the preprocessed tensor has the same size for every dataset
// (5.12 × 114.62 KiB ≈ one 224×224×3 float32 image), so M scales inversely
// with the average encoded size.
func table6Params(srv table6Server, ds table6Dataset) Params {
	p := srv.params()
	p.Nodes = srv.nodes
	p.SCache = srv.gib * (1 << 30)
	p.SData = ds.kib * kib
	p.NTotal = ds.samples
	p.M = 5.12 * 114.62 / ds.kib
	return p
}

// TestSenecaTable6 solves Table 6's datasets on Table 5's servers, beside the
// paper's splits; run with -v to print the table of docs/model.md.
func TestSenecaTable6(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n| dataset | server | paper's split | its prediction | our split | our prediction | paths A/D/E/S (bound) | epochfs, local cache |\n|---|---|---|---|---|---|---|---|\n")
	for _, ds := range table6 {
		for i, srv := range table6Servers {
			p := table6Params(srv, ds)
			ours, err := Solve(p)
			if err != nil {
				t.Fatal(err)
			}
			paperSplit, err := ParseSplit(ds.paper[i])
			if err != nil {
				t.Fatal(err)
			}
			theirs := Evaluate(p, paperSplit)
			if theirs.DSI > ours.DSI*(1+1e-9) {
				t.Errorf("%s on %s: the paper's %s predicts %v, above our optimum %v", ds.name, srv.name, ds.paper[i], theirs.DSI, ours.DSI)
			}
			// The paper's own brute force over its own model can do no
			// better than the exact optimum either.
			brute, err := BruteForce(p, DefaultSteps)
			if err != nil {
				t.Fatal(err)
			}
			if brute.DSI > ours.DSI*(1+1e-9) {
				t.Errorf("%s on %s: brute force %v above exact %v", ds.name, srv.name, brute.DSI, ours.DSI)
			}
			lp := p
			lp.CacheRemote, lp.BCache = false, Unbounded
			local, err := Solve(lp)
			if err != nil {
				t.Fatal(err)
			}
			ps := ours.Paths
			fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %s | %.0f | %.0f (%s) / %.0f (%s) / %.0f (%s) / %.0f (%s) | %s, %.0f |\n",
				ds.name, srv.name, ds.paper[i], theirs.DSI, ours.Split, ours.DSI,
				ps.Augmented.Rate, ps.Augmented.Bound, ps.Decoded.Rate, ps.Decoded.Bound,
				ps.Encoded.Rate, ps.Encoded.Bound, ps.Storage.Rate, ps.Storage.Bound, local.Split, local.DSI)
		}
	}
	t.Log(b.String())
	// The one row where the paper's inputs are complete and its answer is
	// clear-cut: ImageNet-22K (1.2 TiB) is far larger than any cache, and
	// every server puts the whole budget in encoded form, as the paper does.
	for _, srv := range table6Servers {
		p := table6Params(srv, table6[2])
		res, err := Solve(p)
		if err != nil {
			t.Fatal(err)
		}
		if res.Split.E < 0.99 {
			t.Errorf("ImageNet-22K on %s: split %v, the paper's is 100-0-0", srv.name, res.Split)
		}
	}
}

// TestSenecaFigure8Trends checks §6's reading of Figure 8 on Table 5's
// servers with the 64 GB cache, with the paper's remote cache and with
// epochfs's local one: the optimum is never below any of Figure 8's six
// splits; on a dataset that fits the budget even preprocessed,
// augmented-only beats encoded-only exactly when the augmented path is the
// faster (the red lines); on one far larger than the budget, encoded-only
// beats augmented-only exactly when a byte of memory gains more encoded,
// (DSI_E − DSI_S)/S_data ≥ (DSI_A − DSI_S)/(M·S_data) (the blue lines).
// Run with -v for the numbers.
func TestSenecaFigure8Trends(t *testing.T) {
	splits := []string{"100-0-0", "0-100-0", "0-0-100", "50-50-0", "50-0-50", "0-50-50"}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| server | cache | dataset GiB | %s | optimum |\n|---|---|---|%s---|\n", strings.Join(splits, " | "), strings.Repeat("---|", len(splits)))
	small, large := 0, 0
	for _, remote := range []bool{true, false} {
		where := map[bool]string{true: "remote", false: "local"}[remote]
		for _, srv := range []struct {
			name string
			p    Params
		}{{"in-house", table5InHouse()}, {"AWS", table5AWS()}, {"Azure", table5Azure()}} {
			for _, gb := range []float64{8, 32, 64, 128, 256, 512} {
				p := srv.p
				p.CacheRemote = remote
				if !remote {
					p.BCache = Unbounded // the node's own RAM
				}
				p.NTotal = math.Round(gb * (1 << 30) / p.SData)
				opt, err := Solve(p)
				if err != nil {
					t.Fatal(err)
				}
				var cells []string
				single := map[string]float64{}
				for _, s := range splits {
					sp, err := ParseSplit(s)
					if err != nil {
						t.Fatal(err)
					}
					v := Evaluate(p, sp).DSI
					if v > opt.DSI*(1+1e-9) {
						t.Errorf("%s %s %g GiB: %s predicts %v above the optimum %v", srv.name, where, gb, s, v, opt.DSI)
					}
					single[s] = v
					cells = append(cells, fmt.Sprintf("%.0f", v))
				}
				fmt.Fprintf(&b, "| %s | %s | %g | %s | %.0f (%s) |\n", srv.name, where, gb, strings.Join(cells, " | "), opt.DSI, opt.Split)
				ps := Paths(p)
				if gb == 8 { // fits the budget even preprocessed (8 × 5.12 < 64)
					small++
					if (single["0-0-100"] > single["100-0-0"]) != (ps.Augmented.Rate > ps.Encoded.Rate) {
						t.Errorf("%s %s 8 GiB: augmented-only %v vs encoded-only %v, but paths %v vs %v", srv.name, where,
							single["0-0-100"], single["100-0-0"], ps.Augmented.Rate, ps.Encoded.Rate)
					}
				}
				if gb == 512 { // far larger than the budget in any form
					large++
					gainE := (ps.Encoded.Rate - ps.Storage.Rate) / p.SData
					gainA := (ps.Augmented.Rate - ps.Storage.Rate) / (p.M * p.SData)
					if (single["100-0-0"] >= single["0-0-100"]) != (gainE >= gainA) {
						t.Errorf("%s %s 512 GiB: encoded-only %v vs augmented-only %v, but gains per byte %v vs %v", srv.name, where,
							single["100-0-0"], single["0-0-100"], gainE, gainA)
					}
				}
			}
		}
	}
	if small == 0 || large == 0 {
		t.Errorf("trend checks ran %d (small) and %d (large) times, want both > 0", small, large)
	}
	t.Log(b.String())
}
