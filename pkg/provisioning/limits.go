package provisioning

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// resourceNodes is the NodePool limit on the number of nodes.
const resourceNodes corev1.ResourceName = "nodes"

// checkLimits re-checks nc against its NodePool's limits using a fresh
// NodeClaim list, just before nc is created.
//
// The scheduler already respects limits, but against the pass's snapshot.
// Provisioning is serialized per cluster by Service Bus sessions, yet two
// passes can still overlap when a session lock is lost (an invocation that
// outlives its lock while the message is redelivered): the later pass then
// acts on a snapshot that misses the other's NodeClaims. The re-check runs
// under the NodePool's limits lease (limitGuard), so no other pass can list
// or create between this List and the Create after it: two overlapping
// passes cannot both fit a claim into the same room.
//
// A NodeClaim counts as the scheduler counts it: its launched capacity, else
// the largest instance type it may become (Karpenter's rule), and claims
// being deleted do not count, as in the solve, so the re-check only ever
// refuses what a race let through.
func (p *Provisioner) checkLimits(ctx context.Context, np *karpv1.NodePool, nc *karpv1.NodeClaim) error {
	if len(np.Spec.Limits) == 0 {
		return nil
	}
	var list karpv1.NodeClaimList
	if err := p.kube.List(ctx, &list, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		return fmt.Errorf("listing NodeClaims of NodePool %s to check its limits: %w", np.Name, err)
	}
	// maxPods sets the pods capacity a claim is charged, as in the solve.
	class, err := lifecycle.NodeClassOf(ctx, p.kube, nc)
	if err != nil {
		return err
	}
	maxPods := *class.DefaultedSpecFor(p.maxPods).MaxPods
	held := []corev1.ResourceList{}
	nodes := int64(1) // nc itself
	for i := range list.Items {
		other := &list.Items[i]
		if other.Name == nc.Name {
			return nil // already created (a retried pass): Create finds it, nothing new is added
		}
		if other.DeletionTimestamp != nil {
			continue
		}
		held = append(held, scheduler.ChargedCapacity(other, p.catalog, maxPods))
		nodes++
	}
	total := resources.Merge(append(held, scheduler.ChargedCapacity(nc, p.catalog, maxPods))...)
	total[resourceNodes] = *resource.NewQuantity(nodes, resource.DecimalSI)
	var over []string
	for name, limit := range np.Spec.Limits {
		if used, ok := total[name]; ok && used.Cmp(limit) > 0 {
			over = append(over, fmt.Sprintf("%s %s > %s", name, used.String(), limit.String()))
		}
	}
	if len(over) > 0 {
		sort.Strings(over)
		return NewLimitExceededError(np.Name, nc.Name, strings.Join(over, ", "))
	}
	return nil
}
