// Package sampler decides, for every training job on a node, the order in
// which it reads the dataset, and tells the shared RAM buffer what to fetch
// and what to drop. It is pure: no I/O, no goroutines, an injectable clock,
// one mutex; samples are indices 0..N-1 in catalog order.
//
// Invariant: every job gets every sample of its subset exactly once per
// epoch, whatever substitutions happen; the order is uniformly random apart
// from the preference for buffered samples.
//
// A job (RegisterJob) has a subset, a seed, a batch size, a kind (ods,
// random, sequential) and W ranks (data-parallel training; W = 1 for a plain
// job). Per epoch it has a seen vector of 1 bit per subset sample shared by
// its ranks (a drawSet: taken = handed out or planned) with a Fenwick tree
// over 512-sample blocks for O(log n) uniform draws; per rank, a plan: its
// next Lookahead batches, drawn ahead so that Prefetch can name them
// truthfully. Ranks get torch's DistributedSampler counts (ranks.go): the
// same number each per epoch, disjoint apart from padding, covering the
// subset; a rank may run one epoch ahead of the slowest, not two.
//
// The sampler knows nothing of ctl files: parsing a job's config and
// rendering its status are the jobs package's.
//
// ODS (Seneca §5.2): a planned draw that is neither resident, buffered, being
// fetched, nor planned by another job is replaced by a buffered sample this
// job has not taken; the displaced draw returns to the job's unseen set.
// Resident draws are never replaced, so resident samples keep uniform
// positions. Per sample, one status byte holds the buffer state and a
// reference count: the live jobs that still want the sample this epoch. An
// entry is released when the count reaches 0, or evicted for an entry more
// jobs want, never while a job has it planned.
//
// DSA (Joader, Algorithms 1–2): when live ODS jobs' subsets differ, their
// draws come from rounds of the selecting procedure over a partition of the
// samples by the set of jobs that still need them (the sampling tree with
// its compensation step), so that jobs share a draw as often as
// |∩ D_i| / max |D_i| allows while each job's draw stays uniform over its
// unseen samples.
//
// Cluster-wide epochs (claims.go): a job with a Claimer shares each
// epoch's seen set with other nodes; its draws are claims made through the
// claimer without the lock, its ranks that never read here are remote.
//
// Leases (TensorSocket §3.2): a rank that neither reads nor touches for
// Options.Lease is lost, and the live ranks take over its share; a job whose
// ranks are all lost is dropped and its references released.
package sampler
