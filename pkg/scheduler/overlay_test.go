package scheduler_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"github.com/karpfunc/karpfunc/pkg/nodeoverlay"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// A NodePool plans with its own view of the catalog (PoolCatalogs): an
// overlay's price decides the type, and its capacity makes a pod that
// requests the added resource schedulable, on the selected type only and
// only in the NodePool the overlay selects.
func TestPoolCatalogs(t *testing.T) {
	fuse := corev1.ResourceName("smarter-devices/fuse")
	fusePod := func() *corev1.Pod {
		p := pod("fuse", "1", "1Gi")
		p.Spec.Containers[0].Resources.Requests[fuse] = resource.MustParse("1")
		return p
	}
	overlay := func(name string, spec v1alpha1.NodeOverlaySpec) *v1alpha1.NodeOverlay {
		return &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	}
	onType := func(typ string) []v1alpha1.NodeSelectorRequirement {
		return []v1alpha1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{typ}}}
	}
	price := func(p string) *string { return &p }
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		overlays []*v1alpha1.NodeOverlay
		pool     string // the NodePool the pod selects
		want     string // instance type, "" unschedulable
	}{
		{name: "catalog prices: the cheapest fitting type", pod: pod("p", "1", "1Gi"), pool: "general", want: "small"},
		{name: "an overlay makes a larger type the cheapest", pod: pod("p", "1", "1Gi"), pool: "general", want: "medium",
			overlays: []*v1alpha1.NodeOverlay{overlay("m", v1alpha1.NodeOverlaySpec{Requirements: onType("medium"), Price: price("0.001")})}},
		{name: "no type has the extended resource", pod: fusePod(), pool: "general", want: ""},
		{name: "an overlay adds it to one type", pod: fusePod(), pool: "general", want: "large",
			overlays: []*v1alpha1.NodeOverlay{overlay("f", v1alpha1.NodeOverlaySpec{Requirements: onType("large"),
				Capacity: corev1.ResourceList{fuse: resource.MustParse("1")}})}},
		{name: "an overlay for another NodePool does not apply", pod: fusePod(), pool: "other", want: "",
			overlays: []*v1alpha1.NodeOverlay{overlay("f", v1alpha1.NodeOverlaySpec{
				Requirements: []v1alpha1.NodeSelectorRequirement{{Key: karpv1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"general"}}},
				Capacity:     corev1.ResourceList{fuse: resource.MustParse("1")}})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := baseInput(t, tc.pod)
			in.NodePools = append(in.NodePools, nodePool("other", "default"))
			tc.pod.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: tc.pool}
			in.PoolCatalogs = nodeoverlay.Resolve(tc.overlays, in.NodePools, in.Catalog).Catalogs(in.Catalog)
			r := scheduler.Solve(in)
			if tc.want == "" {
				if len(r.Unschedulable) != 1 {
					t.Fatalf("want the pod unschedulable; new claims %d", len(r.NewNodeClaims))
				}
				return
			}
			if len(r.NewNodeClaims) != 1 {
				t.Fatalf("want one new claim; unschedulable %+v", r.Unschedulable)
			}
			if it, _ := r.NewNodeClaims[0].Cheapest(); it == nil || it.Name != tc.want {
				t.Fatalf("launches %v (options %s), want %s", it, typeNames(r.NewNodeClaims[0]), tc.want)
			}
		})
	}
}
