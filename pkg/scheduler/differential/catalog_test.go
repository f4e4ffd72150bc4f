package differential

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	kcp "sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// region is the embedded catalog's region both schedulers see.
const region = "eastus"

// sizes is a small, realistic slice of the catalog: general purpose (D),
// memory (E), compute (F) and burstable (B) sizes of 2 to 16 vCPUs, with
// and without spot offerings (B2s has none).
var sizes = []string{
	"Standard_B2s",
	"Standard_D2as_v5", "Standard_D4as_v5", "Standard_D8as_v5", "Standard_D16as_v5",
	"Standard_D2s_v5", "Standard_D4s_v5",
	"Standard_D2ls_v5", "Standard_D4ls_v5",
	"Standard_E2s_v5", "Standard_E4s_v5", "Standard_E8s_v5",
	"Standard_F2s_v2", "Standard_F4s_v2", "Standard_F8s_v2",
}

// testCatalog is the embedded catalog of region cut to sizes: what
// karpfunc's scheduler is given.
func testCatalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	full, err := catalog.Default(region)
	if err != nil {
		t.Fatal(err)
	}
	out := &catalog.Catalog{Region: full.Region, Zones: full.Zones}
	for _, name := range sizes {
		it, ok := full.Get(name)
		if !ok {
			t.Fatalf("the embedded catalog of %s has no %s", region, name)
		}
		out.InstanceTypes = append(out.InstanceTypes, it)
	}
	return out
}

// launchable is an instance type as a node of the default AKSNodeClass
// would be (pods capacity DefaultMaxPods, AKS's reservations for it).
func launchable(it *catalog.InstanceType) *catalog.InstanceType {
	return it.WithMaxPods(v1beta1.DefaultMaxPods)
}

// karpenterTypes are the same sizes as Karpenter's cloud provider
// interface describes instance types: the same capacity, the same
// reservations (as kube-reserved, so allocatable is identical), the same
// labels as requirements and the same priced offerings per zone and
// capacity type.
func karpenterTypes(cat *catalog.Catalog) []*kcp.InstanceType {
	var out []*kcp.InstanceType
	for _, base := range cat.InstanceTypes {
		it := launchable(base)
		var offerings kcp.Offerings
		for _, o := range it.Offerings {
			offerings = append(offerings, &kcp.Offering{
				Requirements: scheduling.NewRequirements(
					scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, o.Zone),
					scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, o.CapacityType),
				),
				Price:     o.Price,
				Available: o.Available,
			})
		}
		out = append(out, &kcp.InstanceType{
			Name:         it.Name,
			Requirements: it.Requirements(),
			Offerings:    offerings,
			Capacity:     it.Capacity.DeepCopy(),
			Overhead:     &kcp.InstanceTypeOverhead{KubeReserved: it.Overhead.DeepCopy()},
		})
	}
	return out
}

// typeByName finds one of sizes, as launched.
func typeByName(cat *catalog.Catalog, name string) *catalog.InstanceType {
	it, ok := cat.Get(name)
	if !ok {
		panic(fmt.Sprintf("instance type %s is not in the test catalog", name))
	}
	return launchable(it)
}
