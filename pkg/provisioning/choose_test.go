package provisioning

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestChooseAgreesWithPlan: the launcher (Choose, from the NodeClaim the
// plan becomes) and the plan (NodeClaimPlan.Cheapest, what `karpfunc plan`
// prints) pick the same offering, ties included, whatever the order of the
// plan's instance types and offerings.
func TestChooseAgreesWithPlan(t *testing.T) {
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}
	offer := func(zone, capacityType string, price float64) catalog.Offering {
		return catalog.Offering{Zone: zone, CapacityType: capacityType, Price: price, Available: true}
	}
	size := func(name string, offerings ...catalog.Offering) *catalog.InstanceType {
		return &catalog.InstanceType{Name: name, Capacity: capacity, Offerings: offerings}
	}
	for _, c := range []struct {
		name              string
		types             []*catalog.InstanceType
		wantType, wantZon string
		wantCapacityType  string
	}{
		{"a cheaper offering wins",
			[]*catalog.InstanceType{size("Standard_B", offer("eastus-1", "on-demand", 0.2)), size("Standard_A", offer("eastus-1", "on-demand", 0.3))},
			"Standard_B", "eastus-1", "on-demand"},
		{"equal price: the instance type's name decides, not the plan's order",
			[]*catalog.InstanceType{size("Standard_B", offer("eastus-1", "on-demand", 0.2)), size("Standard_A", offer("eastus-2", "on-demand", 0.2))},
			"Standard_A", "eastus-2", "on-demand"},
		{"equal price and type: the zone decides",
			[]*catalog.InstanceType{size("Standard_A", offer("eastus-3", "on-demand", 0.2), offer("eastus-1", "on-demand", 0.2))},
			"Standard_A", "eastus-1", "on-demand"},
		{"equal price, type and zone: the capacity type decides",
			[]*catalog.InstanceType{size("Standard_A", offer("eastus-1", "spot", 0.2), offer("eastus-1", "on-demand", 0.2))},
			"Standard_A", "eastus-1", "on-demand"},
		{"a name that sorts before another's zone-joined name",
			// "Standard_D2"+"eastus-2" < "Standard_D2s"+"eastus-1" as joined
			// strings, but the name alone sorts Standard_D2 first either way.
			[]*catalog.InstanceType{size("Standard_D2s", offer("eastus-1", "on-demand", 0.1)), size("Standard_D2", offer("eastus-2", "on-demand", 0.1))},
			"Standard_D2", "eastus-2", "on-demand"},
		{"an unavailable offering is never picked",
			[]*catalog.InstanceType{size("Standard_A", catalog.Offering{Zone: "eastus-1", CapacityType: "on-demand", Price: 0.01}, offer("eastus-2", "on-demand", 0.5))},
			"Standard_A", "eastus-2", "on-demand"},
	} {
		t.Run(c.name, func(t *testing.T) {
			names := make([]string, 0, len(c.types))
			for _, it := range c.types {
				names = append(names, it.Name)
			}
			plan := &scheduler.NodeClaimPlan{
				NodePool:  &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "np"}},
				NodeClass: &v1beta1.AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
				Requirements: scheduling.NewRequirements(
					scheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, names...),
					scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "eastus-1", "eastus-2", "eastus-3"),
					scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand")),
				InstanceTypes: c.types,
			}
			planned, plannedOffering := plan.Cheapest()
			if planned == nil {
				t.Fatal("the plan picks nothing")
			}
			launched, err := lifecycle.Choose(&catalog.Catalog{InstanceTypes: c.types}, NodeClaimFor(plan), 30)
			if err != nil {
				t.Fatal(err)
			}
			got := [][3]string{
				{planned.Name, plannedOffering.Zone, plannedOffering.CapacityType},
				{launched.InstanceType.Name, launched.Offering.Zone, launched.Offering.CapacityType},
			}
			want := [3]string{c.wantType, c.wantZon, c.wantCapacityType}
			if got[0] != want || got[1] != want {
				t.Errorf("plan picks %v, the launcher %v; want both %v", got[0], got[1], want)
			}
		})
	}
}
