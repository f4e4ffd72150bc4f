package scheduler_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestSpread: the kube-scheduler model. Seven lean pods (1 vCPU, 1 GiB)
// and three rich ones (2 vCPU, 7 GiB) fit a memory-rich and a lean 8-vCPU
// node only if the lean node takes one rich pod and five lean ones. First
// fit finds that; the kube-scheduler, spreading the lean pods first over
// the least allocated node, leaves the third rich pod nowhere to go.
func TestSpread(t *testing.T) {
	lean := func(n int) []*corev1.Pod { return named("lean", n, "1", "1Gi") }
	rich := func(n int) []*corev1.Pod { return named("rich", n, "2", "7Gi") }
	nodes := func() []*corev1.Node {
		big, _ := existingNode("big", "test-1")
		small, _ := existingNode("small", "test-1")
		big.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7820m"), corev1.ResourceMemory: resource.MustParse("28Gi"), corev1.ResourcePods: resource.MustParse("110")}
		small.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7820m"), corev1.ResourceMemory: resource.MustParse("12Gi"), corev1.ResourcePods: resource.MustParse("110")}
		return []*corev1.Node{big, small}
	}
	for _, tc := range []struct {
		name       string
		pods       []*corev1.Pod
		spread     bool
		unplaced   int
		wantReason string
	}{
		{name: "first fit packs all ten", pods: append(lean(7), rich(3)...), unplaced: 0},
		{name: "spread, lean pods first, strands a rich pod", pods: append(lean(7), rich(3)...), spread: true, unplaced: 1,
			wantReason: "spread the way the kube-scheduler scores nodes"},
		{name: "spread, rich pods first, places all ten", pods: append(rich(3), lean(7)...), spread: true, unplaced: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := scheduler.Input{Pods: tc.pods, Nodes: nodes(), Spread: tc.spread}
			if !tc.spread {
				in.NodePools, in.NodeClasses, in.Catalog = baseInput(t).NodePools, baseInput(t).NodeClasses, synthetic(t)
			}
			r := scheduler.Solve(in)
			if tc.spread && len(r.NewNodeClaims) > 0 {
				t.Fatalf("the model opened %d NodeClaims", len(r.NewNodeClaims))
			}
			if len(r.NewNodeClaims) > 0 {
				t.Fatalf("first fit needed %d new NodeClaims: %s", len(r.NewNodeClaims), summary(r))
			}
			if len(r.Unschedulable) != tc.unplaced {
				t.Fatalf("%d pods unplaced, want %d: %s", len(r.Unschedulable), tc.unplaced, summary(r))
			}
			if tc.wantReason != "" {
				expectUnschedulable(t, r, tc.wantReason)
			}
			placed := 0
			for _, pl := range r.Existing {
				placed += len(pl.Pods)
			}
			if placed+len(r.Unschedulable) != len(tc.pods) {
				t.Errorf("%d placed and %d unplaced of %d pods", placed, len(r.Unschedulable), len(tc.pods))
			}
		})
	}
}

// TestSpreadPrefersTheLeastAllocatedNode: on two equal nodes the model
// puts two pods on different nodes, where first fit stacks them.
func TestSpreadPrefersTheLeastAllocatedNode(t *testing.T) {
	for _, spread := range []bool{false, true} {
		a, _ := existingNode("a", "test-1")
		b, _ := existingNode("b", "test-1")
		in := baseInput(t, named("web", 2, "1", "1Gi")...)
		in.Nodes, in.Spread = []*corev1.Node{a, b}, spread
		r := scheduler.Solve(in)
		nodes := 0
		for _, pl := range r.Existing {
			if len(pl.Pods) > 0 {
				nodes++
			}
		}
		want := 1
		if spread {
			want = 2
		}
		if nodes != want || len(r.NewNodeClaims)+len(r.Unschedulable) > 0 {
			t.Errorf("spread=%v: the pods went to %d nodes, want %d: %s", spread, nodes, want, summary(r))
		}
	}
}

func named(prefix string, n int, cpu, memory string) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = pod(fmt.Sprintf("%s-%d", prefix, i), cpu, memory)
	}
	return out
}
