package scheduler

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler/scaletest"
)

// TestIndexedSearchMatchesLinearScan: on randomized clusters (nodes with
// room left or none, pods of many sizes, zone spread and hostname
// anti-affinity), first fit through the bin index places every pod
// exactly where the scan over every open bin placed it.
func TestIndexedSearchMatchesLinearScan(t *testing.T) {
	c, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1)) //nolint:gosec // deterministic cases
	for i := range 12 {
		size := scaletest.Size{Nodes: 20 + rng.Intn(300), PendingPods: 50 + rng.Intn(600), Seed: int64(i)}
		size.BoundPods = size.Nodes * rng.Intn(40)
		cluster := scaletest.Generate(size)
		in := Input{Pods: cluster.PendingPods, Nodes: cluster.Nodes, BoundPods: cluster.BoundPods, NodeClaims: cluster.NodeClaims,
			NodePools: cluster.NodePools, NodeClasses: cluster.NodeClasses, Catalog: c, PackLargest: i%3 == 2}
		t.Run(fmt.Sprintf("nodes=%d,bound=%d,pending=%d,packLargest=%v", size.Nodes, size.BoundPods, size.PendingPods, in.PackLargest), func(t *testing.T) {
			linear := newSolver(in, false)
			linear.linearScan = true
			want := resultText(linear.solve())
			got := resultText(newSolver(in, false).solve())
			if got != want {
				t.Fatalf("indexed search placed pods differently from the linear scan:\nindexed:\n%s\nlinear:\n%s", got, want)
			}
			if !strings.Contains(want, "existing ") {
				t.Logf("no pod went to an existing node")
			}
		})
	}
}

// resultText is every placement of r, in order.
func resultText(r Result) string {
	var b strings.Builder
	for _, p := range r.Existing {
		fmt.Fprintf(&b, "existing %s:", p.Node)
		for _, pod := range p.Pods {
			fmt.Fprintf(&b, " %s", pod.Name)
		}
		b.WriteByte('\n')
	}
	for _, nc := range r.NewNodeClaims {
		fmt.Fprintf(&b, "new %s %v:", nc.NodePool.Name, nc.Requirements)
		for _, pod := range nc.Pods {
			fmt.Fprintf(&b, " %s", pod.Name)
		}
		b.WriteByte('\n')
	}
	for _, u := range r.Unschedulable {
		fmt.Fprintf(&b, "unschedulable %s: %s\n", u.Pod.Name, u.Reason)
	}
	return b.String()
}
