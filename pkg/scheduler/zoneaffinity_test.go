package scheduler_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestSelfAffineZoneWhereAllFit: the first of replicas with required pod
// affinity to each other on topology.kubernetes.io/zone settles the zone
// all of them must run in. NodePool alpha (preferred by weight) reaches
// test-1 and test-2 and its limits hold one 2-vCPU node; NodePool bravo
// reaches test-2 only, without limits. Each 1500m replica needs a node of
// its own on alpha, so the first must go to test-2, where bravo can take
// the second: in test-1 the second has nowhere to follow it.
func TestSelfAffineZoneWhereAllFit(t *testing.T) {
	for _, tc := range []struct {
		name string
		// alphaCPU is NodePool alpha's CPU limit.
		alphaCPU string
		// bravo: NodePool bravo exists.
		bravo bool
		// wantPlaced is how many of the two replicas are placed.
		wantPlaced int
	}{
		{name: "another NodePool reaches one of the zones", alphaCPU: "2", bravo: true, wantPlaced: 2},
		{name: "the limits hold two nodes", alphaCPU: "4", bravo: false, wantPlaced: 2},
		{name: "no NodePool can take the second", alphaCPU: "2", bravo: false, wantPlaced: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps []*corev1.Pod
			for i := range 2 {
				ps = append(ps, withPodAffinity(labeled(pod(fmt.Sprintf("pair-%d", i), "1500m", "1Gi"), "app", "pair"),
					podTerm(corev1.LabelTopologyZone, "app", "pair")))
			}
			in := uniformInput(t, ps...)
			alpha := nodePool("alpha", "default", req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "test-1", "test-2"))
			alpha.Spec.Weight = new(int32)
			*alpha.Spec.Weight = 10
			alpha.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse(tc.alphaCPU)}
			in.NodePools = []*karpv1.NodePool{alpha}
			if tc.bravo {
				in.NodePools = append(in.NodePools, nodePool("bravo", "default", req(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "test-2")))
			}
			r := scheduler.Solve(in)
			placed, zones := 0, map[string]bool{}
			for _, nc := range r.NewNodeClaims {
				placed += len(nc.Pods)
				for _, z := range nc.Requirements.Get(corev1.LabelTopologyZone).Values() {
					zones[z] = true
				}
			}
			if placed != tc.wantPlaced {
				t.Errorf("%d replicas placed, want %d", placed, tc.wantPlaced)
				for _, u := range r.Unschedulable {
					t.Logf("%s: %s", u.Pod.Name, u.Reason)
				}
			}
			if len(zones) != 1 {
				t.Errorf("claims in zones %v, want one zone", zones)
			}
		})
	}
}

// TestZoneAffinityTargetWhereFollowersRun: web pods select zone wz by
// nodeSelector and have required pod affinity on the zone to the db pod,
// which has no rule of its own. First fit puts db next to a larger pod
// pinned to test-1; when web must run in another zone, db is placed again
// in the zone web selects, so web can follow it there.
func TestZoneAffinityTargetWhereFollowersRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		wz   string // the zone web pods select
	}{
		{name: "followers in the zone db is packed into", wz: "test-1"},
		{name: "followers in another zone", wz: "test-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			big := pod("big", "4", "4Gi")
			big.Spec.NodeSelector = map[string]string{corev1.LabelTopologyZone: "test-1"}
			ps := []*corev1.Pod{big, labeled(pod("db-0", "250m", "256Mi"), "app", "db")}
			for i := range 2 {
				web := withPodAffinity(labeled(pod(fmt.Sprintf("web-%d", i), "1", "1Gi"), "app", "web"), podTerm(corev1.LabelTopologyZone, "app", "db"))
				web.Spec.NodeSelector = map[string]string{corev1.LabelTopologyZone: tc.wz}
				ps = append(ps, web)
			}
			r := scheduler.Solve(uniformInput(t, ps...))
			for _, u := range r.Unschedulable {
				t.Errorf("%s unschedulable: %s", u.Pod.Name, u.Reason)
			}
			for _, nc := range r.NewNodeClaims {
				for _, p := range nc.Pods {
					if zones := nc.Requirements.Get(corev1.LabelTopologyZone).Values(); p.Name == "db-0" && (len(zones) != 1 || zones[0] != tc.wz) {
						t.Errorf("db-0 on a claim in zones %v, want %s", zones, tc.wz)
					}
				}
			}
		})
	}
}
