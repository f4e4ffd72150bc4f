package live

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/ownership"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// explain writes one event per node left alone, on its Node and NodeClaim:
// DisruptionBlocked for a reason on the node itself, Unconsolidatable when
// consolidation found nothing better. As Karpenter's (pkg/controllers/
// disruption/events: both deduplicate on the object's UID, Unconsolidatable
// for 15 minutes), the same event on the same object is written once per
// window, so a fleet at rest costs no writes.
func (c *Controller) explain(ctx context.Context, snap *snapshot.Cluster, refusals []disruption.Refusal, counts map[string]int) {
	for _, refusal := range refusals {
		nc := findClaim(snap, refusal.NodeClaim)
		if nc == nil || !ownership.Owns(nc) {
			continue
		}
		counts[explanation(refusal, nc).Reason]++
		if node := nodeOf(snap, nc); node != nil {
			c.publish(ctx, explanation(refusal, node))
		}
		c.publish(ctx, explanation(refusal, nc))
	}
}

// explanation is the event saying why obj (a Node or its NodeClaim) was
// left alone. Unconsolidatable deduplicates on obj's UID whatever its
// message says (it may carry a time). DisruptionBlocked deduplicates on
// the UID and the reason: Karpenter keys it on the UID alone, so a node
// first blocked as "not Initialized" would say nothing of the
// do-not-disrupt pod that blocks it next until the window ends, and
// `kubectl describe node` would show a stale reason. Every Blocked reason
// is a fixed sentence (no time in it), so a node at rest still costs one
// write per window.
func explanation(refusal disruption.Refusal, obj client.Object) events.Event {
	if refusal.Blocked {
		return events.Event{Object: obj, Type: corev1.EventTypeNormal, Reason: events.ReasonDisruptionBlocked, Message: refusal.Reason,
			DedupeValues: []string{string(obj.GetUID()), refusal.Reason}}
	}
	return events.Event{Object: obj, Type: corev1.EventTypeNormal, Reason: events.ReasonUnconsolidatable, Message: refusal.Reason,
		DedupeValues: []string{string(obj.GetUID())}, DedupeTimeout: ExplainEvery}
}

// budgetErrors reports budgets that cannot be read: a Warning event on the
// NodePool naming the budget and what is wrong; the NodePool is not
// disrupted on their account (the engine allows it nothing).
func (c *Controller) budgetErrors(ctx context.Context, snap *snapshot.Cluster, errs []error, res *Result) {
	for _, err := range errs {
		res.BudgetErrors = append(res.BudgetErrors, err.Error())
		var be *disruption.BudgetError
		if !errors.As(err, &be) {
			continue
		}
		for _, np := range snap.NodePools {
			if np.Name == be.NodePool {
				c.event(ctx, np, corev1.EventTypeWarning, events.ReasonDisruptionBlocked,
					"No disruptions for NodePool "+np.Name+" until its budgets are fixed: "+err.Error())
			}
		}
	}
}

func (c *Controller) event(ctx context.Context, obj client.Object, typ, reason, msg string) {
	c.publish(ctx, events.Event{Object: obj, Type: typ, Reason: reason, Message: msg})
}

func (c *Controller) publish(ctx context.Context, ev events.Event) {
	if err := c.recorder.Publish(ctx, ev); err != nil {
		c.log.Warn("writing event", "reason", ev.Reason, "object", ev.Object.GetName(), "error", err)
	}
}
