package scheduler_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

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
		// limitCPU, when set, limits the NodePool's CPU and adds a
		// lighter NodePool without limits; check gets the plan as is.
		limitCPU string
		// existingNode adds an empty 4-vCPU node; check gets the plan.
		existingNode bool
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
		{
			// Three 2-CPU pods with hostname affinity to a 1500m target
			// (smaller, so placed after them) and six 1-CPU pods free to go
			// anywhere. The heavier NodePool's limits allow one 8-vCPU node,
			// the target's: the affine pods can run only there, the free
			// pods on the other NodePool too. The affine pods join the
			// target as soon as it is placed, before the free pods take
			// that room, and every pod is placed.
			name: "affine pods join their target before others fill its node",
			pods: func() []*corev1.Pod {
				out := []*corev1.Pod{labeled(pod("target", "1500m", "1Gi"), "app", "target")}
				for i := range 3 {
					out = append(out, withPodAffinity(labeled(pod(fmt.Sprintf("affine-%d", i), "2", "1Gi"), "app", "affine"),
						podTerm(corev1.LabelHostname, "app", "target")))
				}
				for i := range 6 {
					out = append(out, labeled(pod(fmt.Sprintf("free-%d", i), "1", "1Gi"), "app", "free"))
				}
				return out
			},
			limitCPU: "8",
			check: func(t *testing.T, r scheduler.Result) {
				for _, u := range r.Unschedulable {
					t.Errorf("%s unschedulable: %s", u.Pod.Name, u.Reason)
				}
				if t.Failed() {
					for _, nc := range r.NewNodeClaims {
						var names []string
						for _, p := range nc.Pods {
							names = append(names, p.Name)
						}
						t.Logf("claim %s: %v", typeNames(nc), names)
					}
				}
			},
		},
		{
			// Two 1500m replicas with hostname affinity to each other and
			// ten 500m pods free to go anywhere, with an existing 4-vCPU
			// node: the first replica goes there, and the second follows
			// it before the small pods, ordered between them for cost,
			// fill that node; the small pods that do not fit go to a new
			// node, and every pod is placed.
			name: "replicas with affinity to each other stay together",
			pods: func() []*corev1.Pod {
				var out []*corev1.Pod
				for i := range 2 {
					out = append(out, withPodAffinity(labeled(pod(fmt.Sprintf("pair-%d", i), "1500m", "1Gi"), "app", "pair"),
						podTerm(corev1.LabelHostname, "app", "pair")))
				}
				for i := range 10 {
					out = append(out, labeled(pod(fmt.Sprintf("free-%02d", i), "500m", "1Gi"), "app", "free"))
				}
				return out
			},
			existingNode: true,
			check: func(t *testing.T, r scheduler.Result) {
				for _, u := range r.Unschedulable {
					t.Errorf("%s unschedulable: %s", u.Pod.Name, u.Reason)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := uniformInput(t, tc.pods()...)
			if tc.existingNode {
				n, _ := existingNode("node-a", "test-1")
				in.Nodes = append(in.Nodes, n)
				tc.check(t, scheduler.Solve(in))
				return
			}
			if tc.limitCPU != "" {
				in.NodePools[0].Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse(tc.limitCPU)}
				in.NodePools[0].Spec.Weight = new(int32(100))
				in.NodePools = append(in.NodePools, nodePool("other", "default"))
				r := scheduler.Solve(in)
				tc.check(t, r)
				return
			}
			r := scheduler.Solve(in)
			for _, u := range r.Unschedulable {
				t.Errorf("%s unschedulable: %s", u.Pod.Name, u.Reason)
			}
			tc.check(t, r)
		})
	}
}
