package lifecycle

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
)

// Choice is the instance type and offering a NodeClaim launches as.
type Choice struct {
	InstanceType *catalog.InstanceType
	Offering     catalog.Offering
}

// Choose picks the offering a NodeClaim launches as: among the instance
// types its requirements allow whose allocatable (with maxPods) fits its
// requests, the one cloudprovider.Cheapest picks, the rule the plan uses
// too. It depends only on the NodeClaim spec and the catalog, so a retried
// launch picks the same VM.
func Choose(cat *catalog.Catalog, nc *karpv1.NodeClaim, maxPods int32) (Choice, error) {
	reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(nc.Spec.Requirements...)
	names := reqs.Get(corev1.LabelInstanceTypeStable)
	fitting := make([]*catalog.InstanceType, 0, len(cat.InstanceTypes))
	for _, it := range cat.InstanceTypes {
		if !names.Has(it.Name) {
			continue
		}
		if sized := it.WithMaxPods(maxPods); resources.Fits(nc.Spec.Resources.Requests, sized.Allocatable()) {
			fitting = append(fitting, sized)
		}
	}
	best, offering := cloudprovider.Cheapest(fitting, reqs)
	if best == nil {
		return Choice{}, fmt.Errorf("NodeClaim %s: no available offering satisfies its requirements (%s) and fits its requests (%s)",
			nc.Name, reqs.String(), resources.String(nc.Spec.Resources.Requests))
	}
	return Choice{InstanceType: best, Offering: offering}, nil
}
