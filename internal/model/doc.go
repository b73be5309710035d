// Package model is the DSI (data storage and ingestion) performance model of
// Seneca (§5.1, equations 1–9, Table 3) and its model-driven partitioning
// (MDP): given the hardware, the job and a split of a memory budget into
// encoded, decoded and augmented partitions, it predicts the training
// throughput in samples/s, and it finds the split that maximises it.
//
// The paper's equations are implemented one function per equation (Eq1DSIA …
// Eq9DSIOverall), exactly as printed, over [Params]. On top of them the tier
// extension ([Evaluate]) lets encoded samples also sit in a local NVMe tier of
// bandwidth B_nvme and capacity S_nvme, and lets the memory cache be local to
// the training node (epochfs) instead of a remote cache service (Seneca's
// Redis); NIC terms then apply only to data that crosses the network. With
// CacheRemote set and an empty NVMe tier the extension is the paper's model.
//
// MDP has two solvers. [BruteForce] is the paper's: every split on a grid of
// a given step (1 % by default). [Solve] is exact: written in sample counts,
// DSI_overall is linear under two linear constraints (memory bytes, number
// of samples), so its maximum lies on a vertex of a small polytope; Solve
// enumerates those vertices (at most 20 three-plane intersections) and keeps
// the best. The brute force is its test oracle.
//
// A term that does not apply, or is not known, is unbounded: +Inf, never 0.
// The package is pure: no I/O, no clocks, no globals. The profiler that
// measures the inputs on a node lives in internal/model/profile.
package model
