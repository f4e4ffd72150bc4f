// Package pricebound computes lower bounds on what any fleet of nodes that
// holds a set of pods costs an hour: the yardsticks the price benchmarks
// and tests measure packings against. A packing at 1.00 × a bound is
// optimal; how far above 1.00 the optimum itself lies depends on how tight
// the bound is, so there are two.
//
//   - Pooled pools the pods' CPU and memory and covers the totals with
//     fractions of nodes. It is quick and tight when pods are small next
//     to the nodes, but it may cover memory with a fraction of a machine
//     with terabytes of it, or CPU with 2-vCPU nodes that hold none of the
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
package pricebound

import (
	"math"
)

// Type is an instance type: allocatable CPU (vCPU) and memory (bytes) and
// its price ($/h).
type Type struct {
	CPU, Mem, Price float64
}

// Class is N pods with the same CPU (vCPU) and memory (bytes) requests.
type Class struct {
	CPU, Mem float64
	N        int
}

// Pooled is min Σ price_t x_t s.t. Σ cpu_t x_t ≥ cpu, Σ mem_t x_t ≥ mem,
// x ≥ 0 (see PooledBasis).
func Pooled(types []Type, cpu, mem float64) float64 {
	cost, _ := PooledBasis(types, cpu, mem)
	return cost
}

// PooledBasis is Pooled and the indices in types of its optimum's types.
// With two constraints a basic optimum uses one type or two, so it tries
// every type alone and every pair; basis[1] is -1 when one type is
// cheapest (and both are -1 when no type has CPU and memory).
func PooledBasis(types []Type, cpu, mem float64) (float64, [2]int) {
	best := math.Inf(1)
	basis := [2]int{-1, -1}
	for i, a := range types {
		if a.CPU > 0 && a.Mem > 0 {
			if cost := a.Price * math.Max(cpu/a.CPU, mem/a.Mem); cost < best {
				best, basis = cost, [2]int{i, -1}
			}
		}
	}
	for i, a := range types {
		for k := i + 1; k < len(types); k++ {
			d := types[k]
			det := a.CPU*d.Mem - d.CPU*a.Mem
			if det == 0 {
				continue
			}
			xa := (cpu*d.Mem - d.CPU*mem) / det
			xd := (a.CPU*mem - cpu*a.Mem) / det
			if cost := xa*a.Price + xd*d.Price; xa > 0 && xd > 0 && cost < best {
				best, basis = cost, [2]int{i, k}
			}
		}
	}
	return best, basis
}
