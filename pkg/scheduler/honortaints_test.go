package scheduler_test

import (
	"fmt"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestSpreadNodeTaintsPolicyHonor: under nodeTaintsPolicy Honor the
// kube-scheduler's PodTopologySpread leaves out the nodes whose
// NoSchedule and NoExecute taints the pod does not tolerate, both as
// domains and from the counts
// (https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/#spread-constraint-definition).
// PreferNoSchedule keeps no node out.
func TestSpreadNodeTaintsPolicyHonor(t *testing.T) {
	honor := corev1.NodeInclusionPolicyHonor
	web := func(n int) []*corev1.Pod {
		var out []*corev1.Pod
		for i := range n {
			p := labeled(pod(fmt.Sprintf("web-%d", i), "100m", "100Mi"), "app", "web")
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
				WhenUnsatisfiable: corev1.DoNotSchedule, NodeTaintsPolicy: &honor,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
			out = append(out, p)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		input func(t *testing.T) scheduler.Input
		// want: pods per zone over the new claims.
		want map[string]int
	}{
		{
			// Two web pods run on a node in test-1 tainted NoSchedule that
			// the pending ones do not tolerate: they are not counted, so
			// the three pending pods take one zone each.
			name: "pods on a node the pod does not tolerate are not counted",
			input: func(t *testing.T) scheduler.Input {
				in := uniformInput(t, web(3)...)
				running := web(5)[3:]
				for _, p := range running {
					p.Name = "running-" + p.Name
				}
				n, bound := existingNode("node-tainted", "test-1", running...)
				n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
				in.Nodes, in.BoundPods = append(in.Nodes, n), append(in.BoundPods, bound...)
				return in
			},
			want: map[string]int{"test-1": 1, "test-2": 1, "test-3": 1},
		},
		{
			// Zone test-3 only a NodePool tainted PreferNoSchedule can
			// launch in: it is still a domain, so one of three pods goes
			// there once it relaxes into tolerating the taint.
			name: "a PreferNoSchedule NodePool's zones are domains",
			input: func(t *testing.T) scheduler.Input {
				in := uniformInput(t, web(3)...)
				in.NodePools[0].Spec.Template.Spec.Requirements = append(in.NodePools[0].Spec.Template.Spec.Requirements,
					nodePool("x", "default", req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "test-1", "test-2")).Spec.Template.Spec.Requirements...)
				soft := nodePool("soft", "default", req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "test-3"))
				soft.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
				in.NodePools = append(in.NodePools, soft)
				return in
			},
			want: map[string]int{"test-1": 1, "test-2": 1, "test-3": 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := scheduler.Solve(tc.input(t))
			for _, u := range r.Unschedulable {
				t.Errorf("%s unschedulable: %s", u.Pod.Name, u.Reason)
			}
			if got := perDomain(r, corev1.LabelTopologyZone); !maps.Equal(got, tc.want) {
				t.Errorf("pods per zone %v, want %v", got, tc.want)
			}
		})
	}
}
