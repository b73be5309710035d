package model

import (
	"errors"
	"fmt"
	"math"
)

// Unbounded is the value of a term that does not apply or is not known: it
// never limits a path.
var Unbounded = math.Inf(1)

// ErrInvalid is wrapped by every error of [Params.Validate] and [ParseSplit].
var ErrInvalid = errors.New("invalid model input")

// inputError is a bad input: its message names the field, and it is
// ErrInvalid for errors.Is.
type inputError struct{ msg string }

func (e *inputError) Error() string        { return e.msg }
func (e *inputError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, a ...any) error { return &inputError{fmt.Sprintf(format, a...)} }

// Params are the inputs of the DSI model, in Table 3's notation and units:
// throughputs in samples/s, bandwidths in bytes/s, sizes in bytes. Per-node
// values are multiplied by Nodes (the paper's n) where the paper does.
// A throughput or bandwidth that does not apply, or is not known, is
// [Unbounded] (+Inf), never 0.
type Params struct {
	// TGPU is T_GPU: per node GPU ingestion throughput (samples/s).
	TGPU float64
	// TDA is T_D+A: per node CPU throughput for decoding and augmenting a
	// sample (samples/s).
	TDA float64
	// TA is T_A: per node CPU throughput for augmenting an already decoded
	// sample (samples/s).
	TA float64
	// BPCIe is B_PCIe: per node PCIe bandwidth (bytes/s).
	BPCIe float64
	// BCache is B_cache: the cache's bandwidth (bytes/s). For a remote cache
	// (CacheRemote) it is the maximum bandwidth of the cache service, shared
	// by all nodes, as in the paper; for a local cache it is each node's own
	// and is multiplied by Nodes.
	BCache float64
	// BStorage is B_storage: maximum bandwidth of the source storage (bytes/s),
	// shared by all nodes.
	BStorage float64
	// BNIC is B_NIC: per node network bandwidth (bytes/s).
	BNIC float64
	// SCache is S_cache (S_mem in equations 2, 4 and 6): the memory budget
	// split between the encoded, decoded and augmented partitions (bytes).
	// For a local cache it is each node's budget.
	SCache float64
	// SData is S_data: the mean size of an encoded sample (bytes).
	SData float64
	// NTotal is N_total: the number of samples in the dataset.
	NTotal float64
	// M is the size inflation factor of preprocessed (decoded or augmented)
	// data: a preprocessed sample takes M × S_data bytes.
	M float64
	// CPCIe is C_PCIe: intra-node gradient communication overhead (bytes),
	// added to the bytes of each sample that crosses PCIe. See
	// [RingAllReduceBytes].
	CPCIe float64
	// CNw is C_nw: inter-node gradient communication overhead (bytes), added
	// to the bytes of each sample that crosses the NIC.
	CNw float64
	// Nodes is n, the number of training nodes (≥ 1).
	Nodes int

	// CacheRemote says the memory cache is a remote service reached over the
	// NIC, as in the paper. When false (epochfs: the cache is in the training
	// node's own memory) the cache paths cross no NIC, and BCache, SCache and
	// the NVMe tier are per node.
	CacheRemote bool
	// BNVMe is the read bandwidth of a node's local NVMe/SSD tier (bytes/s).
	BNVMe float64
	// SNVMe is the capacity of a node's NVMe/SSD tier given to encoded
	// samples (bytes). 0: there is no such tier.
	SNVMe float64

	// Views selects the views extension (views.go): the rules of
	// epochfs's own caches, where an augmented tensor is never reused
	// across epochs and the augmented memory lets Jobs jobs share each
	// production. Jobs is the number of jobs with one pipeline on each
	// node (0: 1); MA the inflation of an augmented sample (a tensor is
	// MA × S_data bytes; 0: M, which is then the decoded sample's);
	// Window the samples of augmented memory the jobs need to share every
	// production (≤ 0: one); IngestOnCPU says the jobs ingest on the CPUs
	// that preprocess (no GPU), so the two add up.
	Views       bool
	Jobs        int
	MA          float64
	Window      float64
	IngestOnCPU bool
}

// RingAllReduceBytes is the paper's gradient communication overhead of a ring
// all-reduce among participants peers for a model of modelBytes bytes:
// 2 × (n − 1) / n × βN (§5.1, citing [56]). Use it with the GPUs per node for
// C_PCIe and with the number of nodes for C_nw; with NVLink the overhead it
// carries is 0. The paper states it per batch; equations 1, 3 and 5 add it to
// the bytes of one sample, so divide by the batch size to spread it over the
// samples of a batch.
func RingAllReduceBytes(participants int, modelBytes float64) float64 {
	if participants <= 1 {
		return 0
	}
	n := float64(participants)
	return 2 * (n - 1) / n * modelBytes
}

// Validate checks every parameter and names the first bad one by its Table 3
// symbol.
func (p Params) Validate() error {
	rate := func(name string, v float64) error {
		switch {
		case math.IsNaN(v):
			return invalid("model: %s is NaN", name)
		case v <= 0:
			return invalid("model: %s = %g: must be > 0 (use +Inf for unbounded)", name, v)
		}
		return nil
	}
	finite := func(name string, v float64, min float64, strict bool) error {
		switch {
		case math.IsNaN(v):
			return invalid("model: %s is NaN", name)
		case math.IsInf(v, 0):
			return invalid("model: %s = %g: must be finite", name, v)
		case strict && v <= min:
			return invalid("model: %s = %g: must be > %g", name, v, min)
		case !strict && v < min:
			return invalid("model: %s = %g: must be ≥ %g", name, v, min)
		}
		return nil
	}
	for _, c := range []struct {
		name string
		v    float64
	}{
		{"T_GPU", p.TGPU}, {"T_D+A", p.TDA}, {"T_A", p.TA},
		{"B_PCIe", p.BPCIe}, {"B_cache", p.BCache}, {"B_storage", p.BStorage},
		{"B_NIC", p.BNIC}, {"B_nvme", p.BNVMe},
	} {
		if err := rate(c.name, c.v); err != nil {
			return err
		}
	}
	if err := finite("S_cache", p.SCache, 0, false); err != nil {
		return err
	}
	if err := finite("S_data", p.SData, 0, true); err != nil {
		return err
	}
	if err := finite("N_total", p.NTotal, 1, false); err != nil {
		return err
	}
	if err := finite("M", p.M, 0, true); err != nil {
		return err
	}
	if err := finite("C_PCIe", p.CPCIe, 0, false); err != nil {
		return err
	}
	if err := finite("C_nw", p.CNw, 0, false); err != nil {
		return err
	}
	if err := finite("S_nvme", p.SNVMe, 0, false); err != nil {
		return err
	}
	if p.Nodes < 1 {
		return invalid("model: n = %d: must be ≥ 1", p.Nodes)
	}
	if p.Views {
		if p.CacheRemote {
			return invalid("model: the views rules model the node's own caches: cache = \"remote\" is the paper's setting")
		}
		if p.Jobs < 0 || p.Jobs > 4096 {
			return invalid("model: jobs = %d: want 1 to 4096", p.Jobs)
		}
		if err := finite("M_A", p.MA, 0, false); err != nil {
			return err
		}
		if err := finite("W", p.Window, 0, false); err != nil {
			return err
		}
		if math.IsInf(p.TGPU, 1) && math.IsInf(p.BPCIe, 1) && math.IsInf(p.BCache, 1) && (math.IsInf(p.TA, 1) || math.IsInf(p.TDA, 1)) {
			return invalid("model: nothing bounds every sample: give T_D+A and T_A, or T_GPU, B_PCIe or B_cache")
		}
		return nil
	}
	// Every path must have a finite bound, or the optimum is infinite. The
	// storage path's always has B_storage unless that is unbounded too.
	paths := Paths(p)
	for _, path := range []Path{paths.Augmented, paths.Decoded, paths.Encoded, paths.NVMe, paths.Storage} {
		if math.IsInf(path.Rate, 1) {
			return invalid("model: the %s path is unbounded: give T_GPU, B_PCIe or B_cache", path.Name)
		}
	}
	return nil
}
