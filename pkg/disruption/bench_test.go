package disruption

import (
	"fmt"
	"testing"
)

// benchFleet is 1,000 nodes and 10,000 pods. util is the share of each
// node's CPU its pods request.
func benchFleet(b *testing.B, podCPU string, podMem string) *fixture {
	f := newFixture(b)
	f.np.Spec.Disruption.Budgets = nil // Karpenter's default: 10% of the nodes
	for i := 0; i < 1000; i++ {
		n := fmt.Sprintf("node-%04d", i)
		f.node(n, "Standard_D8as_v5", "on-demand")
		f.pods(n, n, 10, podCPU, podMem)
	}
	return f
}

// BenchmarkDecide: a consolidation decision (all methods) over 1,000 nodes
// and 10,000 pods. "underused": every node half used, so the methods find a
// command; "packed": nothing to do, every method runs to the end
// ("packed-rebalance": with rebalancing consolidation).
func BenchmarkDecide(b *testing.B) {
	for _, tc := range []struct {
		name, cpu, mem string
		rebalance      bool
	}{
		{"underused", "350m", "1400Mi", false},
		{"packed", "750m", "3Gi", false},
		// every method, rebalancing consolidation included, runs to the end
		{"packed-rebalance", "750m", "3Gi", true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			f := benchFleet(b, tc.cpu, tc.mem)
			st := State{Cluster: f.c, Catalog: f.cat, Now: now, Options: Options{Rebalance: tc.rebalance}}
			b.ResetTimer()
			var d Decision
			for i := 0; i < b.N; i++ {
				d = Decide(st)
			}
			b.StopTimer()
			if d.Command != nil {
				b.ReportMetric(float64(len(d.Command.Candidates)), "candidates")
				b.Logf("%s %s: %d candidates, %d replacements, saves $%.2f/h", d.Command.Method, d.Command.Action(), len(d.Command.Candidates), len(d.Command.Replacements), d.Command.Savings)
			} else {
				b.Logf("no command; %d refusals", len(d.Refusals))
			}
		})
	}
}
