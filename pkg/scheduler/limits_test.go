package scheduler_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestLimitsChargedAsTheClaimFills: a new claim is charged its largest
// option against the NodePool's limits, as Karpenter's subtractMax
// charges it, and, as in Karpenter (which adds later pods to an in-flight
// claim whatever its options, never re-checking limits), the claim keeps
// taking pods up to that option when no other claim can be opened: the
// limit it holds is then used, not lost to an option never launched.
func TestLimitsChargedAsTheClaimFills(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pods       int
		limits     karpv1.Limits
		wantClaims int
		wantPods   int // placed
	}{
		// The first claim packs four 900m pods to a 4-vCPU size but is
		// charged the 8-vCPU one it may become: the fifth pod joins it.
		{name: "the fifth pod joins the charged claim", pods: 5, limits: karpv1.Limits{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi")}, wantClaims: 1, wantPods: 5},
		// Eight vCPU of charge holds at most 8 of these pods (900m each, on
		// the 8-vCPU size): the rest stay pending.
		{name: "no further than the largest option", pods: 10, limits: karpv1.Limits{corev1.ResourceCPU: resource.MustParse("8")}, wantClaims: 1, wantPods: 8},
		{name: "without limits the claims pack to their most efficient size", pods: 5, wantClaims: 2, wantPods: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := baseInput(t, pods(tc.pods, "900m", "1Gi")...)
			in.NodePools[0].Spec.Limits = tc.limits
			r := scheduler.Solve(in)
			placed := 0
			for _, nc := range r.NewNodeClaims {
				placed += len(nc.Pods)
			}
			if len(r.NewNodeClaims) != tc.wantClaims || placed != tc.wantPods {
				t.Errorf("%d claims holding %d pods, want %d holding %d; unschedulable: %d", len(r.NewNodeClaims), placed, tc.wantClaims, tc.wantPods, len(r.Unschedulable))
				for _, u := range r.Unschedulable[:min(1, len(r.Unschedulable))] {
					t.Logf("%s: %s", u.Pod.Name, u.Reason)
				}
			}
		})
	}
}
