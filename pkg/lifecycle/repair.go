package lifecycle

import (
	"context"
	"fmt"
	"time"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// A repaired NodeClaim is one whose node stayed unhealthy past its repair
// policy's toleration (package repair). As Karpenter's node health
// controller does (pkg/controllers/node/health/controller.go:157-226), its
// termination is forced: the karpenter.sh/nodeclaim-termination-timestamp
// annotation is set to the time of the repair, so Terminate neither waits
// for the drain nor honours terminationGracePeriod, PodDisruptionBudgets or
// do-not-disrupt: the VM goes at once and the pods still bound to the
// Node are deleted with it. The DisruptionReason condition (reason
// Unhealthy) says why on the NodeClaim.
const ReasonUnhealthy = "Unhealthy"

// RepairDeadline returns the forced termination time of a repaired
// NodeClaim and true, or false when nc is not being repaired.
func RepairDeadline(nc *karpv1.NodeClaim) (time.Time, bool) {
	cond := nc.StatusConditions().Get(karpv1.ConditionTypeDisruptionReason)
	if cond == nil || !cond.IsTrue() || cond.Reason != ReasonUnhealthy {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey])
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// forcedDeadline is the deadline of an interrupted or repaired NodeClaim:
// a time the VM goes whatever still runs on it.
func forcedDeadline(nc *karpv1.NodeClaim) (time.Time, bool) {
	if t, ok := InterruptionDeadline(nc); ok {
		return t, true
	}
	return RepairDeadline(nc)
}

// MarkUnhealthy records that nc is repaired at now because of why: the
// termination-timestamp annotation (kept when an earlier one is there)
// and the DisruptionReason condition with reason Unhealthy.
func (c *Controller) MarkUnhealthy(ctx context.Context, nc *karpv1.NodeClaim, why string) (*karpv1.NodeClaim, error) {
	now := c.clock.Now().UTC().Truncate(time.Second)
	nc, _, err := converge(ctx, c.kube, nc, newNodeClaim, writeObject, func(cur *karpv1.NodeClaim) bool {
		if prev, err := time.Parse(time.RFC3339, cur.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]); err == nil && !now.Before(prev) {
			return false
		}
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] = now.Format(time.RFC3339)
		return true
	})
	if err != nil {
		return nc, fmt.Errorf("recording the repair on NodeClaim %s: %w", nc.Name, err)
	}
	nc, _, err = converge(ctx, c.kube, nc, newNodeClaim, writeStatus, func(cur *karpv1.NodeClaim) bool {
		cond := cur.StatusConditions().Get(karpv1.ConditionTypeDisruptionReason)
		if cond != nil && cond.IsTrue() && cond.Reason == ReasonUnhealthy && cond.Message == why {
			return false
		}
		return cur.StatusConditions().SetTrueWithReason(karpv1.ConditionTypeDisruptionReason, ReasonUnhealthy, why)
	})
	if err != nil {
		return nc, fmt.Errorf("setting DisruptionReason=%s on NodeClaim %s: %w", ReasonUnhealthy, nc.Name, err)
	}
	return nc, nil
}
