package coverlp

import "math"

const eps = 1e-9

// cover solves min Σ cost_j x_j s.t. Σ_j cols[j][i] x_j ≥ need[i] for
// every row i, x ≥ 0, need ≥ 0, with a dense two-phase tableau simplex
// (Dantzig's rule, Bland's after many pivots so that it cannot cycle). It
// returns the optimum, x, and the rows' duals (≥ 0); ok is false when no
// x covers need.
func cover(cost []float64, cols [][]float64, need []float64) (opt float64, x, duals []float64, ok bool) {
	rows := len(need)
	nStruct := len(cols)
	surplus := nStruct                 // first surplus column
	art := nStruct + rows              // first artificial column
	width := nStruct + 2*rows          // columns; row[width] is the right-hand side
	tableau := make([][]float64, rows) // rows of B⁻¹[A | -I | I | need]
	for i := range tableau {
		row := make([]float64, width+1)
		for j, col := range cols {
			row[j] = col[i]
		}
		row[surplus+i] = -1
		row[art+i] = 1
		row[width] = need[i]
		tableau[i] = row
	}
	basis := make([]int, rows)
	for i := range basis {
		basis[i] = art + i
	}
	phase1 := make([]float64, width)
	for i := range rows {
		phase1[art+i] = 1
	}
	if !run(tableau, basis, phase1, width, width) {
		return 0, nil, nil, false
	}
	var infeasibility float64
	for row, col := range basis {
		if col >= art {
			infeasibility += tableau[row][width]
		}
	}
	if infeasibility > 1e-7*(1+sum(need)) {
		return 0, nil, nil, false
	}
	// Artificials still basic (at zero) leave where a real column can
	// take their row; a row none can is redundant and keeps its own.
	for row, basic := range basis {
		if basic < art {
			continue
		}
		for col := range art {
			if math.Abs(tableau[row][col]) > 1e-7 {
				pivot(tableau, basis, row, col)
				break
			}
		}
	}
	phase2 := make([]float64, width)
	copy(phase2, cost)
	if !run(tableau, basis, phase2, art, width) {
		return 0, nil, nil, false
	}
	x = make([]float64, nStruct)
	for row, col := range basis {
		if col < nStruct {
			x[col] = tableau[row][width]
			opt += cost[col] * tableau[row][width]
		}
	}
	reducedCosts := reduced(tableau, basis, phase2, width)
	duals = make([]float64, rows)
	for row := range rows {
		duals[row] = math.Max(reducedCosts[surplus+row], 0)
	}
	return opt, x, duals, true
}

// run pivots until no column below enter has a negative reduced cost.
// false if the program is unbounded (it cannot be: costs are ≥ 0).
func run(t [][]float64, basis []int, cost []float64, enter, width int) bool {
	for iter := 0; ; iter++ {
		reducedCosts := reduced(t, basis, cost, width)
		entering := -1
		for col := range enter {
			if reducedCosts[col] < -eps && (entering < 0 || (iter < 5000 && reducedCosts[col] < reducedCosts[entering])) {
				entering = col
				if iter >= 5000 {
					break // Bland: the first improving column
				}
			}
		}
		if entering < 0 {
			return true
		}
		leaving := -1
		for row := range t {
			if t[row][entering] > eps {
				ratio := t[row][width] / t[row][entering]
				if leaving < 0 {
					leaving = row
					continue
				}
				best := t[leaving][width] / t[leaving][entering]
				if ratio < best-eps || (ratio < best+eps && basis[row] < basis[leaving]) {
					leaving = row
				}
			}
		}
		if leaving < 0 {
			return false
		}
		pivot(t, basis, leaving, entering)
	}
}

func reduced(t [][]float64, basis []int, cost []float64, width int) []float64 {
	reducedCosts := make([]float64, width)
	copy(reducedCosts, cost)
	for row, basic := range basis {
		if cb := cost[basic]; cb != 0 {
			for col := range width {
				reducedCosts[col] -= cb * t[row][col]
			}
		}
	}
	return reducedCosts
}

func pivot(t [][]float64, basis []int, r, j int) {
	pivotValue := t[r][j]
	for col := range t[r] {
		t[r][col] /= pivotValue
	}
	for row := range t {
		if row == r {
			continue
		}
		if factor := t[row][j]; factor != 0 {
			for col := range t[row] {
				t[row][col] -= factor * t[r][col]
			}
		}
	}
	basis[r] = j
}

func sum(v []float64) float64 {
	var total float64
	for _, value := range v {
		total += value
	}
	return total
}
