package lifecycle

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// An interrupted NodeClaim is one whose VM Azure is taking back (spot
// preemption). Its state lives on the NodeClaim, so every duplicate signal,
// redelivery and drain pass reads the same facts:
//
//   - the DisruptionReason condition is True with reason SpotInterrupted and
//     the deadline in its message (what `kubectl get nodeclaim` shows);
//   - the karpenter.sh/nodeclaim-termination-timestamp annotation holds the
//     deadline in RFC 3339: the time by which the node is gone, Karpenter's
//     own key for that fact.
//
// Terminate drains an interrupted NodeClaim against that deadline instead of
// its terminationGracePeriod alone (see drain).
const (
	// ReasonSpotInterrupted is the DisruptionReason condition reason and the
	// event reason, as Karpenter's AWS interruption controller names it.
	ReasonSpotInterrupted = "SpotInterrupted"
	// InterruptionForceWindow is how long before the deadline the drain stops
	// honouring PodDisruptionBudgets: pods still on the node are deleted
	// with the time left as their grace period, so their controllers
	// recreate them while the VM still exists. The VM dies at the deadline
	// whatever a budget says.
	InterruptionForceWindow = 5 * time.Second
)

// InterruptionDeadline returns the deadline of an interrupted NodeClaim and
// true, or false when the NodeClaim is not interrupted (or its annotation
// does not parse: then it is drained as an ordinary deletion).
func InterruptionDeadline(nc *karpv1.NodeClaim) (time.Time, bool) {
	cond := nc.StatusConditions().Get(karpv1.ConditionTypeDisruptionReason)
	if cond == nil || !cond.IsTrue() || cond.Reason != ReasonSpotInterrupted {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey])
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// MarkInterrupted records that nc's VM goes away at deadline: the
// termination-timestamp annotation (kept at the earlier deadline when one is
// already there: a later signal can only bring the end closer) and the
// DisruptionReason condition. first is true when this call's write made the
// NodeClaim interrupted: the write carries the resourceVersion it read, so
// of concurrent duplicates exactly one is first.
func (c *Controller) MarkInterrupted(ctx context.Context, nc *karpv1.NodeClaim, deadline time.Time, why string) (out *karpv1.NodeClaim, first bool, err error) {
	deadline = deadline.UTC().Truncate(time.Second)
	nc, _, err = converge(ctx, c.kube, nc, newNodeClaim, writeObject, func(cur *karpv1.NodeClaim) bool {
		if prev, err := time.Parse(time.RFC3339, cur.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]); err == nil && !deadline.Before(prev) {
			return false
		}
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] = deadline.Format(time.RFC3339)
		return true
	})
	if err != nil {
		return nc, false, fmt.Errorf("recording the interruption deadline on NodeClaim %s: %w", nc.Name, err)
	}
	final, _ := time.Parse(time.RFC3339, nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey])
	msg := fmt.Sprintf("%s; the node must be gone by %s", why, final.UTC().Format(time.RFC3339))
	transition := false
	nc, wrote, err := converge(ctx, c.kube, nc, newNodeClaim, writeStatus, func(cur *karpv1.NodeClaim) bool {
		cond := cur.StatusConditions().Get(karpv1.ConditionTypeDisruptionReason)
		interrupted := cond != nil && cond.IsTrue() && cond.Reason == ReasonSpotInterrupted
		transition = !interrupted
		if interrupted && cond.Message == msg {
			return false
		}
		return cur.StatusConditions().SetTrueWithReason(karpv1.ConditionTypeDisruptionReason, ReasonSpotInterrupted, msg)
	})
	if err != nil {
		return nc, false, fmt.Errorf("setting DisruptionReason=%s on NodeClaim %s: %w", ReasonSpotInterrupted, nc.Name, err)
	}
	return nc, wrote && transition, nil
}

// RequestTerminate asks the Lifecycle function to terminate nc now: the
// outcome holds the message, under the same MessageId the relay uses for
// the NodeClaim's deletion (triggers.NodeClaimDeleting), so duplicate
// detection keeps one of the two: one drain, driven by one chain of
// scheduled retries. When no one sends continuations (Options.Publisher
// nil) it runs Terminate in place.
func (c *Controller) RequestTerminate(ctx context.Context, nc *karpv1.NodeClaim) (triggers.Outcome, error) {
	if c.pub == nil {
		res, err := c.Terminate(ctx, nc.Name)
		if IsDrainPending(err) {
			return res.Outcome, nil // the caller's redelivery or the Sweep comes back
		}
		return res.Outcome, err
	}
	return triggers.Outcome{Continuations: []triggers.Continuation{
		triggers.NodeClaimDeleting(c.cluster, nc.Name, string(nc.UID), c.clock.Now())}}, nil
}

// TaintDisrupted adds karpenter.sh/disrupted:NoSchedule to node, so no new
// pod lands on it; it is a no-op when the taint is there.
func (c *Controller) TaintDisrupted(ctx context.Context, node *corev1.Node) (*corev1.Node, error) {
	return c.taintDisrupted(ctx, node)
}

// NodeOf returns the Node of nc (by its status.nodeName, else its
// providerID), or nil when there is none.
func (c *Controller) NodeOf(ctx context.Context, nc *karpv1.NodeClaim) (*corev1.Node, error) {
	return c.nodeFor(ctx, nc)
}

// NodeClaimForProviderID finds the NodeClaim launched as providerID (nil
// when none is).
func (c *Controller) NodeClaimForProviderID(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	return c.nodeClaimForProviderID(ctx, providerID)
}

// interruptionEviction is the eviction grace period for pod under an
// interruption deadline: its own terminationGracePeriodSeconds (the API
// default, 30 s, when unset), capped to the whole seconds left, never below
// 1 (0 would remove the pod from etcd without letting it stop).
func interruptionEviction(pod *corev1.Pod, left time.Duration) int64 {
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	return max(min(grace, int64(left/time.Second)), 1)
}

// forceDeleteOrphans deletes pods bound to a Node that no longer exists
// (its VM is gone). No kubelet will ever confirm their shutdown, so they go
// at once (grace 0), as the pod garbage collector would do only after its
// quarantine; their controllers recreate them right away.
func (c *Controller) forceDeleteOrphans(ctx context.Context, nodeName string) (int, error) {
	var pods corev1.PodList
	if err := c.kube.List(ctx, &pods, client.MatchingFields{"spec.nodeName": nodeName}); err != nil {
		return 0, fmt.Errorf("listing pods on vanished node %s: %w", nodeName, err)
	}
	deleted := 0
	for i := range pods.Items {
		pod := &pods.Items[i]
		if err := c.kube.Delete(ctx, pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			return deleted, fmt.Errorf("deleting pod %s/%s of vanished node %s: %w", pod.Namespace, pod.Name, nodeName, err)
		}
		deleted++
	}
	return deleted, nil
}
