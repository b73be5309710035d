package model

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Decision is what MDP decides for one set of parameters: the split to use,
// the exact optimum, and the three single-form splits for comparison.
type Decision struct {
	Params Params
	// Chosen is the split to use, rounded to hundredths of a percent (as
	// printed), with its prediction: the optimum, or the forced split.
	Chosen Result
	Forced bool
	// Optimum is the exact solver's answer, unrounded.
	Optimum Result
	// The single-form splits.
	AllEncoded, AllDecoded, AllAugmented Result
}

// Decide solves the model for p. When forced is not nil that split is used
// instead of the optimum, which is still reported.
func Decide(p Params, forced *Split) (Decision, error) {
	opt, err := Solve(p)
	if err != nil {
		return Decision{}, err
	}
	d := Decision{
		Params:       p,
		Optimum:      opt,
		AllEncoded:   Evaluate(p, AllEncoded),
		AllDecoded:   Evaluate(p, AllDecoded),
		AllAugmented: Evaluate(p, AllAugmented),
	}
	if forced != nil {
		if err := forced.Validate(); err != nil {
			return Decision{}, err
		}
		d.Forced = true
		d.Chosen = Evaluate(p, forced.Rounded())
	} else {
		d.Chosen = Evaluate(p, opt.Split.Rounded())
	}
	return d, nil
}

// Why explains the decision in a few lines: what bounds each path in use,
// how the dataset compares with the budget, and why the split follows.
func (d Decision) Why() []string {
	if d.Params.Views {
		return d.whyViews()
	}
	p := d.Params
	ps := d.Chosen.Paths
	var out []string
	enc := p.NTotal * p.SData
	out = append(out, fmt.Sprintf("dataset: %.0f samples × %s = %s encoded, %s preprocessed (M = %.3g); memory budget %s",
		p.NTotal, bytesStr(p.SData), bytesStr(enc), bytesStr(enc*p.M), p.M, bytesStr(p.SCache)))
	switch {
	case enc*p.M <= p.SCache:
		out = append(out, "the whole dataset fits in the budget even preprocessed")
	case enc <= p.SCache:
		out = append(out, fmt.Sprintf("the whole dataset fits in the budget encoded, %.0f%% of it preprocessed", 100*p.SCache/(enc*p.M)))
	default:
		out = append(out, fmt.Sprintf("the budget holds %.1f%% of the dataset encoded, %.1f%% preprocessed", 100*p.SCache/enc, 100*p.SCache/(enc*p.M)))
	}
	paths := []Path{ps.Augmented, ps.Decoded, ps.Encoded}
	if p.SNVMe > 0 {
		paths = append(paths, ps.NVMe)
	}
	paths = append(paths, ps.Storage)
	sorted := append([]Path(nil), paths...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Rate > sorted[j].Rate })
	var order []string
	for _, x := range sorted {
		order = append(order, fmt.Sprintf("%s %s/s (%s)", x.Name, rateStr(x.Rate), x.Bound))
	}
	out = append(out, "paths, fastest first: "+strings.Join(order, " > "))
	// What one GiB of memory adds to DSI_overall in each form, over the path
	// its samples would otherwise take: the objective's coefficients while
	// the budget is the binding constraint.
	fbName, fb := "storage", ps.Storage.Rate
	if p.SNVMe > 0 && p.SNVMe >= enc {
		fbName, fb = "nvme", ps.NVMe.Rate
	}
	perGiB := func(r, bytes float64) float64 { return (1 << 30) / bytes * (r - fb) / p.NTotal }
	out = append(out, fmt.Sprintf("one GiB of memory instead of the %s path adds: augmented %+.4g, decoded %+.4g, encoded %+.4g samples/s",
		fbName, perGiB(ps.Augmented.Rate, p.M*p.SData), perGiB(ps.Decoded.Rate, p.M*p.SData), perGiB(ps.Encoded.Rate, p.SData)))
	e, dd, a := d.Chosen.Split.Pct()
	verb := "best split"
	if d.Forced {
		verb = "forced split"
	}
	out = append(out, fmt.Sprintf("%s %g-%g-%g (encoded-decoded-augmented) predicts %s samples/s", verb, e, dd, a, rateStr(d.Chosen.DSI)))
	if d.Forced {
		oe, od, oa := d.Optimum.Split.Pct()
		out = append(out, fmt.Sprintf("the optimum %g-%g-%g would predict %s samples/s", oe, od, oa, rateStr(d.Optimum.DSI)))
	}
	return out
}

func rateStr(v float64) string {
	if math.IsInf(v, 1) {
		return "unbounded"
	}
	return fmt.Sprintf("%.0f", v)
}

func bytesStr(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0fB", v)
	}
	return fmt.Sprintf("%.1f%s", v, units[i])
}

// whyViews is Why under the views rules.
func (d Decision) whyViews() []string {
	p := d.Params
	r := d.Chosen
	v := r.Views
	var out []string
	enc := p.NTotal * p.SData
	ma := augmentedInflation(p)
	out = append(out, fmt.Sprintf("dataset: %.0f samples × %s = %s encoded, %s decoded (M = %.3g), %s per augmented sample (M_A = %.3g); memory budget %s",
		p.NTotal, bytesStr(p.SData), bytesStr(enc), bytesStr(enc*p.M), p.M, bytesStr(ma*p.SData), ma, bytesStr(p.SCache)))
	out = append(out, "an augmented sample is never reused across epochs: every sample a job takes was augmented this epoch; augmented memory lets jobs with one pipeline share each augmentation")
	if v.Jobs > 1 {
		need := window(p) * ma * p.SData
		out = append(out, fmt.Sprintf("%d jobs share %.0f%% of the augmentations (%s of augmented memory holds %.0f samples; sharing all takes W = %.0f, %s): %.2f made per sample and epoch for the %d",
			v.Jobs, 100*v.Shared, bytesStr(r.Split.A*p.SCache), r.Counts.Augmented, window(p), bytesStr(need), v.Productions, v.Jobs))
	} else {
		out = append(out, "one job: augmented memory shares nothing, so it buys no throughput")
	}
	out = append(out, fmt.Sprintf("decoded memory holds %.1f%% of the dataset (augmented at T_A = %s/s instead of decoded and augmented at T_D+A = %s/s); memory holds %.1f%% encoded",
		100*r.Counts.Decoded/p.NTotal, rateStr(p.TA), rateStr(p.TDA), 100*r.Counts.Encoded/p.NTotal))
	terms := append([]Term(nil), v.Resources...)
	sort.SliceStable(terms, func(i, j int) bool { return terms[i].Rate < terms[j].Rate })
	var order []string
	for _, t := range terms {
		order = append(order, fmt.Sprintf("%s %s/s", t.Component, rateStr(t.Rate)))
	}
	out = append(out, "what each resource allows, tightest first: "+strings.Join(order, " < "))
	e, dd, a := r.Split.Pct()
	verb := "best split"
	if d.Forced {
		verb = "forced split"
	}
	out = append(out, fmt.Sprintf("%s %g-%g-%g (encoded-decoded-augmented) predicts %s samples/s for the %d job(s), bound by %s", verb, e, dd, a, rateStr(r.DSI), v.Jobs, v.Bound))
	if d.Forced {
		oe, od, oa := d.Optimum.Split.Pct()
		out = append(out, fmt.Sprintf("the optimum %g-%g-%g would predict %s samples/s", oe, od, oa, rateStr(d.Optimum.DSI)))
	}
	return out
}
