package scheduler_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestRetryAfterOthersPlaced: a pod whose required pod affinity names
// pods placed later in the same pass (they are smaller, so they come
// after it) is tried again once the others are placed, as Karpenter's
// Solve requeues a pod that failed and keeps going while the queue makes
// progress (provisioning/scheduling/scheduler.go Solve, queue.go Pop and
// Push, v1.14.1).
func TestRetryAfterOthersPlaced(t *testing.T) {
	for _, tc := range []struct {
		name string
		pods func() []*corev1.Pod
		// check gets the plan, every pod placed.
		check func(t *testing.T, r scheduler.Result)
	}{
		{
			name: "affinity to a smaller pod on the same node",
			pods: func() []*corev1.Pod {
				db := labeled(pod("db-0", "250m", "256Mi"), "app", "db")
				web := withPodAffinity(labeled(pod("web-0", "1", "1Gi"), "app", "web"), podTerm(corev1.LabelHostname, "app", "db"))
				return []*corev1.Pod{db, web}
			},
			check: func(t *testing.T, r scheduler.Result) {
				expectClaims(t, r, 1)
				if got := len(r.NewNodeClaims[0].Pods); got != 2 {
					t.Errorf("the claim holds %d pods, want db-0 and web-0 together", got)
				}
			},
		},
		{
			name: "three pods with zone affinity to one smaller target",
			pods: func() []*corev1.Pod {
				out := []*corev1.Pod{labeled(pod("target", "100m", "128Mi"), "app", "target")}
				for i := range 3 {
					out = append(out, withPodAffinity(labeled(pod(fmt.Sprintf("affine-%d", i), "1500m", "1Gi"), "app", "affine"),
						podTerm(corev1.LabelTopologyZone, "app", "target")))
				}
				return out
			},
			check: func(t *testing.T, r scheduler.Result) {
				// All four on one claim share its zone, whichever it is;
				// over several claims, each must be settled in one zone.
				zones := perDomain(r, corev1.LabelTopologyZone)
				if len(r.NewNodeClaims) > 1 && (len(zones) != 1 || zones["?"] != 0) {
					t.Errorf("pods per zone %v over %d claims, want all four in the target's zone", zones, len(r.NewNodeClaims))
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := uniformInput(t, tc.pods()...)
			r := scheduler.Solve(in)
			for _, u := range r.Unschedulable {
				t.Errorf("%s unschedulable: %s", u.Pod.Name, u.Reason)
			}
			tc.check(t, r)
		})
	}
}
