// Package nodepoolstatus writes NodePool and AKSNodeClass status as
// Karpenter and the Azure provider keep them.
//
// A NodePool's status.resources and status.nodes are the sum of its
// NodeClaims (Update, after every launch and termination and by the Sweep);
// its ValidationSucceeded, NodeClassReady and Ready conditions, and an
// AKSNodeClass's images, kubernetesVersion, ImagesReady,
// KubernetesVersionReady, SubnetsReady and Ready, are computed by pure
// functions (PoolStatus, ClassStatus) and written by Sync, which the
// Provision and Disruption passes run on the objects they list: status
// follows the triggers those passes already get (pending pods, NodePool and
// AKSNodeClass changes), never a timer. Every write carries the object's
// resourceVersion, so racing writers converge and none overwrites a
// newer status with an older one.
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
	count := int64(0)
	for i := range claims {
		nc := &claims[i]
		if nc.Labels[karpv1.NodePoolLabelKey] != nodePool {
			continue
		}
		count++
		if len(nc.Status.Capacity) > 0 {
			total = resources.Merge(total, nc.Status.Capacity)
		} else {
			total = resources.Merge(total, nc.Spec.Resources.Requests)
		}
	}
	total[corev1.ResourceName("nodes")] = *resource.NewQuantity(count, resource.DecimalSI)
	return total
}

// Update recomputes a NodePool's status.resources and status.nodes from the
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
		want, nodes := Counts(nodePool, claims.Items)
		if equality.Semantic.DeepEqual(np.Status.Resources, want) && np.Status.Nodes != nil && *np.Status.Nodes == nodes {
			return nil
		}
		stored := np.DeepCopy()
		np.Status.Resources = want
		np.Status.Nodes = &nodes
		err := kube.Status().Patch(ctx, np, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			return nil
		case apierrors.IsConflict(err):
			continue
		default:
			return fmt.Errorf("writing NodePool %s status.resources and nodes: %w", nodePool, err)
		}
	}
	return fmt.Errorf("writing NodePool %s status.resources and nodes: still conflicting after 5 attempts", nodePool)
}
