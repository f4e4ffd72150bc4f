package scheduler_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestScarceCapacityGoesToPodsInKarpentersOrder: when a NodePool's limits
// leave pods pending, the pods that get the capacity are those Karpenter's
// queue takes first (largest CPU, then memory, then oldest, then UID:
// provisioning/scheduling/queue.go byCPUAndMemoryDescending, v1.14.1),
// not those the cost-driven interleaving of big and small pods happens to
// reach first.
func TestScarceCapacityGoesToPodsInKarpentersOrder(t *testing.T) {
	old := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	young := metav1.NewTime(old.Add(time.Hour))
	created := func(p *corev1.Pod, at metav1.Time) *corev1.Pod { p.CreationTimestamp = at; return p }
	for _, tc := range []struct {
		name        string
		pods        func() []*corev1.Pod
		cpuLimit    string
		wantPending []string
	}{
		{
			// 3 + 3×1.5 CPU on one 8-CPU claim; the 1-CPU pod is the one
			// left out, not the third affine pod.
			name:     "the largest pods first",
			cpuLimit: "8",
			pods: func() []*corev1.Pod {
				out := []*corev1.Pod{labeled(pod("target", "3", "1Gi"), "app", "target"), labeled(pod("free", "1", "4Gi"), "app", "free")}
				for i := range 3 {
					out = append(out, withPodAffinity(labeled(pod(fmt.Sprintf("affine-%d", i), "1500m", "4Gi"), "app", "affine"),
						podTerm(corev1.LabelHostname, "app", "target")))
				}
				return out
			},
			wantPending: []string{"free"},
		},
		{
			// Equal pods: the oldest first, whatever their names.
			name:     "equal pods, the oldest first",
			cpuLimit: "2",
			pods: func() []*corev1.Pod {
				return []*corev1.Pod{created(pod("a", "1", "1Gi"), young), created(pod("b", "1", "1Gi"), young), created(pod("c", "1", "1Gi"), old)}
			},
			wantPending: []string{"b"},
		},
		{
			// A 4-CPU target and three equal 2-CPU pods on one 8-CPU
			// claim: the youngest is left out even though its required
			// pod affinity selects the target (Karpenter's queue does not
			// pull it forward).
			name:     "an affine pod waits its turn",
			cpuLimit: "8",
			pods: func() []*corev1.Pod {
				return []*corev1.Pod{created(labeled(pod("target", "4", "1Gi"), "app", "target"), old),
					created(withPodAffinity(labeled(pod("affine", "2", "1Gi"), "app", "affine"), podTerm(corev1.LabelTopologyZone, "app", "target")), young),
					created(pod("free-0", "2", "1Gi"), old), created(pod("free-1", "2", "1Gi"), old)}
			},
			wantPending: []string{"affine"},
		},
		{
			// Two 3-CPU replicas apart on two 8-CPU claims (the limits
			// allow no third), then target, free and a 1.5-CPU pod with
			// hostname affinity to target. As in Karpenter, free goes to
			// the claim with fewer pods, not next to target, and the
			// affine pod still finds room there. The pod for the limited
			// pool stays pending whatever the others do.
			name:     "a pod goes to the claim with the fewest pods",
			cpuLimit: "16",
			pods: func() []*corev1.Pod {
				var out []*corev1.Pod
				for i := range 2 {
					out = append(out, created(withAntiAffinity(labeled(pod(fmt.Sprintf("apart-%d", i), "3", "1Gi"), "app", "apart"),
						podTerm(corev1.LabelHostname, "app", "apart")), old))
				}
				limited := created(pod("limited", "2", "1Gi"), old)
				limited.Spec.NodeSelector = map[string]string{"team": "x"}
				return append(out, limited, created(labeled(pod("target", "2", "1Gi"), "app", "target"), old), created(pod("free", "2", "1Gi"), young),
					created(withPodAffinity(labeled(pod("affine", "1500m", "1Gi"), "app", "affine"), podTerm(corev1.LabelHostname, "app", "target")), young))
			},
			wantPending: []string{"limited"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := uniformInput(t, tc.pods()...)
			in.NodePools[0].Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse(tc.cpuLimit)}
			// A NodePool for the pods that select team=x, too limited for
			// any of them: no other pod can use it.
			limitedPool := nodePool("limited", "default")
			limitedPool.Spec.Template.Labels = map[string]string{"team": "x"}
			limitedPool.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("1")}
			in.NodePools = append(in.NodePools, limitedPool)
			r := scheduler.Solve(in)
			var pending []string
			for _, u := range r.Unschedulable {
				pending = append(pending, u.Pod.Name)
			}
			slices.Sort(pending)
			if !slices.Equal(pending, tc.wantPending) {
				t.Errorf("pending %v, want %v", pending, tc.wantPending)
				for _, nc := range r.NewNodeClaims {
					var names []string
					for _, p := range nc.Pods {
						names = append(names, p.Name)
					}
					t.Logf("claim %s: %v", typeNames(nc), names)
				}
			}
		})
	}
}
