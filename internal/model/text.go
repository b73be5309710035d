package model

import (
	"fmt"
	"io"
	"sort"

	"github.com/epochfs/epochfs/internal/model/profile"
)

// WriteText writes the model's report r and decision d for people: the
// node (cores, memory), the inputs and where each came from, what the
// profile measured (prof; nil: no profile), the paths' or the views'
// rates, the splits compared, and why. size formats a byte count.
func WriteText(w io.Writer, r Report, d Decision, cores, memory profile.Measurement, prof *profile.Report, size func(int64) string) {
	if d.Params.Views {
		fmt.Fprintf(w, "DSI model (epochfs's views rules: Seneca §5 with augmented tensors never reused): %s cache, %d node(s), %d job(s)\n", r.Cache, d.Params.Nodes, max(d.Params.Jobs, 1))
	} else {
		fmt.Fprintf(w, "DSI model (Seneca §5.1 with the epochfs tier extension): %s cache, %d node(s)\n", r.Cache, d.Params.Nodes)
	}
	if cores.OK || memory.OK {
		fmt.Fprintf(w, "this node: %.0f cores, %s memory\n", cores.Value, size(int64(memory.Value)))
	}
	fmt.Fprintf(w, "\ninputs\n  %-17s %-9s %-16s %s\n", "KEY", "SYMBOL", "VALUE", "SOURCE")
	for _, k := range r.InputOrder() {
		in := r.Inputs[k]
		fmt.Fprintf(w, "  %-17s %-9s %-16s %s\n", k, in.Symbol, fmtValue(in, size), in.Source)
	}
	if prof != nil {
		fmt.Fprintf(w, "\nmeasured (not all used: configured values win)\n")
		line := func(name string, m profile.Measurement, unit string) {
			v := "-"
			if m.OK {
				v = fmtUnit(m.Value, unit, size)
			}
			fmt.Fprintf(w, "  %-26s %-14s %s\n", name, v, m.How)
		}
		line("storage, directory order", prof.StorageSequential, "bytes/s")
		line("storage, random order", prof.StorageRandom, "bytes/s")
		for _, t := range prof.Tiers {
			kind := "disk"
			if t.Memory {
				kind = "RAM"
			}
			line(fmt.Sprintf("tier %s (%s)", t.Name, kind), t.Read, "bytes/s")
		}
		line("dataset samples", prof.Samples, "samples")
		line("mean sample size", prof.SampleBytes, "bytes")
		line("T_D+A", prof.DecodeAugment, "samples/s")
		line("T_A", prof.Augment, "samples/s")
		line("decoded sample", prof.DecodedBytes, "bytes")
		line("augmented sample", prof.AugmentedBytes, "bytes")
	}
	if v := r.Views; v != nil {
		fmt.Fprintf(w, "\nresources (all jobs) SAMPLES/S\n")
		names := make([]string, 0, len(v.Resources))
		for k := range v.Resources {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Fprintf(w, "  %-17s %s\n", k, fmtRate(v.Resources[k]))
		}
		fmt.Fprintf(w, "  bound by %s; %.0f%% of augmentations shared, %.2f made per sample and epoch\n", v.Bound, 100*v.Shared, v.ProductionsPerSample)
	} else {
		fmt.Fprintf(w, "\npaths (whole job)   %-12s %-20s %s\n", "SAMPLES/S", "BOUND BY", "SAMPLES SERVED")
		for _, name := range PathOrder {
			p := r.Paths[name]
			fmt.Fprintf(w, "  %-17s %-12s %-20s %.0f\n", name, fmtRate(p.Rate), p.Bound, p.Samples)
		}
	}
	fmt.Fprintf(w, "\nsplit of memory_budget (encoded-decoded-augmented %%)   predicted samples/s\n")
	best := "best (exact solver)"
	if d.Params.Views {
		best = "best (grid search)"
	}
	label := best
	if r.Forced {
		label = "forced (model.split)"
	}
	row := func(name string, s SplitReport) {
		fmt.Fprintf(w, "  %-22s %-31s %s\n", name, fmt.Sprintf("%g-%g-%g", s.EncodedPct, s.DecodedPct, s.AugmentedPct), fmtRate(s.Predicted))
	}
	row(label, r.SplitReport)
	if r.Forced {
		row(best, r.Optimum)
	}
	row("all encoded", r.Single["encoded"])
	row("all decoded", r.Single["decoded"])
	row("all augmented", r.Single["augmented"])
	fmt.Fprintf(w, "\nwhy\n")
	for _, line := range r.Why {
		fmt.Fprintf(w, "  %s\n", line)
	}
}

func fmtRate(p *float64) string {
	if p == nil {
		return "unbounded"
	}
	return fmt.Sprintf("%.0f", *p)
}

func fmtValue(in Input, size func(int64) string) string {
	if in.Value == nil {
		return "unbounded"
	}
	return fmtUnit(*in.Value, in.Unit, size)
}

func fmtUnit(v float64, unit string, size func(int64) string) string {
	switch unit {
	case "bytes":
		if v < 1024 {
			return fmt.Sprintf("%.0fB", v)
		}
		return size(int64(v))
	case "bytes/s":
		switch {
		case v >= 1e9:
			return fmt.Sprintf("%.2fGB/s", v/1e9)
		case v >= 1e6:
			return fmt.Sprintf("%.1fMB/s", v/1e6)
		default:
			return fmt.Sprintf("%.0fB/s", v)
		}
	case "×":
		return fmt.Sprintf("%.3g", v)
	case "samples", "nodes":
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.6g", v)
	}
}
