package scheduler_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestHostnameSpreadOverNodesThatExist: topology spread on
// kubernetes.io/hostname measures skew against the least loaded node the
// kube-scheduler counts, not against a node that could still be created.
// While a new node can be opened, the engine keeps every node at maxSkew
// pods or fewer (Karpenter's rule: a new node is an empty domain). A pod
// that no new node can take (NodePool limits, or its own required pod
// affinity) may go, as the last step of a solve, where its node's count
// stays within maxSkew of the least count over the nodes that exist or
// are planned: the kube-scheduler's rule
// (https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/#spread-constraint-definition).
func TestHostnameSpreadOverNodesThatExist(t *testing.T) {
	spread := func(p *corev1.Pod, app string) *corev1.Pod {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{MaxSkew: 1,
			TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}})
		return p
	}
	for _, tc := range []struct {
		name string
		pods func() []*corev1.Pod
		// limitCPU limits the NodePool's CPU.
		limitCPU string
		// fullNode adds an existing node with no room left that the
		// pods' spread counts (none of their pods on it).
		fullNode bool
		// cordoned adds an empty cordoned node: no pod goes there, but
		// the kube-scheduler counts it.
		cordoned bool
		// pending is how many pods stay unschedulable.
		pending int
	}{
		{
			// Three 3-CPU replicas, maxSkew 1; the limits allow two 8-vCPU
			// nodes. The third goes next to one of the first two: counts
			// 2 and 1, skew 1.
			name: "limits allow fewer nodes than replicas",
			pods: func() []*corev1.Pod {
				var out []*corev1.Pod
				for i := range 3 {
					out = append(out, spread(labeled(pod(fmt.Sprintf("web-%d", i), "3", "1Gi"), "app", "web"), "web"))
				}
				return out
			},
			limitCPU: "16",
		},
		{
			// Two replicas with required pod affinity to each other on
			// the hostname and a hostname spread of maxSkew 1: one node
			// holds both (its count is the least count).
			name: "replicas affine to each other on one node",
			pods: func() []*corev1.Pod {
				var out []*corev1.Pod
				for i := range 2 {
					out = append(out, spread(withPodAffinity(labeled(pod(fmt.Sprintf("pair-%d", i), "500m", "512Mi"), "app", "pair"),
						podTerm(corev1.LabelHostname, "app", "pair")), "pair"))
				}
				return out
			},
		},
		{
			// As the first case, with an existing node the spread counts
			// and none of the replicas fit: its count of 0 is the least,
			// so a node with two replicas would be skew 2.
			name: "an existing node without replicas keeps the least count at zero",
			pods: func() []*corev1.Pod {
				var out []*corev1.Pod
				for i := range 3 {
					out = append(out, spread(labeled(pod(fmt.Sprintf("web-%d", i), "3", "1Gi"), "app", "web"), "web"))
				}
				return out
			},
			limitCPU: "16",
			fullNode: true,
			pending:  1,
		},
		{
			name: "a cordoned node keeps the least count at zero",
			pods: func() []*corev1.Pod {
				var out []*corev1.Pod
				for i := range 3 {
					out = append(out, spread(labeled(pod(fmt.Sprintf("web-%d", i), "3", "1Gi"), "app", "web"), "web"))
				}
				return out
			},
			limitCPU: "16",
			cordoned: true,
			pending:  1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := uniformInput(t, tc.pods()...)
			if tc.limitCPU != "" {
				in.NodePools[0].Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse(tc.limitCPU)}
			}
			if tc.fullNode {
				n, bound := existingNode("node-full", "test-1", pod("filler", "3900m", "1Gi"))
				in.Nodes, in.BoundPods = append(in.Nodes, n), append(in.BoundPods, bound...)
			}
			if tc.cordoned {
				n, _ := existingNode("node-cordoned", "test-1")
				n.Spec.Unschedulable = true
				in.Nodes = append(in.Nodes, n)
			}
			r := scheduler.Solve(in)
			if len(r.Unschedulable) != tc.pending {
				for _, u := range r.Unschedulable {
					t.Logf("%s unschedulable: %s", u.Pod.Name, u.Reason)
				}
				t.Errorf("%d pods unschedulable, want %d", len(r.Unschedulable), tc.pending)
			}
			// Skew over the new claims: most replicas on one minus fewest.
			most, fewest := 0, -1
			for _, nc := range r.NewNodeClaims {
				most = max(most, len(nc.Pods))
				if fewest < 0 || len(nc.Pods) < fewest {
					fewest = len(nc.Pods)
				}
			}
			if tc.fullNode || tc.cordoned {
				fewest = 0
			}
			if most-fewest > 1 {
				t.Errorf("replicas per node from %d to %d over %d claims: skew above maxSkew 1", fewest, most, len(r.NewNodeClaims))
			}
		})
	}
}
