package model

import "math"

// The tier extension. A sample reaches the GPU along one of five paths:
//
//	augmented  memory cache → (NIC) → PCIe → GPU                      eq. 1
//	decoded    memory cache → (NIC) → CPU augment → PCIe → GPU        eq. 3
//	encoded    memory cache → (NIC) → CPU decode+augment → PCIe → GPU eq. 5
//	nvme       NVMe tier → everything the encoded path crosses        new
//	storage    source → NIC → everything the encoded path crosses     eq. 7
//
// The NIC terms of the first three apply only when the cache is remote
// (Params.CacheRemote, the paper's setting). A local cache is per node, so
// its bandwidth is multiplied by n like the other per-node terms. The NVMe
// and storage paths are bounded by the encoded path, as the paper's eq. 7
// bounds the storage path by DSI_E: every sample the job reads passes the
// same memory and serving path on its way. So the NVMe path is
// min(DSI_E, n·B_nvme/S_data) and the storage path is
// min(DSI_E, B_storage/S_data, n·B_NIC/(S_data + C_nw)); with a remote cache
// the NIC term is already in DSI_E and the storage path is eq. 7 exactly.
//
// The NVMe tier holds encoded samples that are not in memory, up to
// S_nvme/S_data of them; the rest are only on the source. With S_nvme = 0
// and a remote cache, Evaluate is equations 1–9.

// Component is the hardware a bound belongs to.
type Component string

// The components that can bound a path.
const (
	Cache            Component = "cache"
	NIC              Component = "nic"
	PCIe             Component = "pcie"
	CPUAugment       Component = "cpu_augment"
	CPUDecodeAugment Component = "cpu_decode_augment"
	GPU              Component = "gpu"
	Storage          Component = "storage"
	NVMeTier         Component = "nvme"
	None             Component = "unbounded"
)

// Term is one bound on a path: the throughput (samples/s, whole job) that
// one component allows.
type Term struct {
	Component Component
	Rate      float64 // samples/s; +Inf when the term does not apply
}

// Path is one way a sample reaches the GPU.
type Path struct {
	Name  string    // augmented, decoded, encoded, nvme, storage
	Rate  float64   // samples/s: the minimum of Terms
	Bound Component // the component of the smallest term
	Terms []Term
}

// PathSet is the five paths.
type PathSet struct {
	Augmented, Decoded, Encoded, NVMe, Storage Path
}

func makePath(name string, terms ...Term) Path {
	p := Path{Name: name, Rate: math.Inf(1), Bound: None, Terms: terms}
	for _, t := range terms {
		if t.Rate < p.Rate {
			p.Rate, p.Bound = t.Rate, t.Component
		}
	}
	return p
}

// Paths computes the throughput of every path and the component that bounds
// it.
func Paths(p Params) PathSet {
	n := float64(p.Nodes)
	t := p.M * p.SData // bytes of a preprocessed sample
	cacheBW, cacheNIC := n*p.BCache, math.Inf(1)
	if p.CacheRemote {
		cacheBW = p.BCache
		cacheNIC = n * p.BNIC
	}
	pcie := Term{PCIe, n * p.BPCIe / (t + p.CPCIe)}
	gpu := Term{GPU, n * p.TGPU}
	var ps PathSet
	ps.Augmented = makePath("augmented",
		Term{Cache, cacheBW / t}, Term{NIC, cacheNIC / (t + p.CNw)}, pcie, gpu)
	ps.Decoded = makePath("decoded",
		Term{Cache, cacheBW / t}, Term{NIC, cacheNIC / (t + p.CNw)}, Term{CPUAugment, n * p.TA}, pcie, gpu)
	encTerms := []Term{
		{Cache, cacheBW / p.SData}, {NIC, cacheNIC / (p.SData + p.CNw)},
		{CPUDecodeAugment, n * p.TDA}, pcie, gpu,
	}
	ps.Encoded = makePath("encoded", encTerms...)
	ps.NVMe = makePath("nvme", append(clone(encTerms), Term{NVMeTier, n * p.BNVMe / p.SData})...)
	srcTerms := clone(encTerms)
	srcTerms[1] = Term{NIC, n * p.BNIC / (p.SData + p.CNw)} // the source is always across the NIC
	ps.Storage = makePath("storage", append(srcTerms, Term{Storage, p.BStorage / p.SData})...)
	return ps
}

func clone(t []Term) []Term { return append([]Term(nil), t...) }

// Counts is how many samples each path serves.
type Counts struct {
	Augmented, Decoded, Encoded, NVMe, Storage float64
}

// SampleCounts applies equations 2, 4, 6 and 8 to the split s, with the
// extension's NVMe tier between memory and storage.
func SampleCounts(p Params, s Split) Counts {
	var c Counts
	c.Augmented = Eq2NA(p, s.A)
	c.Decoded = Eq4ND(p, c.Augmented, s.D)
	c.Encoded = Eq6NE(p, c.Augmented, c.Decoded, s.E)
	rest := Eq8NStorage(p, c.Augmented, c.Decoded, c.Encoded)
	c.NVMe = math.Max(0, math.Min(rest, p.SNVMe/p.SData))
	c.Storage = math.Max(0, rest-c.NVMe)
	return c
}

// Result is the model's prediction for one split.
type Result struct {
	Split  Split
	Counts Counts
	Paths  PathSet
	// DSI is DSI_overall in samples/s for the whole job (eq. 9); under
	// the views rules, for all the jobs.
	DSI float64
	// Views is what the views rules add (nil under the paper's).
	Views *ViewsResult
}

// Evaluate predicts the DSI throughput of the split s with the tier
// extension.
func Evaluate(p Params, s Split) Result {
	if p.Views {
		return evaluateViews(p, s)
	}
	ps := Paths(p)
	c := SampleCounts(p, s)
	return Result{Split: s, Counts: c, Paths: ps, DSI: overall(p, c, ps)}
}

func overall(p Params, c Counts, ps PathSet) float64 {
	return weighted(p.NTotal,
		[]float64{c.Augmented, c.Decoded, c.Encoded, c.NVMe, c.Storage},
		[]float64{ps.Augmented.Rate, ps.Decoded.Rate, ps.Encoded.Rate, ps.NVMe.Rate, ps.Storage.Rate})
}

// Used lists the paths that serve at least one sample.
func (r Result) Used() []Path {
	var out []Path
	for _, x := range []struct {
		n float64
		p Path
	}{
		{r.Counts.Augmented, r.Paths.Augmented}, {r.Counts.Decoded, r.Paths.Decoded},
		{r.Counts.Encoded, r.Paths.Encoded}, {r.Counts.NVMe, r.Paths.NVMe},
		{r.Counts.Storage, r.Paths.Storage},
	} {
		if x.n > 0 {
			out = append(out, x.p)
		}
	}
	return out
}
