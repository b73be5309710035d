package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
)

// Fig13Options are the knobs of the Seneca Figure 13 reproduction.
type Fig13Options struct {
	Samples    int       // dataset size (default 20000)
	BufferPct  float64   // shared buffer, % of the dataset (default 1)
	Speeds     []float64 // the three jobs' samples/s (default 1000, 1000, 1000)
	SourceRate float64   // samples/s (default 3000)
	Epochs     int       // default 4
	Fractions  []float64 // cached fractions (default .2 .4 .6 .8)
	Seed       uint64
	BatchSize  int // default 64
	Lookahead  int // default 2
}

func (o *Fig13Options) defaults() {
	if o.Samples == 0 {
		o.Samples = 20000
	}
	if o.BufferPct == 0 {
		o.BufferPct = 1
	}
	if len(o.Speeds) == 0 {
		o.Speeds = []float64{1000, 1000, 1000}
	}
	if o.SourceRate == 0 {
		o.SourceRate = 3000
	}
	if o.Epochs == 0 {
		o.Epochs = 4
	}
	if len(o.Fractions) == 0 {
		o.Fractions = []float64{.2, .4, .6, .8}
	}
	if o.BatchSize == 0 {
		o.BatchSize = 64
	}
}

// Fig13Row is one cache size of the Figure 13 reproduction.
type Fig13Row struct {
	Fraction float64
	Bound    float64 // 1 − (1 − f)/N
	// SpeedBound is 1 − (1 − f) · max speed / Σ speeds: the hit rate when
	// every fetch serves each job once (a buffer entry is dropped once every
	// job consumed it), so the fastest job's non-resident reads all cost a
	// fetch. It equals Bound for equal speeds.
	SpeedBound float64
	Results    map[string]Result
}

// Fig13Policies are the columns, in order.
var Fig13Policies = []string{"independent (LRU f)", "MINIO (fill-once f)", "random + buffer", "ODS (f + buffer)", "ODS (f − b + b)"}

// Fig13 runs Seneca's Figure 13 setting: three jobs over one dataset with a
// cache of f of it, for each policy.
func Fig13(o Fig13Options) ([]Fig13Row, error) {
	o.defaults()
	jobs := make([]Job, len(o.Speeds))
	for i, sp := range o.Speeds {
		jobs[i] = Job{Speed: sp}
	}
	buf := int(o.BufferPct / 100 * float64(o.Samples))
	var rows []Fig13Row
	for _, f := range o.Fractions {
		sum, fastest := 0.0, 0.0
		for _, sp := range o.Speeds {
			sum, fastest = sum+sp, max(fastest, sp)
		}
		row := Fig13Row{Fraction: f, Bound: 1 - (1-f)/float64(len(jobs)), SpeedBound: 1 - (1-f)*fastest/sum, Results: map[string]Result{}}
		base := Config{Samples: o.Samples, Jobs: jobs, ResidentFraction: f, BufferSlots: buf,
			SourceRate: o.SourceRate, Epochs: o.Epochs, Seed: o.Seed, BatchSize: o.BatchSize, Lookahead: o.Lookahead}
		cfgs := map[string]Config{}
		c := base
		c.Policy = LRU
		cfgs[Fig13Policies[0]] = c
		c.Policy = MINIO
		cfgs[Fig13Policies[1]] = c
		c.Policy = Random
		cfgs[Fig13Policies[2]] = c
		c.Policy = ODS
		cfgs[Fig13Policies[3]] = c
		c.ResidentFraction = max(0, f-o.BufferPct/100)
		cfgs[Fig13Policies[4]] = c
		for _, name := range Fig13Policies {
			r, err := Run(cfgs[name])
			if err != nil {
				return nil, err
			}
			row.Results[name] = r
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// WriteFig13 prints the rows as Markdown tables: hit rate, then source
// fetches per epoch (every job's epoch together) relative to (1 − f) × N,
// then mean waiting time per job.
func WriteFig13(w io.Writer, rows []Fig13Row) {
	fmt.Fprintf(w, "| cache f | bound 1−(1−f)/3 | bound for these speeds | %s |\n|---|---|---|%s\n", strings.Join(Fig13Policies, " | "), strings.Repeat("---|", len(Fig13Policies)))
	for _, r := range rows {
		fmt.Fprintf(w, "| %.0f %% | %.1f %% | %.1f %% |", 100*r.Fraction, 100*r.Bound, 100*r.SpeedBound)
		for _, p := range Fig13Policies {
			fmt.Fprintf(w, " %.1f %% |", 100*r.Results[p].HitRate)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nSource fetches per epoch ÷ (1 − f) × N (1.0 = every non-resident sample crosses the source once per epoch; independent jobs: 3.0):\n\n")
	fmt.Fprintf(w, "| cache f | %s |\n|---|%s\n", strings.Join(Fig13Policies, " | "), strings.Repeat("---|", len(Fig13Policies)))
	for _, r := range rows {
		fmt.Fprintf(w, "| %.0f %% |", 100*r.Fraction)
		for _, p := range Fig13Policies {
			res := r.Results[p]
			fmt.Fprintf(w, " %.2f |", res.FetchesPerEpoch/((1-r.Fraction)*float64(res.Config.Samples)))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nWaiting for the source, mean seconds per job / makespan seconds; coverage (min over jobs and epochs):\n\n")
	fmt.Fprintf(w, "| cache f | %s |\n|---|%s\n", strings.Join(Fig13Policies, " | "), strings.Repeat("---|", len(Fig13Policies)))
	for _, r := range rows {
		fmt.Fprintf(w, "| %.0f %% |", 100*r.Fraction)
		for _, p := range Fig13Policies {
			res := r.Results[p]
			wait, cov := 0.0, 1.0
			for _, j := range res.Jobs {
				wait += j.Wait / float64(len(res.Jobs))
				cov = min(cov, j.Coverage)
				if !j.Exact {
					cov = -1
				}
			}
			fmt.Fprintf(w, " %.2f / %.1f s, %.0f %% |", wait, res.Makespan, 100*cov)
		}
		fmt.Fprintln(w)
	}
}

// JoaderCase is one row of Joader's Table 1.
type JoaderCase struct {
	Name    string
	Subsets [][]int
}

// JoaderCases are Table 1's sampling-algorithm cases (the dataset pairs and
// the 4-job cases), generated with seed.
func JoaderCases(seed uint64) []JoaderCase {
	r := rand.New(rand.NewPCG(seed, 13))
	return []JoaderCase{
		{"D1=[0,1e4]; D2=[0,1e4]", [][]int{Range(0, 10000), Range(0, 10000)}},
		{"D1=[0,1e4]; D2=[7500,17500]", [][]int{Range(0, 10000), Range(7500, 17500)}},
		{"D1=[0,1e4]; D2=[5000,15000]", [][]int{Range(0, 10000), Range(5000, 15000)}},
		{"D1=[0,1e4]; D2=[2500,12500]", [][]int{Range(0, 10000), Range(2500, 12500)}},
		{"D1..D4=sample([0,13333],10000)", [][]int{RandomSubset(r, 13333, 10000), RandomSubset(r, 13333, 10000), RandomSubset(r, 13333, 10000), RandomSubset(r, 13333, 10000)}},
		{"D1=[0,1e4]; D2=[0,7500]", [][]int{Range(0, 10000), Range(0, 7500)}},
		{"D1=[0,1e4]; D2=[0,5000]", [][]int{Range(0, 10000), Range(0, 5000)}},
		{"D1=[0,1e4]; D2=[0,2500]", [][]int{Range(0, 10000), Range(0, 2500)}},
		{"D1..D4=[0,1e4],[0,7500],[0,5000],[0,2500]", [][]int{Range(0, 10000), Range(0, 7500), Range(0, 5000), Range(0, 2500)}},
	}
}

// JoaderRow is one case at one cache size.
type JoaderRow struct {
	Case     string
	Slots    int
	Min, Max int // |∪ D_i|, Σ |D_i|
	ISA, DSA int // misses: independent random (sampler=random) vs DSA alone
	ODSDSA   int // misses with DSA and ODS substitution (sampler=ods)
}

// Joader runs Table 1's cases: jobs in lock step (equal speeds, batch 1),
// one epoch each, nothing resident, a buffer of the given slots (as fractions
// of the union; 0 means one slot), unlimited source. Misses are source fetches.
func Joader(seed uint64, slotFractions []float64) ([]JoaderRow, error) {
	var rows []JoaderRow
	for _, c := range JoaderCases(seed) {
		union := map[int]bool{}
		sum := 0
		for _, s := range c.Subsets {
			sum += len(s)
			for _, e := range s {
				union[e] = true
			}
		}
		for _, fr := range slotFractions {
			slots := max(1, int(fr*float64(len(union))))
			row := JoaderRow{Case: c.Name, Slots: slots, Min: len(union), Max: sum}
			jobs := make([]Job, len(c.Subsets))
			for i, s := range c.Subsets {
				jobs[i] = Job{Speed: 1, Subset: s}
			}
			base := Config{Samples: 17500, Jobs: jobs, BufferSlots: slots, Epochs: 1, BatchSize: 1, Lookahead: 1, Seed: seed}
			for _, v := range []struct {
				p     Policy
				noSub bool
				out   *int
			}{{Random, false, &row.ISA}, {ODS, true, &row.DSA}, {ODS, false, &row.ODSDSA}} {
				cfg := base
				cfg.Policy, cfg.NoSubstitution = v.p, v.noSub
				r, err := Run(cfg)
				if err != nil {
					return nil, err
				}
				*v.out = r.SourceFetches
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// WriteJoader prints the rows as a Markdown table.
func WriteJoader(w io.Writer, rows []JoaderRow) {
	fmt.Fprintln(w, "| case | buffer slots | min (∪) | max (Σ) | ISA (random) | DSA | DSA + ODS |\n|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d |\n", r.Case, r.Slots, r.Min, r.Max, r.ISA, r.DSA, r.ODSDSA)
	}
}
