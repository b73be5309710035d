package model

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Input is one model input as the user sees it: its config key, Table 3
// symbol, value, and where the value came from ("config", "measured: …",
// "derived: …", "default", "unbounded: …").
type Input struct {
	Key    string   `json:"-"`
	Symbol string   `json:"symbol"`
	Unit   string   `json:"unit"`
	Value  *float64 `json:"value"` // nil: unbounded
	Source string   `json:"source"`
}

// Num returns v for JSON: nil when it is infinite (unbounded) or NaN.
func Num(v float64) *float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return nil
	}
	return &v
}

// SplitReport is one split and its prediction.
type SplitReport struct {
	EncodedPct   float64  `json:"split_encoded_pct"`
	DecodedPct   float64  `json:"split_decoded_pct"`
	AugmentedPct float64  `json:"split_augmented_pct"`
	Predicted    *float64 `json:"predicted_samples_per_s"`
}

// PathReport is one path: its throughput, what bounds it, every term, and
// how many samples the chosen split sends along it.
type PathReport struct {
	Rate    *float64            `json:"samples_per_s"`
	Bound   Component           `json:"bound_by"`
	Samples float64             `json:"samples"`
	Terms   map[string]*float64 `json:"terms"`
}

// ViewsReport is what the views rules add: how the chosen split shares
// and what bounds it.
type ViewsReport struct {
	Jobs int `json:"jobs"`
	// Shared is the fraction of productions every job shares;
	// ProductionsPerSample the samples made per dataset sample and epoch
	// for all the jobs.
	Shared               float64             `json:"shared"`
	ProductionsPerSample float64             `json:"productions_per_sample"`
	Bound                Component           `json:"bound_by"`
	Resources            map[string]*float64 `json:"resources"` // samples/s each allows
}

// Report is the decision in the form the CLI prints as JSON and the mount
// shows in .epochfs/model. The split keys are the contract.
type Report struct {
	SplitReport
	Forced   bool                   `json:"split_forced"`
	Solver   string                 `json:"solver"`
	Optimum  SplitReport            `json:"optimum"`
	Single   map[string]SplitReport `json:"single_form"`
	Paths    map[string]PathReport  `json:"paths"`
	Cache    string                 `json:"cache"`
	Rules    string                 `json:"rules"`
	Views    *ViewsReport           `json:"views,omitempty"`
	Inputs   map[string]Input       `json:"inputs"`
	Why      []string               `json:"why"`
	Warnings []string               `json:"warnings"`

	order []string // input keys in the order given
}

func splitReport(r Result) SplitReport {
	e, d, a := r.Split.Pct()
	return SplitReport{EncodedPct: e, DecodedPct: d, AugmentedPct: a, Predicted: Num(r.DSI)}
}

// NewReport builds the report of a decision.
func NewReport(d Decision, inputs []Input, warnings []string) Report {
	r := Report{
		SplitReport: splitReport(d.Chosen),
		Forced:      d.Forced,
		Solver:      "exact (vertex enumeration)",
		Optimum:     splitReport(d.Optimum),
		Single: map[string]SplitReport{
			"encoded":   splitReport(d.AllEncoded),
			"decoded":   splitReport(d.AllDecoded),
			"augmented": splitReport(d.AllAugmented),
		},
		Paths:    map[string]PathReport{},
		Cache:    map[bool]string{true: "remote", false: "local"}[d.Params.CacheRemote],
		Rules:    map[bool]string{true: "views", false: "paper"}[d.Params.Views],
		Inputs:   map[string]Input{},
		Why:      d.Why(),
		Warnings: append([]string{}, warnings...),
	}
	c := d.Chosen.Counts
	ps := d.Chosen.Paths
	for _, x := range []struct {
		p Path
		n float64
	}{{ps.Augmented, c.Augmented}, {ps.Decoded, c.Decoded}, {ps.Encoded, c.Encoded}, {ps.NVMe, c.NVMe}, {ps.Storage, c.Storage}} {
		pr := PathReport{Rate: Num(x.p.Rate), Bound: x.p.Bound, Samples: math.Round(x.n), Terms: map[string]*float64{}}
		for _, t := range x.p.Terms {
			pr.Terms[string(t.Component)] = Num(t.Rate)
		}
		r.Paths[x.p.Name] = pr
	}
	if v := d.Chosen.Views; v != nil {
		r.Views = &ViewsReport{Jobs: v.Jobs, Shared: v.Shared, ProductionsPerSample: v.Productions, Bound: v.Bound,
			Resources: map[string]*float64{}}
		for _, t := range v.Resources {
			r.Views.Resources[string(t.Component)] = Num(t.Rate)
		}
	}
	for _, in := range inputs {
		r.Inputs[in.Key] = in
		r.order = append(r.order, in.Key)
	}
	return r
}

// PathOrder is the order paths are listed in.
var PathOrder = []string{"augmented", "decoded", "encoded", "nvme", "storage"}

// KeyValues renders the report as key=value lines, stable keys first:
// split_encoded_pct, split_decoded_pct, split_augmented_pct,
// predicted_samples_per_s; then the optimum, the single-form splits, each
// path (path.NAME.samples_per_s, path.NAME.bound_by, path.NAME.samples) and
// each input (input.KEY, input.KEY.source). Unbounded values read "inf".
func (r Report) KeyValues() string {
	var b strings.Builder
	kv := func(k string, v any) { fmt.Fprintf(&b, "%s=%v\n", k, v) }
	num := func(p *float64) string {
		if p == nil {
			return "inf"
		}
		return strconv.FormatFloat(*p, 'f', -1, 64)
	}
	split := func(prefix string, s SplitReport) {
		kv(prefix+"split_encoded_pct", s.EncodedPct)
		kv(prefix+"split_decoded_pct", s.DecodedPct)
		kv(prefix+"split_augmented_pct", s.AugmentedPct)
		kv(prefix+"predicted_samples_per_s", num(round1(s.Predicted)))
	}
	split("", r.SplitReport)
	kv("split_forced", r.Forced)
	kv("cache", r.Cache)
	kv("rules", r.Rules)
	split("optimum.", r.Optimum)
	for _, f := range []string{"encoded", "decoded", "augmented"} {
		kv("single."+f+".predicted_samples_per_s", num(round1(r.Single[f].Predicted)))
	}
	for _, name := range PathOrder {
		p := r.Paths[name]
		kv("path."+name+".samples_per_s", num(round1(p.Rate)))
		kv("path."+name+".bound_by", p.Bound)
		kv("path."+name+".samples", strconv.FormatFloat(p.Samples, 'f', -1, 64))
	}
	if v := r.Views; v != nil {
		kv("views.jobs", v.Jobs)
		kv("views.shared", strconv.FormatFloat(math.Round(v.Shared*1000)/1000, 'f', -1, 64))
		kv("views.productions_per_sample", strconv.FormatFloat(math.Round(v.ProductionsPerSample*1000)/1000, 'f', -1, 64))
		kv("views.bound_by", v.Bound)
		names := make([]string, 0, len(v.Resources))
		for k := range v.Resources {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			kv("views.resource."+k+".samples_per_s", num(round1(v.Resources[k])))
		}
	}
	for _, k := range r.order {
		in := r.Inputs[k]
		kv("input."+k, num(in.Value))
		kv("input."+k+".source", strings.ReplaceAll(in.Source, "\n", " "))
	}
	for i, w := range r.Warnings {
		kv(fmt.Sprintf("warning.%d", i), strings.ReplaceAll(w, "\n", " "))
	}
	return b.String()
}

// InputOrder returns the input keys in the order they were given.
func (r Report) InputOrder() []string { return append([]string(nil), r.order...) }

func round1(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := math.Round(*p*10) / 10
	return &v
}
