// Package nodepoolstatus keeps NodePool status.resources equal to the sum of
// its NodeClaims, written with optimistic concurrency so racing writers (a
// launch, a termination, the Sweep) converge.
package nodepoolstatus

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/utils/resources"
)

// Resources sums what a NodePool's NodeClaims hold, as Karpenter's
// NodePool counter does: each NodeClaim's capacity (its requests while it
// is not launched yet), plus "nodes", the number of NodeClaims. Deleted
// NodeClaims still count until their finalizer is gone: their VMs still run.
func Resources(nodePool string, claims []karpv1.NodeClaim) corev1.ResourceList {
	total := corev1.ResourceList{}
	n := int64(0)
	for i := range claims {
		nc := &claims[i]
		if nc.Labels[karpv1.NodePoolLabelKey] != nodePool {
			continue
		}
		n++
		if len(nc.Status.Capacity) > 0 {
			total = resources.Merge(total, nc.Status.Capacity)
		} else {
			total = resources.Merge(total, nc.Spec.Resources.Requests)
		}
	}
	total[corev1.ResourceName("nodes")] = *resource.NewQuantity(n, resource.DecimalSI)
	return total
}

// Update recomputes a NodePool's status.resources from the
// API server and writes it with its resourceVersion, retrying on conflict.
// It is called after every launch and termination, and by the Sweep.
func Update(ctx context.Context, kube client.Client, nodePool string) error {
	if nodePool == "" {
		return nil
	}
	for range 5 {
		np := &karpv1.NodePool{}
		if err := kube.Get(ctx, client.ObjectKey{Name: nodePool}, np); err != nil {
			return client.IgnoreNotFound(err)
		}
		var claims karpv1.NodeClaimList
		if err := kube.List(ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: nodePool}); err != nil {
			return fmt.Errorf("listing NodeClaims of NodePool %s: %w", nodePool, err)
		}
		want := Resources(nodePool, claims.Items)
		if equality.Semantic.DeepEqual(np.Status.Resources, want) {
			return nil
		}
		stored := np.DeepCopy()
		np.Status.Resources = want
		err := kube.Status().Patch(ctx, np, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			return nil
		case apierrors.IsConflict(err):
			continue
		default:
			return fmt.Errorf("writing NodePool %s status.resources: %w", nodePool, err)
		}
	}
	return fmt.Errorf("writing NodePool %s status.resources: still conflicting after 5 attempts", nodePool)
}
