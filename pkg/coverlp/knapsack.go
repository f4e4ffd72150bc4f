package coverlp

import "math"

// memUnit discretizes memory for the knapsack: classes count whole units
// rounded down and a node's capacity rounded up, so the knapsack may only
// hold more than the node does (the bound stays a lower bound).
const memUnit = 16 << 20

// knapsack finds the pattern of whole pods one node of a small type holds
// that the duals value most: max Σ y_c k_c s.t. Σ k_c cpu_c ≤ CPU,
// Σ k_c mem_c ≤ Mem, k ≥ 0 integer. CPU is exact in units of the classes'
// greatest common divisor in millicores.
type knapsack struct {
	cpuCap, memCap int
	items          []knapItem
	nClasses       int
}

type knapItem struct{ class, cpu, mem int }

func newKnapsack(t Type, classes []Class) *knapsack {
	cpuUnit := 0
	for _, class := range classes {
		cpuUnit = gcd(cpuUnit, int(math.Round(class.CPU*1000)))
	}
	cpuUnit = max(cpuUnit, 1)
	sack := &knapsack{cpuCap: int(math.Floor(t.CPU*1000/float64(cpuUnit) + 1e-9)), memCap: int(math.Ceil(t.Mem / memUnit)), nClasses: len(classes)}
	for ci, class := range classes {
		cpu := int(math.Round(class.CPU*1000)) / cpuUnit
		mem := int(math.Floor(class.Mem / memUnit))
		if class.CPU <= t.CPU && class.Mem <= t.Mem && (cpu > 0 || mem > 0) {
			sack.items = append(sack.items, knapItem{ci, cpu, mem})
		}
	}
	return sack
}

// best is the most valuable pattern at duals y and its value.
func (k *knapsack) best(y []float64) ([]float64, float64) {
	stride := k.memCap + 1
	val := make([]float64, (k.cpuCap+1)*stride)
	choice := make([]int16, len(val))
	for cpu := 0; cpu <= k.cpuCap; cpu++ {
		for mem := 0; mem <= k.memCap; mem++ {
			cell := cpu*stride + mem
			choice[cell] = -1
			for i, it := range k.items {
				if y[it.class] <= eps || it.cpu > cpu || it.mem > mem {
					continue
				}
				if value := val[(cpu-it.cpu)*stride+mem-it.mem] + y[it.class]; value > val[cell] {
					val[cell] = value
					choice[cell] = int16(i)
				}
			}
		}
	}
	counts := make([]float64, k.nClasses)
	cpu := k.cpuCap
	mem := k.memCap
	for choice[cpu*stride+mem] >= 0 {
		it := k.items[choice[cpu*stride+mem]]
		counts[it.class]++
		cpu -= it.cpu
		mem -= it.mem
	}
	return counts, val[len(val)-1]
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
