// Package coverlp is the covering linear programs over instance types: how
// cheaply can nodes hold a set of pods? It has one home for them, used by
// the scheduler (the dual prices that order pods, the two-type mix it
// divides pods by), by disruption (the fleet's price floor, rebalancing's
// split by shape) and by the price benchmarks (the lower bounds a packing
// is measured against).
//
//   - Solve covers the pods' pooled CPU and memory with fractions of nodes:
//     min Σ price_t x_t s.t. Σ cpu_t x_t ≥ cpu, Σ mem_t x_t ≥ mem, x ≥ 0.
//     With two constraints an optimum uses one type or two, so it is solved
//     in closed form, and it reports the optimum's types and the dual
//     prices of CPU and memory. Its cost is a lower bound on any fleet
//     that holds the pods, quick and tight when pods are small next to the
//     nodes, but it may cover memory with a fraction of a machine with
//     terabytes of it, or CPU with 2-vCPU nodes that hold none of the
//     larger pods.
//   - Fit knows which pods fit which type and that pods are whole: it is
//     the configuration LP (Gilmore and Gomory) over pod classes, where a
//     node of a small type holds a whole number of pods of each class and
//     a node of a larger type a fractional mix within its CPU and memory,
//     and a type is bought in whole nodes (none, or at least one).
//
// Both are lower bounds: every fleet that holds the pods is a solution of
// the program each solves (for Fit, in some branch of its search), so no
// fleet costs less. Pods-per-node limits and daemonset overhead are left
// out; leaving a constraint out only lowers a bound.
package coverlp

import (
	"math"
)

// Type is an instance type: allocatable CPU and memory (any units, the
// same as the demand's) and its price ($/h).
type Type struct {
	CPU, Mem, Price float64
}

// Class is N pods with the same CPU (vCPU) and memory (bytes) requests.
type Class struct {
	CPU, Mem float64
	N        int
}

// Use is a type of an optimum: its index in the types solved over and how
// many nodes of it (fractional) the optimum buys. Index is -1 for no type.
type Use struct {
	Index int
	Nodes float64
}

// Solution is the optimum of Solve.
type Solution struct {
	// Cost is the optimum's price: +Inf when no type has CPU and memory,
	// 0 when there is nothing to cover.
	Cost float64
	// Basis is the optimum's types: Basis[1].Index is -1 when one type is
	// cheapest, both are -1 when there is no optimum or nothing to cover.
	Basis [2]Use
	// DualCPU and DualMem are the dual prices of CPU and memory (price per
	// unit): a type of the optimum costs exactly its CPU and memory at
	// these prices, no type costs less. Both 0 without an optimum.
	DualCPU, DualMem float64
}

// Solve is min Σ price_t x_t s.t. Σ cpu_t x_t ≥ cpu, Σ mem_t x_t ≥ mem,
// x ≥ 0 over types. A type without CPU or memory is never used; a price is
// taken as given (a caller that must not buy free types leaves them out).
// It tries every type alone and then every pair (an optimum of a program
// with two constraints has at most two basic columns); the first strictly
// cheaper candidate wins, so ties keep the earlier type, and a single type
// the earlier pair.
func Solve(types []Type, cpu, mem float64) Solution {
	sol := Solution{Cost: math.Inf(1), Basis: [2]Use{{Index: -1}, {Index: -1}}}
	usable := make([]int, 0, len(types))
	for i, nodeType := range types {
		if nodeType.CPU > 0 && nodeType.Mem > 0 {
			usable = append(usable, i)
		}
	}
	if len(usable) == 0 {
		return sol
	}
	if cpu <= 0 && mem <= 0 {
		sol.Cost = 0
		return sol
	}
	for _, index := range usable {
		sol.trySingle(types, index, cpu, mem)
	}
	for at, first := range usable {
		for _, second := range usable[at+1:] {
			sol.tryPair(types, first, second, cpu, mem)
		}
	}
	return sol
}

// trySingle takes type i alone if it covers the demand more cheaply than
// the best so far; the resource it runs out of first carries its price.
func (s *Solution) trySingle(types []Type, i int, cpu, mem float64) {
	nodeType := types[i]
	nodes := math.Max(cpu/nodeType.CPU, mem/nodeType.Mem)
	cost := nodeType.Price * nodes
	if !(cost < s.Cost) { // a NaN cost never wins
		return
	}
	s.Cost = cost
	s.Basis = [2]Use{{Index: i, Nodes: nodes}, {Index: -1}}
	if cpu/nodeType.CPU >= mem/nodeType.Mem {
		s.DualCPU = nodeType.Price / nodeType.CPU
		s.DualMem = 0
	} else {
		s.DualCPU = 0
		s.DualMem = nodeType.Price / nodeType.Mem
	}
}

// tryPair takes types i and k together if the pair that meets both
// constraints exactly, buying neither a negative number of nodes, costs
// less than the best so far; the dual prices then make both types cost
// exactly their price.
func (s *Solution) tryPair(types []Type, i, k int, cpu, mem float64) {
	typeA := types[i]
	typeD := types[k]
	det := typeA.CPU*typeD.Mem - typeD.CPU*typeA.Mem
	if det == 0 {
		return
	}
	nodesA := (cpu*typeD.Mem - typeD.CPU*mem) / det
	nodesD := (typeA.CPU*mem - cpu*typeA.Mem) / det
	if nodesA < 0 || nodesD < 0 {
		return
	}
	cost := nodesA*typeA.Price + nodesD*typeD.Price
	if !(cost < s.Cost) { // a NaN cost (0 nodes of an infinite price) never wins
		return
	}
	s.Cost = cost
	s.Basis = [2]Use{{Index: i, Nodes: nodesA}, {Index: k, Nodes: nodesD}}
	s.DualCPU = (typeA.Price*typeD.Mem - typeD.Price*typeA.Mem) / det
	s.DualMem = (typeA.CPU*typeD.Price - typeD.CPU*typeA.Price) / det
}
