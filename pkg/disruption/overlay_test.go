package disruption

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"github.com/karpfunc/karpfunc/pkg/nodeoverlay"
)

// Consolidation prices candidates and replacements with the NodePool's
// NodeOverlays: a size overlaid to near nothing is kept although a
// smaller one would fit, and a size overlaid dearer than the rest is
// replaced although it is the smallest that fits.
func TestConsolidationUsesOverlaidPrices(t *testing.T) {
	priced := func(name, typ, price string) *v1alpha1.NodeOverlay {
		return &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodeOverlaySpec{
			Requirements: []v1alpha1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{typ}}},
			Price:        &price}}
	}
	cases := []struct {
		name     string
		typ      string
		overlays []*v1alpha1.NodeOverlay
		replaced bool
	}{
		{name: "no overlay: the big underused node is replaced", typ: "Standard_D16s_v5", replaced: true},
		{name: "the big size overlaid to near nothing is kept", typ: "Standard_D16s_v5",
			overlays: []*v1alpha1.NodeOverlay{priced("reserved", "Standard_D16s_v5", "0.0001")}},
		{name: "no overlay: the smallest fitting size is kept", typ: "Standard_D2als_v6"},
		{name: "the small size overlaid dearer than a larger one is replaced", typ: "Standard_D2als_v6", replaced: true,
			overlays: []*v1alpha1.NodeOverlay{priced("dear", "Standard_D2als_v6", "50")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.node("a", tc.typ, karpv1.CapacityTypeOnDemand)
			f.pods("a", "a", 1, "1", "2Gi")
			res := nodeoverlay.Resolve(tc.overlays, f.c.NodePools, f.cat)
			d := Decide(State{Cluster: f.c, Catalog: f.cat, PoolCatalogs: res.Catalogs(f.cat), Now: now, Options: f.opts})
			replaced := d.Command != nil && len(d.Command.Candidates) == 1 && d.Command.Candidates[0].NodeClaim.Name == "a"
			if replaced != tc.replaced {
				t.Fatalf("replaced %v, want %v (command %v, refusal %q)", replaced, tc.replaced, d.Command, refusalOf(d, "a"))
			}
			if replaced {
				for _, plan := range d.Command.Replacements {
					if it, _ := plan.Cheapest(); it != nil && it.Name == tc.typ {
						t.Errorf("replaced by its own size %s", it.Name)
					}
				}
			}
		})
	}
}
