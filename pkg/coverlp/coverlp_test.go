package coverlp

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

const gib = 1 << 30

func TestBounds(t *testing.T) {
	small := Type{CPU: 2, Mem: 2 * gib, Price: 0.5}
	big := Type{CPU: 16, Mem: 64 * gib, Price: 8}
	for _, tc := range []struct {
		name          string
		types         []Type
		classes       []Class
		pooled, fit   float64
		fitIsInfinite bool
	}{
		{
			name:    "whole pods: three 1.5-vCPU pods take three 2-vCPU nodes",
			types:   []Type{small},
			classes: []Class{{CPU: 1.5, Mem: 0.5 * gib, N: 3}},
			pooled:  3 * 1.5 / 2 * 0.5, fit: 3 * 0.5,
		},
		{
			name:    "fits and whole nodes: pods too big for the cheap type buy one large node",
			types:   []Type{small, big},
			classes: []Class{{CPU: 1, Mem: 4 * gib, N: 4}},
			// Solve: the small type covers the CPU, a quarter of the
			// large one the memory.
			pooled: 0.25 * 8, fit: 8,
		},
		{
			name:    "mixes: CPU-heavy and memory-heavy pods share large nodes",
			types:   []Type{big},
			classes: []Class{{CPU: 2, Mem: 1 * gib, N: 28}, {CPU: 0.5, Mem: 14.25 * gib, N: 16}},
			// 64 vCPU and 256 GiB: four nodes, full on both.
			pooled: 4 * 8, fit: 4 * 8,
		},
		{
			name:          "a pod no type holds",
			types:         []Type{small},
			classes:       []Class{{CPU: 4, Mem: gib, N: 1}},
			pooled:        2 * 0.5, // pooling does not know
			fitIsInfinite: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cpu, mem float64
			for _, c := range tc.classes {
				cpu += c.CPU * float64(c.N)
				mem += c.Mem * float64(c.N)
			}
			if got := Solve(tc.types, cpu, mem).Cost; math.Abs(got-tc.pooled) > 1e-9 {
				t.Errorf("Solve = %.6f, want %.6f", got, tc.pooled)
			}
			got := Fit(tc.types, tc.classes, 50)
			switch {
			case tc.fitIsInfinite && !math.IsInf(got, 1):
				t.Errorf("Fit = %.6f, want +Inf", got)
			case !tc.fitIsInfinite && math.Abs(got-tc.fit) > 1e-6:
				t.Errorf("Fit = %.6f, want %.6f", got, tc.fit)
			}
		})
	}
}

// TestFitIsALowerBound: on random small instances, Fit lies between Solve's cost
// and the cheapest fleet found by trying every type for a first-fit
// decreasing packing (a real fleet, so at least the optimum).
func TestFitIsALowerBound(t *testing.T) {
	r := rand.New(rand.NewSource(1)) //nolint:gosec // deterministic
	for i := range 40 {
		var types []Type
		for range 1 + r.Intn(4) {
			cpu := []float64{2, 4, 8, 16}[r.Intn(4)]
			types = append(types, Type{CPU: cpu * 0.95, Mem: cpu * []float64{1, 2, 4, 8}[r.Intn(4)] * 0.8 * gib, Price: cpu * (0.02 + 0.02*r.Float64())})
		}
		var classes []Class
		for range 1 + r.Intn(4) {
			classes = append(classes, Class{CPU: []float64{0.25, 0.5, 1, 1.5}[r.Intn(4)], Mem: []float64{0.25, 0.5, 1, 3}[r.Intn(4)] * gib, N: 1 + r.Intn(30)})
		}
		var cpu, mem float64
		for _, c := range classes {
			cpu += c.CPU * float64(c.N)
			mem += c.Mem * float64(c.N)
		}
		fleet := math.Inf(1)
		for _, typ := range types {
			fleet = math.Min(fleet, firstFitDecreasing(typ, classes))
		}
		pooled := Solve(types, cpu, mem).Cost
		fit := Fit(types, classes, 100)
		desc := fmt.Sprintf("instance %d: types %v classes %v", i, types, classes)
		if fit < pooled-1e-6 {
			t.Errorf("%s: Fit %.4f below Solve %.4f", desc, fit, pooled)
		}
		if fit > fleet+1e-6 {
			t.Errorf("%s: Fit %.4f above a real fleet's %.4f", desc, fit, fleet)
		}
	}
}

// firstFitDecreasing is the price of packing classes on nodes of typ,
// largest pods first; +Inf if a pod does not fit.
func firstFitDecreasing(typ Type, classes []Class) float64 {
	type room struct{ cpu, mem float64 }
	var nodes []room
	order := make([]Class, len(classes))
	copy(order, classes)
	for i := range order {
		for j := i + 1; j < len(order); j++ {
			if order[j].CPU/typ.CPU+order[j].Mem/typ.Mem > order[i].CPU/typ.CPU+order[i].Mem/typ.Mem {
				order[i], order[j] = order[j], order[i]
			}
		}
	}
	for _, c := range order {
		if c.CPU > typ.CPU || c.Mem > typ.Mem {
			return math.Inf(1)
		}
		for range c.N {
			placed := false
			for k := range nodes {
				if nodes[k].cpu >= c.CPU && nodes[k].mem >= c.Mem {
					nodes[k].cpu -= c.CPU
					nodes[k].mem -= c.Mem
					placed = true
					break
				}
			}
			if !placed {
				nodes = append(nodes, room{typ.CPU - c.CPU, typ.Mem - c.Mem})
			}
		}
	}
	return float64(len(nodes)) * typ.Price
}
