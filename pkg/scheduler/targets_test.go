package scheduler_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestAffineTargetsOnEnoughNodes: pods with required pod affinity on
// kubernetes.io/hostname to other pods, and a rule of their own that
// allows only so many of them per node (hostname spread, anti-affinity),
// need their targets on as many nodes. First fit puts small targets
// together on one claim; Karpenter, which puts each pod on the in-flight
// claim with the fewest pods, spreads them. When such pods would be left
// pending, the solve is done again with the targets on nodes of their own
// while they can be, and that plan is kept when it places more pods.
func TestAffineTargetsOnEnoughNodes(t *testing.T) {
	// Three 1-CPU targets fit one 8-vCPU node; two 1-CPU pods with
	// hostname affinity to them are kept apart.
	for _, tc := range []struct {
		name string
		// apart is the rule that keeps the affine pods apart.
		apart func(p *corev1.Pod) *corev1.Pod
		// oneEach: at most one affine pod per node.
		oneEach bool
	}{
		{
			// Two on the one node is within maxSkew 1 of the least count,
			// that node's, so that plan holds too.
			name: "hostname spread of maxSkew 1",
			apart: func(p *corev1.Pod) *corev1.Pod {
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname,
					WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
				return p
			},
		},
		{
			name: "required anti-affinity to each other",
			apart: func(p *corev1.Pod) *corev1.Pod {
				p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
					podTerm(corev1.LabelHostname, "app", "web")}}
				return p
			},
			oneEach: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps []*corev1.Pod
			for i := range 3 {
				ps = append(ps, labeled(pod(fmt.Sprintf("db-%d", i), "1", "1Gi"), "app", "db"))
			}
			for i := range 2 {
				ps = append(ps, tc.apart(withPodAffinity(labeled(pod(fmt.Sprintf("web-%d", i), "1", "1Gi"), "app", "web"),
					podTerm(corev1.LabelHostname, "app", "db"))))
			}
			r := scheduler.Solve(uniformInput(t, ps...))
			for _, u := range r.Unschedulable {
				t.Errorf("%s unschedulable: %s", u.Pod.Name, u.Reason)
			}
			most, fewest := 0, -1
			for _, nc := range r.NewNodeClaims {
				web, db := 0, 0
				for _, p := range nc.Pods {
					switch p.Labels["app"] {
					case "web":
						web++
					case "db":
						db++
					}
				}
				if web > 0 && db == 0 {
					t.Errorf("a claim holds %d web pods and no db pod", web)
				}
				most = max(most, web)
				if fewest < 0 || web < fewest {
					fewest = web
				}
			}
			if most-fewest > 1 || (tc.oneEach && most > 1) {
				t.Errorf("from %d to %d web pods per claim", fewest, most)
			}
		})
	}
}

// TestSelfAffineReplicasWhereAllFit: the first of replicas with required
// pod affinity to each other on kubernetes.io/hostname goes where all of
// them fit when some node or claim does: on a node with room for only
// some, the others would find no room next to it.
func TestSelfAffineReplicasWhereAllFit(t *testing.T) {
	for _, tc := range []struct {
		name string
		// used is what a running pod takes on the existing 4-vCPU node.
		used string
		// onNode: the replicas go to the existing node (else to a new
		// claim).
		onNode bool
	}{
		{name: "the node has room for two of four", used: "3", onNode: false},
		{name: "the node has room for all four", used: "1", onNode: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps []*corev1.Pod
			for i := range 4 {
				ps = append(ps, withPodAffinity(labeled(pod(fmt.Sprintf("pair-%d", i), "500m", "512Mi"), "app", "pair"),
					podTerm(corev1.LabelHostname, "app", "pair")))
			}
			in := uniformInput(t, ps...)
			n, bound := existingNode("node-a", "test-1", pod("running", tc.used, "1Gi"))
			in.Nodes, in.BoundPods = append(in.Nodes, n), append(in.BoundPods, bound...)
			r := scheduler.Solve(in)
			for _, u := range r.Unschedulable {
				t.Errorf("%s unschedulable: %s", u.Pod.Name, u.Reason)
			}
			onNode := 0
			for _, placement := range r.Existing {
				onNode += len(placement.Pods)
			}
			if want := map[bool]int{true: 4, false: 0}[tc.onNode]; onNode != want {
				t.Errorf("%d replicas on the existing node, want %d", onNode, want)
			}
		})
	}
}

// TestAffineTargetsApartOnPreferNoSchedulePools: targets spread over
// nodes for the pods with hostname affinity to them (see
// TestAffineTargetsOnEnoughNodes) stay apart on a NodePool with a
// PreferNoSchedule taint they do not tolerate: keeping them apart is
// given up only after every preference of their own, the taint
// included, so a node of their own is still asked for on the one NodePool
// they can use once they tolerate the taint.
func TestAffineTargetsApartOnPreferNoSchedulePools(t *testing.T) {
	for _, tc := range []struct {
		name   string
		effect corev1.TaintEffect // of the NodePool's taint; "" for none
	}{
		{name: "untainted NodePool"},
		{name: "PreferNoSchedule NodePool", effect: corev1.TaintEffectPreferNoSchedule},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps []*corev1.Pod
			for i := range 2 {
				ps = append(ps, labeled(pod(fmt.Sprintf("db-%d", i), "1", "1Gi"), "app", "db"))
			}
			for i := range 2 {
				web := withPodAffinity(labeled(pod(fmt.Sprintf("web-%d", i), "1", "1Gi"), "app", "web"), podTerm(corev1.LabelHostname, "app", "db"))
				web.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
					podTerm(corev1.LabelHostname, "app", "web")}}
				web.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
				ps = append(ps, web)
			}
			in := uniformInput(t, ps...)
			if tc.effect != "" {
				in.NodePools[0].Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: tc.effect}}
			}
			r := scheduler.Solve(in)
			for _, u := range r.Unschedulable {
				t.Errorf("%s unschedulable: %s", u.Pod.Name, u.Reason)
			}
			for _, nc := range r.NewNodeClaims {
				web, db := 0, 0
				for _, p := range nc.Pods {
					switch p.Labels["app"] {
					case "web":
						web++
					case "db":
						db++
					}
				}
				if web > 1 || (web > 0 && db == 0) {
					t.Errorf("a claim holds %d web pods and %d db pods", web, db)
				}
			}
		})
	}
}
