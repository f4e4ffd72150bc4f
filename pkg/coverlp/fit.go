package coverlp

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"
)

// IntegerCPU: types of at most this many vCPU hold whole pods in Fit
// (their pods are large next to them, and a fractional mix would
// overstate what they hold); larger types hold fractional mixes.
const IntegerCPU = 4

// Fit is the configuration-LP bound described in the package comment,
// after at most maxBranches solves of its search over whole nodes (the
// least bound of the branches still open when it stops early, which is
// still a lower bound). +Inf when some class fits no type.
func Fit(types []Type, classes []Class, maxBranches int) float64 {
	solver := newFitter(undominated(types), classes)
	root := &branch{out: map[int]bool{}, whole: map[int]bool{}}
	solver.solve(root)
	open := &branches{}
	if !math.IsInf(root.bound, 1) {
		heap.Push(open, root)
	}
	for solves := 1; open.Len() > 0; {
		br := heap.Pop(open).(*branch)
		frac := -1
		for typeIndex, count := range br.nodes {
			if count < 1-1e-7 && !br.whole[typeIndex] && (frac < 0 || solver.types[typeIndex].Price*(1-count) > solver.types[frac].Price*(1-br.nodes[frac])) {
				frac = typeIndex
			}
		}
		if frac < 0 || solves+2 > maxBranches {
			return br.bound
		}
		for _, next := range []*branch{
			{out: with(br.out, frac), whole: br.whole},
			{out: br.out, whole: with(br.whole, frac)},
		} {
			solver.solve(next)
			solves++
			if !math.IsInf(next.bound, 1) {
				heap.Push(open, next)
			}
		}
	}
	return math.Inf(1)
}

// undominated drops the types another type beats on CPU, memory and
// price at once (they are in no optimum).
func undominated(types []Type) []Type {
	sorted := slices.Clone(types)
	slices.SortFunc(sorted, func(a, b Type) int {
		return cmp.Or(cmp.Compare(a.Price, b.Price), -cmp.Compare(a.CPU, b.CPU), -cmp.Compare(a.Mem, b.Mem))
	})
	var kept []Type
	for _, candidate := range sorted {
		if candidate.Price > 0 && candidate.CPU > 0 && candidate.Mem > 0 && !slices.ContainsFunc(kept, func(k Type) bool { return k.CPU >= candidate.CPU && k.Mem >= candidate.Mem }) {
			kept = append(kept, candidate)
		}
	}
	return kept
}

// pattern is what one node of a type holds: z pods of each class.
type pattern struct {
	typ int
	z   []float64
}

type fitter struct {
	types   []Type
	classes []Class
	// patterns: every larger type's vertices, and the small types'
	// patterns generated so far (shared by the branches).
	patterns []pattern
	seen     map[string]bool
	knap     []*knapsack // per type; nil for larger types
}

func newFitter(types []Type, classes []Class) *fitter {
	solver := &fitter{types: types, classes: classes, seen: map[string]bool{}, knap: make([]*knapsack, len(types))}
	for ti, nodeType := range types {
		var fit []int
		for ci, class := range classes {
			if class.CPU <= nodeType.CPU && class.Mem <= nodeType.Mem {
				fit = append(fit, ci)
			}
		}
		if nodeType.CPU <= IntegerCPU {
			solver.knap[ti] = newKnapsack(nodeType, classes)
			for _, ci := range fit { // a start: one class per node
				counts := make([]float64, len(classes))
				counts[ci] = math.Floor(math.Min(nodeType.CPU/classes[ci].CPU, nodeType.Mem/classes[ci].Mem) + 1e-9)
				solver.add(ti, counts)
			}
			continue
		}
		for _, ci := range fit {
			counts := make([]float64, len(classes))
			counts[ci] = math.Min(nodeType.CPU/classes[ci].CPU, nodeType.Mem/classes[ci].Mem)
			solver.add(ti, counts)
		}
		for i, c1 := range fit {
			for _, c2 := range fit[i+1:] {
				first := classes[c1]
				second := classes[c2]
				det := first.CPU*second.Mem - second.CPU*first.Mem
				if det == 0 {
					continue
				}
				z1 := (nodeType.CPU*second.Mem - second.CPU*nodeType.Mem) / det
				z2 := (first.CPU*nodeType.Mem - nodeType.CPU*first.Mem) / det
				if z1 > 0 && z2 > 0 {
					counts := make([]float64, len(classes))
					counts[c1] = z1
					counts[c2] = z2
					solver.add(ti, counts)
				}
			}
		}
	}
	return solver
}

func (f *fitter) add(typ int, z []float64) bool {
	key := fmt.Sprint(typ, z)
	if f.seen[key] {
		return false
	}
	f.seen[key] = true
	f.patterns = append(f.patterns, pattern{typ, z})
	return true
}

// branch: types left out, and types bought at least once.
type branch struct {
	out, whole map[int]bool
	bound      float64
	nodes      map[int]float64 // nodes of each type at the optimum
}

// solve is the configuration LP under br's restrictions, generating the
// small types' patterns that price out (column generation).
func (f *fitter) solve(br *branch) {
	wholes := sortedKeys(br.whole)
	need := f.need(len(wholes))
	for {
		use, cost, cols := f.restrictedProgram(br, wholes, len(need))
		opt, uses, duals, ok := cover(cost, cols, need)
		if !ok {
			br.bound = math.Inf(1)
			return
		}
		if !f.addPricedOut(br, wholes, duals) {
			f.record(br, opt, use, uses)
			return
		}
	}
}

func sortedKeys(set map[int]bool) []int {
	keys := make([]int, 0, len(set))
	for key := range set {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return keys
}

// need is the right-hand side: each class's pod count, then 1 for each of
// the wholes types bought at least once.
func (f *fitter) need(wholes int) []float64 {
	need := make([]float64, len(f.classes)+wholes)
	for i, class := range f.classes {
		need[i] = float64(class.N)
	}
	for slot := range wholes {
		need[len(f.classes)+slot] = 1
	}
	return need
}

// restrictedProgram is the LP over the patterns br allows: which patterns
// (use), their prices and their columns.
func (f *fitter) restrictedProgram(br *branch, wholes []int, rows int) ([]int, []float64, [][]float64) {
	var use []int
	for i, pat := range f.patterns {
		if !br.out[pat.typ] {
			use = append(use, i)
		}
	}
	cost := make([]float64, len(use))
	cols := make([][]float64, len(use))
	for j, patternIndex := range use {
		pat := f.patterns[patternIndex]
		cost[j] = f.types[pat.typ].Price
		col := make([]float64, rows)
		copy(col, pat.z)
		if slot := slices.Index(wholes, pat.typ); slot >= 0 {
			col[len(f.classes)+slot] = 1
		}
		cols[j] = col
	}
	return use, cost, cols
}

// addPricedOut adds each allowed type's best pattern at duals when it
// prices out (is worth more than the type costs), and says whether any
// was new.
func (f *fitter) addPricedOut(br *branch, wholes []int, duals []float64) bool {
	added := false
	for typeIndex, sack := range f.knap {
		if sack == nil || br.out[typeIndex] {
			continue
		}
		wholeDual := 0.0
		if slot := slices.Index(wholes, typeIndex); slot >= 0 {
			wholeDual = duals[len(f.classes)+slot]
		}
		if counts, value := sack.best(duals[:len(f.classes)]); value+wholeDual > f.types[typeIndex].Price*(1+1e-7)+eps && f.add(typeIndex, counts) {
			added = true
		}
	}
	return added
}

// record keeps the LP optimum as br's bound, with the nodes of each type
// it buys.
func (f *fitter) record(br *branch, opt float64, use []int, uses []float64) {
	br.bound = opt
	br.nodes = map[int]float64{}
	for j, patternIndex := range use {
		if uses[j] > eps {
			br.nodes[f.patterns[patternIndex].typ] += uses[j]
		}
	}
}

type branches []*branch

func (h branches) Len() int           { return len(h) }
func (h branches) Less(i, j int) bool { return h[i].bound < h[j].bound }
func (h branches) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *branches) Push(x any)        { *h = append(*h, x.(*branch)) }
func (h *branches) Pop() any {
	old := *h
	last := old[len(old)-1]
	*h = old[:len(old)-1]
	return last
}

// with is m and k.
func with(m map[int]bool, k int) map[int]bool {
	out := make(map[int]bool, len(m)+1)
	for key := range m {
		out[key] = true
	}
	out[k] = true
	return out
}
