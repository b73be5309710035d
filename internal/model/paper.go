package model

import "math"

// This file is Seneca §5.1 exactly as printed: one function per equation, in
// the paper's notation. S_mem in equations 2, 4 and 6 is Params.SCache. The
// paper's setting is a remote cache shared by n nodes, so these functions
// ignore CacheRemote and the NVMe tier; the extension in extend.go adds them.
// Equation 3 as printed lacks a comma between its PCIe and GPU terms; it is
// read as a five-way minimum.

// Eq1DSIA is equation 1: the DSI throughput of augmented samples read from
// the cache.
//
//	DSI_A = min(B_cache/(M·S_data), n·B_NIC/(M·S_data + C_nw),
//	            n·B_PCIe/(M·S_data + C_PCIe), n·T_GPU)
func Eq1DSIA(p Params) float64 {
	n := float64(p.Nodes)
	t := p.M * p.SData
	return math.Min(math.Min(p.BCache/t, n*p.BNIC/(t+p.CNw)),
		math.Min(n*p.BPCIe/(t+p.CPCIe), n*p.TGPU))
}

// Eq2NA is equation 2: the number of augmented samples in a partition of
// xA × S_mem bytes.
//
//	N_A = min(N_total, x_A·S_mem/(M·S_data))
func Eq2NA(p Params, xA float64) float64 {
	return math.Min(p.NTotal, xA*p.SCache/(p.M*p.SData))
}

// Eq3DSID is equation 3: the DSI throughput of decoded samples read from the
// cache and augmented on the node's CPUs.
//
//	DSI_D = min(B_cache/(M·S_data), n·B_NIC/(M·S_data + C_nw), n·T_A,
//	            n·B_PCIe/(M·S_data + C_PCIe), n·T_GPU)
func Eq3DSID(p Params) float64 {
	n := float64(p.Nodes)
	t := p.M * p.SData
	return math.Min(math.Min(math.Min(p.BCache/t, n*p.BNIC/(t+p.CNw)), n*p.TA),
		math.Min(n*p.BPCIe/(t+p.CPCIe), n*p.TGPU))
}

// Eq4ND is equation 4: the number of decoded samples in a partition of
// xD × S_mem bytes, given N_A.
//
//	N_D = min(N_total − N_A, x_D·S_mem/(M·S_data))
func Eq4ND(p Params, nA, xD float64) float64 {
	return math.Min(p.NTotal-nA, xD*p.SCache/(p.M*p.SData))
}

// Eq5DSIE is equation 5: the DSI throughput of encoded samples read from the
// cache, decoded and augmented on the node's CPUs.
//
//	DSI_E = min(B_cache/S_data, n·B_NIC/(S_data + C_nw), n·T_D+A,
//	            n·B_PCIe/(M·S_data + C_PCIe), n·T_GPU)
func Eq5DSIE(p Params) float64 {
	n := float64(p.Nodes)
	return math.Min(math.Min(math.Min(p.BCache/p.SData, n*p.BNIC/(p.SData+p.CNw)), n*p.TDA),
		math.Min(n*p.BPCIe/(p.M*p.SData+p.CPCIe), n*p.TGPU))
}

// Eq6NE is equation 6: the number of encoded samples in a partition of
// xE × S_mem bytes, given N_A and N_D.
//
//	N_E = min(N_total − (N_A + N_D), x_E·S_mem/S_data)
func Eq6NE(p Params, nA, nD, xE float64) float64 {
	return math.Min(p.NTotal-(nA+nD), xE*p.SCache/p.SData)
}

// Eq7DSIS is equation 7: the DSI throughput of samples fetched from storage.
//
//	DSI_S = min(DSI_E, B_storage/S_data)
func Eq7DSIS(p Params) float64 {
	return math.Min(Eq5DSIE(p), p.BStorage/p.SData)
}

// Eq8NStorage is equation 8: the number of samples only in storage.
//
//	N_storage = N_total − N_A − N_D − N_E
func Eq8NStorage(p Params, nA, nD, nE float64) float64 {
	return p.NTotal - nA - nD - nE
}

// Eq9DSIOverall is equation 9: the overall DSI throughput, each path's
// throughput weighted by the fraction of samples it serves.
//
//	DSI_overall = N_A/N_total·DSI_A + N_D/N_total·DSI_D
//	            + N_E/N_total·DSI_E + N_storage/N_total·DSI_S
//
// A path that serves no sample adds nothing, even if it is unbounded.
func Eq9DSIOverall(p Params, nA, nD, nE, nS, dsiA, dsiD, dsiE, dsiS float64) float64 {
	return weighted(p.NTotal, []float64{nA, nD, nE, nS}, []float64{dsiA, dsiD, dsiE, dsiS})
}

// weighted is Σ n_i/total × r_i over the terms with n_i > 0.
func weighted(total float64, n, r []float64) float64 {
	var sum float64
	for i := range n {
		if n[i] > 0 {
			sum += n[i] / total * r[i]
		}
	}
	return sum
}

// Paper evaluates equations 1–9 for the split s: the paper's model, with no
// NVMe tier and a remote cache whatever p says.
func Paper(p Params, s Split) float64 {
	nA := Eq2NA(p, s.A)
	nD := Eq4ND(p, nA, s.D)
	nE := Eq6NE(p, nA, nD, s.E)
	nS := Eq8NStorage(p, nA, nD, nE)
	return Eq9DSIOverall(p, nA, nD, nE, nS, Eq1DSIA(p), Eq3DSID(p), Eq5DSIE(p), Eq7DSIS(p))
}
