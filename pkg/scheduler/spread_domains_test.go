package scheduler_test

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestSpreadDomainsFromRequiredTerms: a topology spread constraint counts
// the domains of the nodes that meet the pod's nodeSelector and required
// node affinity (nodeAffinityPolicy Honor), never its preferred terms, as
// kube-scheduler's PodTopologySpread and Karpenter's TopologyNodeFilter
// do. A preference that names one zone therefore does not make that zone
// the only domain: once it holds maxSkew more pods than an empty allowed
// zone, the next pod relaxes the preference and goes elsewhere.
func TestSpreadDomainsFromRequiredTerms(t *testing.T) {
	zoneIn := func(zones ...string) corev1.NodeSelectorRequirement {
		return req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones...)
	}
	for _, tc := range []struct {
		name     string
		pods     int
		required []corev1.NodeSelectorRequirement
		want     map[string]int
	}{
		{name: "a preferred zone and no required term", pods: 2, want: map[string]int{"test-1": 1, "other": 1}},
		{name: "a preferred zone within two required zones", pods: 2, required: []corev1.NodeSelectorRequirement{zoneIn("test-1", "test-2")}, want: map[string]int{"test-1": 1, "test-2": 1}},
		{name: "three pods over two required zones", pods: 3, required: []corev1.NodeSelectorRequirement{zoneIn("test-1", "test-2")}, want: map[string]int{"test-1": 2, "test-2": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := zonePinnedSpread(tc.pods, corev1.NodeInclusionPolicyHonor, tc.required...)
			for _, p := range ps {
				preferNode(p, 50, zoneIn("test-1"))
			}
			r := scheduler.Solve(uniformInput(t, ps...))
			if len(r.Unschedulable) > 0 {
				t.Fatalf("unschedulable: %+v", r.Unschedulable)
			}
			got := map[string]int{}
			for zone, count := range perDomain(r, corev1.LabelTopologyZone) {
				if _, named := tc.want[zone]; !named && zone != "?" {
					zone = "other"
				}
				got[zone] += count
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("pods per zone %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSpreadLeavesZonesOtherNodePoolsNeed: among equally crowded zones, a
// claim from a NodePool that can launch in several takes the zone fewest
// NodePools reach, so a NodePool limited to one zone still has that zone
// for the pods the spread allows there.
func TestSpreadLeavesZonesOtherNodePoolsNeed(t *testing.T) {
	for _, tc := range []struct {
		name string
		pods int
		skew int32
	}{
		{name: "four pods, maxSkew 2", pods: 4, skew: 2},
		{name: "two pods, maxSkew 1", pods: 2, skew: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps []*corev1.Pod
			for _, p := range spreadPods(tc.pods, corev1.LabelTopologyZone, tc.skew, corev1.DoNotSchedule) {
				p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
				ps = append(ps, p)
			}
			in := uniformInput(t, ps...)
			// wide: every zone, tried first, limited to one 8-vCPU node;
			// narrow: test-1 only.
			in.NodePools[0].Spec.Weight = new(int32(50))
			in.NodePools[0].Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("8")}
			in.NodePools = append(in.NodePools, nodePool("narrow", "default", req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "test-1")))
			r := scheduler.Solve(in)
			for _, u := range r.Unschedulable {
				t.Errorf("%s unschedulable: %s", u.Pod.Name, u.Reason)
			}
			if t.Failed() {
				t.Logf("pods per zone: %v", perDomain(r, corev1.LabelTopologyZone))
			}
		})
	}
}

// TestSpreadCountsOnlyNodesTheAffinityAdmits: under nodeAffinityPolicy
// Honor, kube-scheduler's PodTopologySpread counts matching pods only on
// nodes that meet the pod's nodeSelector and required node affinity
// (https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/#spread-constraint-definition,
// nodeAffinityPolicy). A running app=web pod on a spot node in test-1 is
// not counted for pods that require on-demand: two such pods go one to
// each allowed zone, not both to test-2.
func TestSpreadCountsOnlyNodesTheAffinityAdmits(t *testing.T) {
	zoneIn := req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "test-1", "test-2")
	onDemand := req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand)
	for _, tc := range []struct {
		name         string
		existingCT   string
		nodeSelector bool
		// counted is whether the kube-scheduler counts the running pod.
		counted bool
	}{
		{name: "spot node, on-demand required by affinity", existingCT: karpv1.CapacityTypeSpot},
		{name: "spot node, on-demand required by nodeSelector", existingCT: karpv1.CapacityTypeSpot, nodeSelector: true},
		{name: "on-demand node, on-demand required", existingCT: karpv1.CapacityTypeOnDemand, counted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exprs := []corev1.NodeSelectorRequirement{zoneIn}
			if !tc.nodeSelector {
				exprs = append(exprs, onDemand)
			}
			ps := zonePinnedSpread(2, corev1.NodeInclusionPolicyHonor, exprs...)
			if tc.nodeSelector {
				for _, p := range ps {
					p.Spec.NodeSelector = map[string]string{karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand}
				}
			}
			in := uniformInput(t, ps...)
			n, bound := existingNode("node-a", "test-1", labeled(pod("old", "100m", "100Mi"), "app", "web"))
			n.Labels[karpv1.CapacityTypeLabelKey] = tc.existingCT
			n.Spec.Taints = []corev1.Taint{{Key: "full", Effect: corev1.TaintEffectNoSchedule}}
			in.Nodes, in.BoundPods = []*corev1.Node{n}, bound
			r := scheduler.Solve(in)
			if len(r.Unschedulable) > 0 {
				t.Fatalf("unschedulable: %+v", r.Unschedulable)
			}
			got := perDomain(r, corev1.LabelTopologyZone)
			counts := map[string]int{"test-1": got["test-1"], "test-2": got["test-2"]}
			if tc.counted {
				counts["test-1"]++
			}
			if got["?"] > 0 || counts["test-1"]-counts["test-2"] > 1 || counts["test-2"]-counts["test-1"] > 1 {
				t.Errorf("new pods per zone %v: the kube-scheduler counts %v, skew above maxSkew 1", got, counts)
			}
		})
	}
}
