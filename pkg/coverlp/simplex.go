package coverlp

import "math"

const eps = 1e-9

// cover solves min Σ cost_j x_j s.t. Σ_j cols[j][i] x_j ≥ need[i] for
// every row i, x ≥ 0, need ≥ 0, with a dense two-phase tableau simplex
// (Dantzig's rule, Bland's after many pivots so that it cannot cycle). It
// returns the optimum, x, and the rows' duals (≥ 0); ok is false when no
// x covers need.
func cover(cost []float64, cols [][]float64, need []float64) (opt float64, x, duals []float64, ok bool) {
	m, nStruct := len(need), len(cols)
	surplus, art, width := nStruct, nStruct+m, nStruct+2*m
	t := make([][]float64, m) // rows of B⁻¹[A | -I | I | need]
	for i := range t {
		row := make([]float64, width+1)
		for j, col := range cols {
			row[j] = col[i]
		}
		row[surplus+i] = -1
		row[art+i] = 1
		row[width] = need[i]
		t[i] = row
	}
	basis := make([]int, m)
	for i := range basis {
		basis[i] = art + i
	}
	phase1 := make([]float64, width)
	for i := range m {
		phase1[art+i] = 1
	}
	if !run(t, basis, phase1, width, width) {
		return 0, nil, nil, false
	}
	var infeasibility float64
	for i, b := range basis {
		if b >= art {
			infeasibility += t[i][width]
		}
	}
	if infeasibility > 1e-7*(1+sum(need)) {
		return 0, nil, nil, false
	}
	// Artificials still basic (at zero) leave where a real column can
	// take their row; a row none can is redundant and keeps its own.
	for i, b := range basis {
		if b < art {
			continue
		}
		for j := range art {
			if math.Abs(t[i][j]) > 1e-7 {
				pivot(t, basis, i, j)
				break
			}
		}
	}
	phase2 := make([]float64, width)
	copy(phase2, cost)
	if !run(t, basis, phase2, art, width) {
		return 0, nil, nil, false
	}
	x = make([]float64, nStruct)
	for i, b := range basis {
		if b < nStruct {
			x[b] = t[i][width]
			opt += cost[b] * t[i][width]
		}
	}
	d := reduced(t, basis, phase2, width)
	duals = make([]float64, m)
	for i := range m {
		duals[i] = math.Max(d[surplus+i], 0)
	}
	return opt, x, duals, true
}

// run pivots until no column below enter has a negative reduced cost.
// false if the program is unbounded (it cannot be: costs are ≥ 0).
func run(t [][]float64, basis []int, cost []float64, enter, width int) bool {
	for iter := 0; ; iter++ {
		d := reduced(t, basis, cost, width)
		j := -1
		for k := range enter {
			if d[k] < -eps && (j < 0 || (iter < 5000 && d[k] < d[j])) {
				j = k
				if iter >= 5000 {
					break // Bland: the first improving column
				}
			}
		}
		if j < 0 {
			return true
		}
		r := -1
		for i := range t {
			if t[i][j] > eps {
				ratio := t[i][width] / t[i][j]
				if r < 0 {
					r = i
					continue
				}
				best := t[r][width] / t[r][j]
				if ratio < best-eps || (ratio < best+eps && basis[i] < basis[r]) {
					r = i
				}
			}
		}
		if r < 0 {
			return false
		}
		pivot(t, basis, r, j)
	}
}

func reduced(t [][]float64, basis []int, cost []float64, width int) []float64 {
	d := make([]float64, width)
	copy(d, cost)
	for i, b := range basis {
		if cb := cost[b]; cb != 0 {
			for j := range width {
				d[j] -= cb * t[i][j]
			}
		}
	}
	return d
}

func pivot(t [][]float64, basis []int, r, j int) {
	p := t[r][j]
	for k := range t[r] {
		t[r][k] /= p
	}
	for i := range t {
		if i == r {
			continue
		}
		if f := t[i][j]; f != 0 {
			for k := range t[i] {
				t[i][k] -= f * t[r][k]
			}
		}
	}
	basis[r] = j
}

func sum(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}
