package scheduler_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestMemoSameResult: solves that share a Memo (as the disruption engine's
// simulations do, each with a different set of nodes left out) give the
// plans solves without one give, including an existing node's room left
// by pods with init containers, sidecars and overhead.
func TestMemoSameResult(t *testing.T) {
	in := baseInput(t)
	always := corev1.ContainerRestartPolicyAlways
	for i := range 6 {
		bound := pods(3, fmt.Sprintf("%dm", 300+100*i), "1Gi")
		for j, p := range bound {
			p.Name = fmt.Sprintf("n%d-b%d", i, j)
		}
		bound[0].Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}}}
		bound[1].Spec.InitContainers = []corev1.Container{{Name: "sidecar", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}}}
		bound[2].Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
		n, b := existingNode(fmt.Sprintf("node-%d", i), "eastus-1", bound...)
		in.Nodes = append(in.Nodes, n)
		in.BoundPods = append(in.BoundPods, b...)
	}
	for i := range 40 {
		in.Pods = append(in.Pods, pod(fmt.Sprintf("p%02d", i), fmt.Sprintf("%dm", 100+50*(i%7)), fmt.Sprintf("%dMi", 256+128*(i%5))))
	}
	memo := scheduler.NewMemo()
	for drop := range len(in.Nodes) + 1 {
		sub := in
		sub.Nodes = append(append(sub.Nodes[:0:0], in.Nodes[:drop]...), in.Nodes[min(drop+1, len(in.Nodes)):]...)
		want := describeResult(scheduler.Solve(sub))
		sub.Memo = memo
		for range 2 {
			if got := describeResult(scheduler.Solve(sub)); got != want {
				t.Fatalf("without node %d, with a Memo:\n%s\nwithout:\n%s", drop, got, want)
			}
		}
	}
}

func describeResult(r scheduler.Result) string {
	s := summary(r)
	for _, pl := range r.Existing {
		s += pl.Node + ":"
		for _, p := range pl.Pods {
			s += " " + p.Name
		}
		s += "\n"
	}
	for _, u := range r.Unschedulable {
		s += "unschedulable " + u.Pod.Name + ": " + u.Reason + "\n"
	}
	return s
}
