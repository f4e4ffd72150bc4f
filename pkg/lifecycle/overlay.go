package lifecycle

import (
	"context"
	"fmt"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/nodeoverlay"
)

// poolCatalog is the catalog as nc's NodePool sees it: the NodeOverlays
// resolved against every NodePool (a conflict in one NodePool refuses an
// overlay in all), applied for nc's. Without overlays it is the catalog.
func (lr *launcher) poolCatalog(ctx context.Context, nc *karpv1.NodeClaim) (*catalog.Catalog, error) {
	if lr.overlays.Off() {
		return lr.catalog, nil
	}
	overlays, err := lr.overlays.Read(ctx)
	if err != nil || len(overlays) == 0 {
		return lr.catalog, err
	}
	var pools karpv1.NodePoolList
	if err := lr.kube.List(ctx, &pools); err != nil {
		return nil, fmt.Errorf("listing NodePools for the NodeOverlays of NodeClaim %s: %w", nc.Name, err)
	}
	ptrs := make([]*karpv1.NodePool, 0, len(pools.Items))
	for i := range pools.Items {
		ptrs = append(ptrs, &pools.Items[i])
	}
	return nodeoverlay.Resolve(overlays, ptrs, lr.catalog).Apply(nc.Labels[karpv1.NodePoolLabelKey], lr.catalog), nil
}
