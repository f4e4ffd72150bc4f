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
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := uniformInput(t, tc.pods()...)
			in.NodePools[0].Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse(tc.cpuLimit)}
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
