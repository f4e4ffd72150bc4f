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
	g := 0
	for _, c := range classes {
		g = gcd(g, int(math.Round(c.CPU*1000)))
	}
	g = max(g, 1)
	k := &knapsack{cpuCap: int(math.Floor(t.CPU*1000/float64(g) + 1e-9)), memCap: int(math.Ceil(t.Mem / memUnit)), nClasses: len(classes)}
	for ci, c := range classes {
		cpu, mem := int(math.Round(c.CPU*1000))/g, int(math.Floor(c.Mem/memUnit))
		if c.CPU <= t.CPU && c.Mem <= t.Mem && (cpu > 0 || mem > 0) {
			k.items = append(k.items, knapItem{ci, cpu, mem})
		}
	}
	return k
}

// best is the most valuable pattern at duals y and its value.
func (k *knapsack) best(y []float64) ([]float64, float64) {
	w := k.memCap + 1
	val := make([]float64, (k.cpuCap+1)*w)
	choice := make([]int16, len(val))
	for c := 0; c <= k.cpuCap; c++ {
		for m := 0; m <= k.memCap; m++ {
			s := c*w + m
			choice[s] = -1
			for i, it := range k.items {
				if y[it.class] <= eps || it.cpu > c || it.mem > m {
					continue
				}
				if v := val[(c-it.cpu)*w+m-it.mem] + y[it.class]; v > val[s] {
					val[s], choice[s] = v, int16(i)
				}
			}
		}
	}
	z := make([]float64, k.nClasses)
	for c, m := k.cpuCap, k.memCap; choice[c*w+m] >= 0; {
		it := k.items[choice[c*w+m]]
		z[it.class]++
		c, m = c-it.cpu, m-it.mem
	}
	return z, val[len(val)-1]
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
