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
	f := newFitter(undominated(types), classes)
	root := &branch{out: map[int]bool{}, whole: map[int]bool{}}
	f.solve(root)
	open := &branches{}
	if !math.IsInf(root.bound, 1) {
		heap.Push(open, root)
	}
	for solves := 1; open.Len() > 0; {
		br := heap.Pop(open).(*branch)
		frac := -1
		for t, x := range br.nodes {
			if x < 1-1e-7 && !br.whole[t] && (frac < 0 || f.types[t].Price*(1-x) > f.types[frac].Price*(1-br.nodes[frac])) {
				frac = t
			}
		}
		if frac < 0 || solves+2 > maxBranches {
			return br.bound
		}
		for _, next := range []*branch{
			{out: with(br.out, frac), whole: br.whole},
			{out: br.out, whole: with(br.whole, frac)},
		} {
			f.solve(next)
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
	for _, t := range sorted {
		if t.Price > 0 && t.CPU > 0 && t.Mem > 0 && !slices.ContainsFunc(kept, func(k Type) bool { return k.CPU >= t.CPU && k.Mem >= t.Mem }) {
			kept = append(kept, t)
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
	f := &fitter{types: types, classes: classes, seen: map[string]bool{}, knap: make([]*knapsack, len(types))}
	for ti, t := range types {
		var fit []int
		for ci, c := range classes {
			if c.CPU <= t.CPU && c.Mem <= t.Mem {
				fit = append(fit, ci)
			}
		}
		if t.CPU <= IntegerCPU {
			f.knap[ti] = newKnapsack(t, classes)
			for _, ci := range fit { // a start: one class per node
				z := make([]float64, len(classes))
				z[ci] = math.Floor(math.Min(t.CPU/classes[ci].CPU, t.Mem/classes[ci].Mem) + 1e-9)
				f.add(ti, z)
			}
			continue
		}
		for _, ci := range fit {
			z := make([]float64, len(classes))
			z[ci] = math.Min(t.CPU/classes[ci].CPU, t.Mem/classes[ci].Mem)
			f.add(ti, z)
		}
		for i, c1 := range fit {
			for _, c2 := range fit[i+1:] {
				a, b := classes[c1], classes[c2]
				det := a.CPU*b.Mem - b.CPU*a.Mem
				if det == 0 {
					continue
				}
				z1 := (t.CPU*b.Mem - b.CPU*t.Mem) / det
				z2 := (a.CPU*t.Mem - t.CPU*a.Mem) / det
				if z1 > 0 && z2 > 0 {
					z := make([]float64, len(classes))
					z[c1], z[c2] = z1, z2
					f.add(ti, z)
				}
			}
		}
	}
	return f
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
	wholes := make([]int, 0, len(br.whole))
	for t := range br.whole {
		wholes = append(wholes, t)
	}
	slices.Sort(wholes)
	need := make([]float64, len(f.classes)+len(wholes))
	for i, c := range f.classes {
		need[i] = float64(c.N)
	}
	for k := range wholes {
		need[len(f.classes)+k] = 1
	}
	for {
		var use []int
		for i, p := range f.patterns {
			if !br.out[p.typ] {
				use = append(use, i)
			}
		}
		cost := make([]float64, len(use))
		cols := make([][]float64, len(use))
		for j, i := range use {
			p := f.patterns[i]
			cost[j] = f.types[p.typ].Price
			col := make([]float64, len(need))
			copy(col, p.z)
			if k := slices.Index(wholes, p.typ); k >= 0 {
				col[len(f.classes)+k] = 1
			}
			cols[j] = col
		}
		opt, x, duals, ok := cover(cost, cols, need)
		if !ok {
			br.bound = math.Inf(1)
			return
		}
		added := false
		for t, k := range f.knap {
			if k == nil || br.out[t] {
				continue
			}
			w := 0.0
			if i := slices.Index(wholes, t); i >= 0 {
				w = duals[len(f.classes)+i]
			}
			if z, value := k.best(duals[:len(f.classes)]); value+w > f.types[t].Price*(1+1e-7)+eps && f.add(t, z) {
				added = true
			}
		}
		if !added {
			br.bound = opt
			br.nodes = map[int]float64{}
			for j, i := range use {
				if x[j] > eps {
					br.nodes[f.patterns[i].typ] += x[j]
				}
			}
			return
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
	b := old[len(old)-1]
	*h = old[:len(old)-1]
	return b
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
