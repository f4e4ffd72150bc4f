package cloudprovider

import (
	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// Cheapest is the one rule that picks the offering a NodeClaim launches
// as, used by the launcher and by the plan the scheduler prints: among the
// instance types whose name reqs allow, the available offering in a zone
// and capacity type reqs allow with the lowest price. Ties go to the
// instance type's name, then the zone, then the capacity type (ascending),
// so the answer never depends on the order of its. It returns nil when
// nothing is offered.
func Cheapest(its []*catalog.InstanceType, reqs scheduling.Requirements) (*catalog.InstanceType, catalog.Offering) {
	var best *catalog.InstanceType
	var bestOffering catalog.Offering
	names := reqs.Get(corev1.LabelInstanceTypeStable)
	for _, it := range its {
		if !names.Has(it.Name) {
			continue
		}
		for _, offering := range it.Offerings {
			if OfferingAllowed(offering, reqs) && (best == nil || cheaper(it, offering, best, bestOffering)) {
				best = it
				bestOffering = offering
			}
		}
	}
	return best, bestOffering
}

// OfferingAllowed reports whether o is available and in a zone and
// capacity type reqs allow.
func OfferingAllowed(o catalog.Offering, reqs scheduling.Requirements) bool {
	return o.Available && reqs.Get(corev1.LabelTopologyZone).Has(o.Zone) && reqs.Get(karpv1.CapacityTypeLabelKey).Has(o.CapacityType)
}

// cheaper orders (it, o) before (bestType, bestOffering) by price, then
// instance type name, zone and capacity type.
func cheaper(it *catalog.InstanceType, o catalog.Offering, bestType *catalog.InstanceType, bestOffering catalog.Offering) bool {
	if o.Price != bestOffering.Price {
		return o.Price < bestOffering.Price
	}
	if it.Name != bestType.Name {
		return it.Name < bestType.Name
	}
	if o.Zone != bestOffering.Zone {
		return o.Zone < bestOffering.Zone
	}
	return o.CapacityType < bestOffering.CapacityType
}
