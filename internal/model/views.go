package model

import "math"

// The views extension: the model of epochfs's own caches (Params.Views).
//
// Seneca's equations count an augmented sample in the cache as a sample
// served for free. Its own sampling rule (§5.2) forbids that: an augmented
// tensor is never reused across epochs, so every sample a job trains on in
// an epoch was augmented in that epoch, cached or not. What the augmented
// memory buys is sharing: K jobs with one pipeline take each augmentation
// once each, so one production serves K deliveries, as long as a
// production can wait in memory until the last of them takes it. The
// engine (preprocess.Engine) follows these rules, and so does this model:
//
//   - N_D = min(N, x_D·S/(M·S_data)) samples are decoded in memory (filled
//     in the first epoch and kept); making one of them costs an augment
//     (T_A), any other sample a decode and an augment (T_D+A) and a read of
//     its encoded bytes: from memory for N_E = min(N, x_E·S/S_data) of
//     them, from the NVMe tier for the next S_nvme/S_data, else from the
//     source.
//   - N_A = min(N, x_A·S/(M_A·S_data)) augmented samples fit in memory at
//     once. The jobs share a fraction φ = min(1, N_A/W) of the productions,
//     W (Params.Window) being what they need to wait in memory for all K
//     jobs; the rest is made once per job. So an epoch of the K jobs makes
//     P = N·(φ + K·(1−φ)) samples and delivers K·N.
//   - Each resource's busy time in an epoch is its work over its rate:
//     CPU P·(d/T_A + (1−d)/T_D+A) (d = N_D/N), ingestion K·N/T_GPU, PCIe
//     K·N·(M_A·S_data + C_PCIe)/B_PCIe, memory bandwidth (every tensor
//     delivered, every decoded sample read, every encoded sample read
//     wherever it comes from: it lands in memory on its way), the NVMe
//     tier, the source (shared by the nodes), the NIC. The pipeline
//     overlaps them, so the epoch takes as long as the busiest, and
//
//     DSI = K·N / max(busy times)     (samples/s, all K jobs)
//
//   - With Params.IngestOnCPU (no GPU: the jobs' own processes run on the
//     CPUs that preprocess) ingestion and preprocessing are one resource,
//     and their busy times add.
//
// The throughput is not linear in the split (φ and the decoded share
// multiply), so MDP searches it: every split on the paper's 1 % grid, then
// a 0.05 % grid around the best one (solveViews).

// CPU is the node's CPUs in the views extension: preprocessing, and the
// jobs' ingestion too with Params.IngestOnCPU.
const CPU Component = "cpu"

// viewsState is what a split means under the views rules.
type viewsState struct {
	counts      Counts
	shared      float64 // φ
	productions float64 // per sample and epoch: φ + K(1−φ)
	res         [7]resTime
	delivered   float64
	dsi         float64
	bound       Component
}

// window is W in samples.
func window(p Params) float64 {
	if p.Window > 0 {
		return p.Window
	}
	return 1
}

func jobs(p Params) float64 { return float64(max(p.Jobs, 1)) }

// augmentedInflation is M_A.
func augmentedInflation(p Params) float64 {
	if p.MA > 0 {
		return p.MA
	}
	return p.M
}

func views(p Params, s Split) viewsState {
	var v viewsState
	nt, k, n := p.NTotal, jobs(p), float64(p.Nodes)
	ma := augmentedInflation(p)
	c := &v.counts
	c.Decoded = math.Min(nt, s.D*p.SCache/(p.M*p.SData))
	c.Augmented = math.Min(nt, s.A*p.SCache/(ma*p.SData))
	c.Encoded = math.Min(nt, s.E*p.SCache/p.SData)
	c.NVMe = math.Max(0, math.Min(nt-c.Encoded, p.SNVMe/p.SData))
	c.Storage = math.Max(0, nt-c.Encoded-c.NVMe)
	v.shared = 1
	if k > 1 {
		v.shared = math.Min(1, c.Augmented/window(p))
	}
	v.productions = v.shared + k*(1-v.shared)
	d := c.Decoded / nt
	prod := nt * v.productions   // samples made per epoch
	reads := prod * (1 - d) / nt // encoded reads per epoch, per sample of each place
	delivered := k * nt

	busy := func(work, rate float64) float64 {
		if work <= 0 {
			return 0
		}
		return work / rate
	}
	cpu := busy(prod*d, n*p.TA) + busy(prod*(1-d), n*p.TDA)
	ingest := busy(delivered, n*p.TGPU)
	v.res = [...]resTime{
		// Memory: every tensor delivered, every decoded sample read, and
		// every encoded sample read, wherever it comes from (it lands in
		// memory on its way to the decoder).
		{Cache, busy(delivered*ma*p.SData+prod*d*p.M*p.SData+prod*(1-d)*p.SData, n*p.BCache)},
		{NVMeTier, busy(reads*c.NVMe*p.SData, n*p.BNVMe)},
		{Storage, busy(reads*c.Storage*p.SData, p.BStorage)},
		{NIC, busy(reads*c.Storage*p.SData+delivered*p.CNw, n*p.BNIC)},
		{PCIe, busy(delivered*(ma*p.SData+p.CPCIe), n*p.BPCIe)},
		{CPU, cpu},
		{GPU, ingest},
	}
	if p.IngestOnCPU {
		v.res[5].time += ingest
		v.res[6] = resTime{c: None}
	}
	v.bound = None
	longest := 0.0
	for _, r := range v.res {
		if r.time > longest {
			longest, v.bound = r.time, r.c
		}
	}
	v.dsi = math.Inf(1)
	if longest > 0 {
		v.dsi = delivered / longest
	}
	v.delivered = delivered
	return v
}

type resTime struct {
	c    Component
	time float64 // busy seconds per epoch
}

// terms are the samples/s each resource allows.
func (v *viewsState) terms() []Term {
	var out []Term
	for _, r := range v.res {
		if r.c == None {
			continue
		}
		rate := math.Inf(1)
		if r.time > 0 {
			rate = v.delivered / r.time
		}
		out = append(out, Term{r.c, rate})
	}
	return out
}

// evaluateViews is Evaluate under the views rules.
func evaluateViews(p Params, s Split) Result {
	v := views(p, s)
	return Result{Split: s, Counts: v.counts, Paths: Paths(p), DSI: v.dsi,
		Views: &ViewsResult{Jobs: max(p.Jobs, 1), Shared: v.shared, Productions: v.productions, Resources: v.terms(), Bound: v.bound}}
}

// ViewsResult is what the views rules add to a Result.
type ViewsResult struct {
	Jobs int
	// Shared is φ, the fraction of productions every job shares;
	// Productions the samples made per sample and epoch for all the jobs
	// (1: each once; Jobs: each once per job).
	Shared, Productions float64
	// Resources are the samples/s (all jobs) each resource allows; Bound
	// is the busiest.
	Resources []Term
	Bound     Component
}

// solveViews is MDP under the views rules: the 1 % grid, then 0.05 %
// steps within 1 % of its best split.
func solveViews(p Params) Result {
	best, bestDSI := Split{E: 1}, math.Inf(-1)
	try := func(e, d float64) {
		if e < -1e-12 || d < -1e-12 || e+d > 1+1e-12 {
			return
		}
		e, d = math.Max(0, e), math.Max(0, d)
		s := Split{E: e, D: d, A: math.Max(0, 1-e-d)}
		if v := views(p, s).dsi; betterSplit(v, s, bestDSI, best) {
			best, bestDSI = s, v
		}
	}
	const coarse = 100
	for i := coarse; i >= 0; i-- {
		for j := coarse - i; j >= 0; j-- {
			try(float64(i)/coarse, float64(j)/coarse)
		}
	}
	e0, d0 := best.E, best.D
	const fine, span = 2000, 20 // 0.05 % steps, ±1 %
	for i := span; i >= -span; i-- {
		for j := span; j >= -span; j-- {
			try(e0+float64(i)/fine, d0+float64(j)/fine)
		}
	}
	return evaluateViews(p, best)
}

// betterSplit is better() on a split and its DSI.
func betterSplit(dsi float64, s Split, bestDSI float64, best Split) bool {
	return better(Result{Split: s, DSI: dsi}, Result{Split: best, DSI: bestDSI})
}
