package coverlp

import "math"

const eps = 1e-9

// cover solves min Σ cost_j x_j s.t. Σ_j cols[j][i] x_j ≥ need[i] for
// every row i, x ≥ 0, need ≥ 0, with a dense two-phase tableau simplex
// (Dantzig's rule, Bland's after many pivots so that it cannot cycle). It
// returns the optimum, x, and the rows' duals (≥ 0); ok is false when no
// x covers need.
func cover(cost []float64, cols [][]float64, need []float64) (opt float64, x, duals []float64, ok bool) {
	lp := newCoverTableau(cols, need)
	if !lp.feasible(need) {
		return 0, nil, nil, false
	}
	lp.driveOutArtificials()
	phase2 := make([]float64, lp.width)
	copy(phase2, cost)
	if !run(lp.tableau, lp.basis, phase2, lp.art, lp.width) {
		return 0, nil, nil, false
	}
	opt, x = lp.solution(cost, len(cols))
	return opt, x, lp.duals(phase2), true
}

// coverTableau is the dense tableau B⁻¹[A | -I | I | need] of a covering
// program: structural columns, then one surplus and one artificial column
// per row; row[width] is the right-hand side.
type coverTableau struct {
	tableau [][]float64
	basis   []int
	surplus int // first surplus column
	art     int // first artificial column
	width   int
}

func newCoverTableau(cols [][]float64, need []float64) *coverTableau {
	rows := len(need)
	nStruct := len(cols)
	lp := &coverTableau{surplus: nStruct, art: nStruct + rows, width: nStruct + 2*rows}
	lp.tableau = make([][]float64, rows)
	for i := range lp.tableau {
		row := make([]float64, lp.width+1)
		for j, col := range cols {
			row[j] = col[i]
		}
		row[lp.surplus+i] = -1
		row[lp.art+i] = 1
		row[lp.width] = need[i]
		lp.tableau[i] = row
	}
	lp.basis = make([]int, rows)
	for i := range lp.basis {
		lp.basis[i] = lp.art + i
	}
	return lp
}

// feasible runs phase 1 (minimise the artificials) and says whether they
// all reached zero.
func (lp *coverTableau) feasible(need []float64) bool {
	phase1 := make([]float64, lp.width)
	for i := range len(lp.basis) {
		phase1[lp.art+i] = 1
	}
	if !run(lp.tableau, lp.basis, phase1, lp.width, lp.width) {
		return false
	}
	var infeasibility float64
	for row, col := range lp.basis {
		if col >= lp.art {
			infeasibility += lp.tableau[row][lp.width]
		}
	}
	return infeasibility <= 1e-7*(1+sum(need))
}

// driveOutArtificials pivots artificials still basic (at zero) out where a
// real column can take their row; a row none can is redundant and keeps
// its own.
func (lp *coverTableau) driveOutArtificials() {
	for row, basic := range lp.basis {
		if basic < lp.art {
			continue
		}
		for col := range lp.art {
			if math.Abs(lp.tableau[row][col]) > 1e-7 {
				pivot(lp.tableau, lp.basis, row, col)
				break
			}
		}
	}
}

// solution reads x (the amounts of the nStruct structural columns) and
// its cost.
func (lp *coverTableau) solution(cost []float64, nStruct int) (float64, []float64) {
	var opt float64
	amounts := make([]float64, nStruct)
	for row, col := range lp.basis {
		if col < nStruct {
			amounts[col] = lp.tableau[row][lp.width]
			opt += cost[col] * lp.tableau[row][lp.width]
		}
	}
	return opt, amounts
}

// duals are the rows' shadow prices: the surplus columns' reduced costs.
func (lp *coverTableau) duals(phase2 []float64) []float64 {
	reducedCosts := reduced(lp.tableau, lp.basis, phase2, lp.width)
	duals := make([]float64, len(lp.basis))
	for row := range duals {
		duals[row] = math.Max(reducedCosts[lp.surplus+row], 0)
	}
	return duals
}

// run pivots until no column below enter has a negative reduced cost.
// false if the program is unbounded (it cannot be: costs are ≥ 0).
func run(t [][]float64, basis []int, cost []float64, enter, width int) bool {
	for iter := 0; ; iter++ {
		entering := enteringColumn(reduced(t, basis, cost, width), enter, iter)
		if entering < 0 {
			return true
		}
		leaving := leavingRow(t, basis, entering, width)
		if leaving < 0 {
			return false
		}
		pivot(t, basis, leaving, entering)
	}
}

// blandAfter is the pivot count after which run takes the first improving
// column (Bland's rule) instead of the most negative (Dantzig's), so that
// it cannot cycle.
const blandAfter = 5000

// enteringColumn is the column below enter to bring into the basis, or -1
// when none improves.
func enteringColumn(reducedCosts []float64, enter, iter int) int {
	entering := -1
	for col := range enter {
		if reducedCosts[col] < -eps && (entering < 0 || (iter < blandAfter && reducedCosts[col] < reducedCosts[entering])) {
			entering = col
			if iter >= blandAfter {
				break // Bland: the first improving column
			}
		}
	}
	return entering
}

// leavingRow is the ratio test's row (ties to the lowest basic column), or
// -1 when the entering column is unbounded.
func leavingRow(t [][]float64, basis []int, entering, width int) int {
	leaving := -1
	for row := range t {
		if t[row][entering] <= eps {
			continue
		}
		if leaving < 0 {
			leaving = row
			continue
		}
		ratio := t[row][width] / t[row][entering]
		best := t[leaving][width] / t[leaving][entering]
		if ratio < best-eps || (ratio < best+eps && basis[row] < basis[leaving]) {
			leaving = row
		}
	}
	return leaving
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
