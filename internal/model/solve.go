package model

import (
	"math"
)

// DefaultSteps is the paper's brute-force grid: 1 % steps (§5.3).
const DefaultSteps = 100

// BruteForce is the paper's MDP (§5.3): it evaluates every split on a grid of
// 1/steps (steps = 100 is the paper's 1 %) and returns the best. Ties keep
// the split met first, in order of decreasing x_E then decreasing x_D. It
// runs (steps+1)(steps+2)/2 evaluations; it is the test oracle of [Solve].
func BruteForce(p Params, steps int) (Result, error) {
	if err := p.Validate(); err != nil {
		return Result{}, err
	}
	if steps < 1 || steps > 100000 {
		return Result{}, invalid("model: brute force steps = %d: want 1 to 100000", steps)
	}
	ps := Paths(p)
	var best Result
	best.DSI = math.Inf(-1)
	for i := steps; i >= 0; i-- {
		for j := steps - i; j >= 0; j-- {
			s := Split{E: float64(i) / float64(steps), D: float64(j) / float64(steps)}
			s.A = float64(steps-i-j) / float64(steps)
			if p.Views {
				if v := views(p, s).dsi; v > best.DSI {
					best = Result{Split: s, DSI: v}
				}
				continue
			}
			c := SampleCounts(p, s)
			if v := overall(p, c, ps); v > best.DSI {
				best = Result{Split: s, Counts: c, Paths: ps, DSI: v}
			}
		}
	}
	if p.Views {
		best = evaluateViews(p, best.Split)
	}
	return best, nil
}

// Solve is the exact MDP. In the sample counts N = (N_A, N_D, N_E), equations
// 2, 4 and 6 reach exactly the points of the polytope
//
//	N ≥ 0,  N_A + N_D + N_E ≤ N_total,  M·S_data·(N_A + N_D) + S_data·N_E ≤ S_cache
//
// on which the memory is full or every sample is in memory. DSI_overall is
// linear in N there, except for one kink where the NVMe tier stops being
// full (N_A + N_D + N_E = N_total − S_nvme/S_data), so each linear piece
// takes its maximum at a vertex formed by three of these six planes. Solve
// intersects every triple (at most 20 solves of a 3×3 system), keeps the
// feasible points, evaluates the model at each, and returns the best. Ties go
// to more encoded, then more decoded memory: less preprocessing work for the
// same throughput.
func Solve(p Params) (Result, error) {
	if err := p.Validate(); err != nil {
		return Result{}, err
	}
	if p.Views {
		if p.SCache == 0 {
			return evaluateViews(p, AllEncoded), nil
		}
		return solveViews(p), nil
	}
	ps := Paths(p)
	if p.SCache == 0 {
		// No memory: every split is the same.
		s := AllEncoded
		c := SampleCounts(p, s)
		return Result{Split: s, Counts: c, Paths: ps, DSI: overall(p, c, ps)}, nil
	}
	nt := p.NTotal
	ms := p.M * p.SData
	// Planes a·N = b.
	planes := make([][4]float64, 0, 6)
	planes = append(planes,
		[4]float64{1, 0, 0, 0},                // N_A = 0
		[4]float64{0, 1, 0, 0},                // N_D = 0
		[4]float64{0, 0, 1, 0},                // N_E = 0
		[4]float64{1, 1, 1, nt},               // all samples in memory
		[4]float64{ms, ms, p.SData, p.SCache}, // memory full
	)
	if kink := nt - p.SNVMe/p.SData; kink > 0 && kink < nt {
		planes = append(planes, [4]float64{1, 1, 1, kink}) // NVMe tier just full
	}
	best := Result{DSI: math.Inf(-1)}
	const tol = 1e-9
	for i := 0; i < len(planes); i++ {
		for j := i + 1; j < len(planes); j++ {
			for k := j + 1; k < len(planes); k++ {
				n, ok := solve3(planes[i], planes[j], planes[k])
				if !ok {
					continue
				}
				// Feasible, within rounding?
				if n[0] < -tol*nt || n[1] < -tol*nt || n[2] < -tol*nt {
					continue
				}
				in := n[0] + n[1] + n[2]
				mem := ms*(n[0]+n[1]) + p.SData*n[2]
				if in > nt*(1+tol) || mem > p.SCache*(1+tol) {
					continue
				}
				if in < nt*(1-tol) && mem < p.SCache*(1-tol) {
					continue // neither face: not reachable by a split
				}
				s := splitFor(p, n)
				c := SampleCounts(p, s)
				r := Result{Split: s, Counts: c, Paths: ps, DSI: overall(p, c, ps)}
				if better(r, best) {
					best = r
				}
			}
		}
	}
	if math.IsInf(best.DSI, -1) {
		// Cannot happen for valid input: a polytope with a reachable face
		// always has a vertex. Fall back to the encoded split.
		c := SampleCounts(p, AllEncoded)
		best = Result{Split: AllEncoded, Counts: c, Paths: ps, DSI: overall(p, c, ps)}
	}
	return best, nil
}

// better reports whether r beats best: a higher DSI, or (within rounding) the
// same DSI with more memory for encoded, then for decoded samples.
func better(r, best Result) bool {
	if math.IsInf(best.DSI, -1) {
		return true
	}
	const rel = 1e-12
	scale := math.Max(math.Abs(r.DSI), math.Abs(best.DSI))
	switch {
	case r.DSI > best.DSI+rel*scale:
		return true
	case r.DSI < best.DSI-rel*scale:
		return false
	case r.Split.E != best.Split.E:
		return r.Split.E > best.Split.E
	default:
		return r.Split.D > best.Split.D
	}
}

// splitFor turns sample counts on a reachable face into the split that
// produces them. Memory left over when every sample is in memory goes to the
// form whose count is capped by N_total, so equations 2, 4 and 6 give back
// the same counts: augmented if every sample is augmented, else decoded if no
// sample is encoded, else encoded.
func splitFor(p Params, n [3]float64) Split {
	nt := p.NTotal
	for i := range n {
		n[i] = math.Max(0, math.Min(n[i], nt))
	}
	s := Split{
		A: n[0] * p.M * p.SData / p.SCache,
		D: n[1] * p.M * p.SData / p.SCache,
		E: n[2] * p.SData / p.SCache,
	}
	sum := s.A + s.D + s.E
	if sum > 1 {
		s.A, s.D, s.E = s.A/sum, s.D/sum, s.E/sum
		return s
	}
	slack := 1 - sum
	switch {
	case n[1] <= 0 && n[2] <= 0 && n[0] >= nt*(1-1e-12):
		s.A += slack
	case n[2] <= 0:
		s.D += slack
	default:
		s.E += slack
	}
	return s
}

// solve3 solves the 3×3 system whose rows are the planes a·x = b, by
// Cramer's rule. ok is false when the planes do not meet in one point.
func solve3(p, q, r [4]float64) (x [3]float64, ok bool) {
	det := func(a, b, c [3]float64) float64 {
		return a[0]*(b[1]*c[2]-b[2]*c[1]) - a[1]*(b[0]*c[2]-b[2]*c[0]) + a[2]*(b[0]*c[1]-b[1]*c[0])
	}
	a := [3]float64{p[0], p[1], p[2]}
	b := [3]float64{q[0], q[1], q[2]}
	c := [3]float64{r[0], r[1], r[2]}
	d := det(a, b, c)
	scale := norm(a) * norm(b) * norm(c)
	if scale == 0 || math.Abs(d) <= 1e-12*scale {
		return x, false
	}
	rhs := [3]float64{p[3], q[3], r[3]}
	for i := 0; i < 3; i++ {
		a2, b2, c2 := a, b, c
		a2[i], b2[i], c2[i] = rhs[0], rhs[1], rhs[2]
		x[i] = det(a2, b2, c2) / d
	}
	return x, true
}

func norm(v [3]float64) float64 { return math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2]) }
