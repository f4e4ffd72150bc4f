package scheduler_test

import (
	"cmp"
	"runtime"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/scheduler/scaletest"
)

// scaleInput is the cluster of issue 20 as the scheduler sees it: 2,000
// pending pods against 5,000 Standard_D16as_v5 nodes holding 150,000 pods.
func scaleInput(tb testing.TB, size scaletest.Size) scheduler.Input {
	tb.Helper()
	c, err := catalog.Default("eastus")
	if err != nil {
		tb.Fatal(err)
	}
	cluster := scaletest.Generate(size)
	return scheduler.Input{
		Pods: cluster.PendingPods, Nodes: cluster.Nodes, BoundPods: cluster.BoundPods, NodeClaims: cluster.NodeClaims,
		NodePools: cluster.NodePools, NodeClasses: cluster.NodeClasses, Catalog: c,
	}
}

// BenchmarkSolveAKSLimits: one solve of 2,000 pending pods against 5,000
// existing nodes with 150,000 bound pods (target: 0.5 s on 2 cores).
func BenchmarkSolveAKSLimits(b *testing.B) {
	benchmarkSolve(b, scaleInput(b, scaletest.AKSLimits))
}

// BenchmarkSolveAKSLimitsAPIOrder: the same, with the pods in the order
// the API server lists them (by namespace, then name) and laid out in
// memory in that order, as a snapshot decodes them and hands them to the
// solver; the generator deals them out in random order.
func BenchmarkSolveAKSLimitsAPIOrder(b *testing.B) {
	in := scaleInput(b, scaletest.AKSLimits)
	for _, pods := range [][]*corev1.Pod{in.BoundPods, in.Pods} {
		slices.SortFunc(pods, func(x, y *corev1.Pod) int {
			return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
		})
		for i, pod := range pods {
			pods[i] = pod.DeepCopy()
		}
	}
	runtime.GC()
	benchmarkSolve(b, in)
}

func benchmarkSolve(b *testing.B, in scheduler.Input) {
	var existing, claims, unschedulable int
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res := scheduler.Solve(in)
		existing, claims, unschedulable = 0, len(res.NewNodeClaims), len(res.Unschedulable)
		for _, p := range res.Existing {
			existing += len(p.Pods)
		}
	}
	b.ReportMetric(float64(existing), "on-existing")
	b.ReportMetric(float64(claims), "new-claims")
	b.ReportMetric(float64(unschedulable), "unschedulable")
}

var _ = corev1.PodPending
