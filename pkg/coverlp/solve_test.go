package coverlp

import (
	"math"
	"math/rand"
	"testing"
)

func TestSolveBasisAndDuals(t *testing.T) {
	lean := Type{CPU: 4, Mem: 8, Price: 0.2}  // 2 GiB per vCPU
	rich := Type{CPU: 4, Mem: 32, Price: 0.3} // 8 GiB per vCPU
	for _, tc := range []struct {
		name     string
		types    []Type
		cpu, mem float64
		want     Solution
	}{
		{
			name: "no type has CPU and memory", types: []Type{{CPU: 0, Mem: 8, Price: 1}, {CPU: 4, Mem: 0, Price: 1}}, cpu: 1, mem: 1,
			want: Solution{Cost: math.Inf(1), Basis: [2]Use{{Index: -1}, {Index: -1}}},
		},
		{
			name: "nothing to cover", types: []Type{lean}, cpu: 0, mem: 0,
			want: Solution{Cost: 0, Basis: [2]Use{{Index: -1}, {Index: -1}}},
		},
		{
			name: "CPU-bound: one lean type, CPU carries the price", types: []Type{rich, lean}, cpu: 40, mem: 40,
			want: Solution{Cost: 2, Basis: [2]Use{{Index: 1, Nodes: 10}, {Index: -1}}, DualCPU: 0.05},
		},
		{
			// 40 vCPU and 200 GiB: 5 lean (20 vCPU, 40 GiB) and 5 rich
			// (20 vCPU, 160 GiB) cost 2.5; rich alone would be 10 nodes,
			// 3.0, and lean alone 25 nodes, 5.0.
			name: "a mix of two shapes", types: []Type{lean, rich}, cpu: 40, mem: 200,
			want: Solution{Cost: 2.5, Basis: [2]Use{{Index: 0, Nodes: 5}, {Index: 1, Nodes: 5}}, DualCPU: 1.0 / 24, DualMem: 1.0 / 240},
		},
		{
			name: "a type without memory is skipped, not paired", types: []Type{{CPU: 64, Mem: 0, Price: 0.01}, rich}, cpu: 8, mem: 8,
			want: Solution{Cost: 0.6, Basis: [2]Use{{Index: 1, Nodes: 2}, {Index: -1}}, DualCPU: 0.075},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Solve(tc.types, tc.cpu, tc.mem)
			if !near(got.Cost, tc.want.Cost) || !near(got.DualCPU, tc.want.DualCPU) || !near(got.DualMem, tc.want.DualMem) ||
				got.Basis[0].Index != tc.want.Basis[0].Index || got.Basis[1].Index != tc.want.Basis[1].Index ||
				!near(got.Basis[0].Nodes, tc.want.Basis[0].Nodes) || !near(got.Basis[1].Nodes, tc.want.Basis[1].Nodes) {
				t.Errorf("Solve = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestSolveIsOptimal checks LP duality on random instances: the basis
// covers the demand at Cost, the duals price no type above its price, and
// they value the demand at Cost (so no cover costs less).
func TestSolveIsOptimal(t *testing.T) {
	r := rand.New(rand.NewSource(2)) //nolint:gosec // deterministic
	for range 500 {
		var types []Type
		for range 1 + r.Intn(6) {
			cpu := []float64{2, 4, 8, 16, 64}[r.Intn(5)]
			types = append(types, Type{CPU: cpu, Mem: cpu * []float64{1, 2, 4, 8}[r.Intn(4)], Price: cpu * (0.02 + 0.03*r.Float64())})
		}
		cpu, mem := 1+100*r.Float64(), 1+400*r.Float64()
		sol := Solve(types, cpu, mem)
		var coverCPU, coverMem, cost float64
		for _, u := range sol.Basis {
			if u.Index >= 0 {
				coverCPU += u.Nodes * types[u.Index].CPU
				coverMem += u.Nodes * types[u.Index].Mem
				cost += u.Nodes * types[u.Index].Price
			}
		}
		if coverCPU < cpu-1e-6 || coverMem < mem-1e-6 || !near(cost, sol.Cost) {
			t.Fatalf("types %v, demand %.3f/%.3f: basis %+v covers %.3f/%.3f for %.4f, Cost %.4f", types, cpu, mem, sol.Basis, coverCPU, coverMem, cost, sol.Cost)
		}
		for _, typ := range types {
			if value := sol.DualCPU*typ.CPU + sol.DualMem*typ.Mem; value > typ.Price+1e-9 {
				t.Fatalf("types %v: duals %.5f/%.5f value %v at %.5f, above its price", types, sol.DualCPU, sol.DualMem, typ, value)
			}
		}
		if !near(sol.DualCPU*cpu+sol.DualMem*mem, sol.Cost) {
			t.Fatalf("types %v, demand %.3f/%.3f: duals value the demand at %.5f, Cost %.5f", types, cpu, mem, sol.DualCPU*cpu+sol.DualMem*mem, sol.Cost)
		}
	}
}

func near(a, b float64) bool {
	if math.IsInf(a, 1) || math.IsInf(b, 1) {
		return math.IsInf(a, 1) && math.IsInf(b, 1)
	}
	return math.Abs(a-b) <= 1e-9*(1+math.Abs(b))
}
