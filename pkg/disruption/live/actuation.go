package live

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/decisions"
	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/ownership"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// execute carries out a command: a delete at once, a replace by creating
// its replacements, whose launch checks go into the result's Outcome (the
// candidates go when they are Initialized, see resume).
func (c *Controller) execute(ctx context.Context, snap *snapshot.Cluster, cmd *disruption.Command) (Result, error) {
	if len(cmd.Replacements) == 0 {
		return c.deleteCandidates(ctx, snap, cmd)
	}
	var res Result
	rec := recordOf(cmd)
	annotations := rec.Encode()
	existing := 0
	for _, nc := range snap.NodeClaims {
		if commandOf(nc.Annotations) == rec.ID && nc.DeletionTimestamp == nil {
			existing++
		}
	}
	var errs []error
	for _, plan := range cmd.Replacements[min(existing, len(cmd.Replacements)):] {
		nc, launchCheck, err := c.opts.Replacer.Replace(ctx, plan, annotations)
		if nc != nil {
			res.Replacing = append(res.Replacing, nc.Name)
			res.Outcome.Then(launchCheck)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("launching a replacement for %s: %w", cmd, err))
			continue
		}
		c.log.Info("disruption replacement created", "command", cmd.String(), "replacement", nc.Name)
	}
	for _, cand := range cmd.Candidates {
		c.event(ctx, cand.NodeClaim, corev1.EventTypeNormal, events.ReasonDisruptionLaunching,
			fmt.Sprintf("Launching NodeClaim: %s (replacing it: %s)", eventReason(string(cmd.Reason), cmd.Method), strings.Join(res.Replacing, ", ")))
	}
	return res, errors.Join(errs...)
}

// deleteCandidates carries out a command without replacements.
func (c *Controller) deleteCandidates(ctx context.Context, snap *snapshot.Cluster, cmd *disruption.Command) (Result, error) {
	var res Result
	var errs []error
	for _, cand := range cmd.Candidates {
		if err := c.disrupt(ctx, &res.Outcome, snap, cand.NodeClaim, string(cmd.Reason), cmd.Method, nil, cmd.Savings/float64(len(cmd.Candidates))); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Disrupted = append(res.Disrupted, cand.Name())
	}
	return res, errors.Join(errs...)
}

// disrupt takes one NodeClaim away for reason: the disrupted taint on its
// Node, the DisruptionReason condition, DisruptionTerminating events, and
// the deletion (UID-guarded), which the termination path drains; out gets
// the deletion's announcement to Lifecycle.
func (c *Controller) disrupt(ctx context.Context, out *triggers.Outcome, snap *snapshot.Cluster, nc *karpv1.NodeClaim, reason, method string, replacements []string, savings float64) error {
	if !ownership.Owns(nc) {
		return nil
	}
	node := nodeOf(snap, nc)
	if err := c.taint(ctx, node); err != nil {
		return err
	}
	if _, _, err := lifecycle.WriteNodeClaimStatus(ctx, c.kube, nc, func(cur *karpv1.NodeClaim) bool {
		return cur.StatusConditions().SetTrueWithReason(karpv1.ConditionTypeDisruptionReason, reason, "Disrupted: "+reason)
	}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing the DisruptionReason of NodeClaim %s: %w", nc.Name, err)
	}
	if node != nil {
		c.event(ctx, node, corev1.EventTypeNormal, events.ReasonDisruptionTerminating, "Disrupting Node: "+eventReason(reason, method))
	}
	c.event(ctx, nc, corev1.EventTypeNormal, events.ReasonDisruptionTerminating, "Disrupting NodeClaim: "+eventReason(reason, method))
	uid := nc.UID
	if err := c.kube.Delete(ctx, nc, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting NodeClaim %s (%s): %w", nc.Name, reason, err)
	}
	// Lifecycle hears of the deletion from us and from the relay, under
	// the same MessageId: whichever arrives first starts the drain, the
	// other is dropped.
	out.Then(triggers.NodeClaimDeleting(c.opts.ClusterName, nc.Name, string(nc.UID), c.clock.Now()))
	c.log.Info("disrupted nodeclaim", "nodeclaim", nc.Name, "reason", reason)
	c.recordDisrupted(ctx, snap, nc, node, reason, replacements, savings)
	return nil
}

// taint puts the disrupted taint on node (nil: none) unless it has it; it
// patches a copy, node being the snapshot's.
func (c *Controller) taint(ctx context.Context, node *corev1.Node) error {
	if node == nil || slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.DisruptedTaintKey }) {
		return nil
	}
	patch := client.MergeFromWithOptions(node, client.MergeFromWithOptimisticLock{})
	tainted := node.DeepCopy()
	tainted.Spec.Taints = append(tainted.Spec.Taints, disruption.DisruptedTaint)
	if err := c.kube.Patch(ctx, tainted, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("tainting node %s for disruption: %w", node.Name, err)
	}
	return nil
}

// eventReason is the reason as events show it: Karpenter's, plus the
// method for a rebalancing consolidation (which Karpenter does not have).
func eventReason(reason, method string) string {
	if method == disruption.MethodRebalance {
		return reason + ", " + method
	}
	return reason
}

func (c *Controller) catalogType(name string) (*catalog.InstanceType, bool) {
	if c.opts.Catalog == nil {
		return nil, false
	}
	return c.opts.Catalog.Get(name)
}

// recordDisrupted counts the disruption (karpenter_nodeclaims_disrupted_total)
// and writes its decision record: what went, at what price, with which pods.
func (c *Controller) recordDisrupted(ctx context.Context, snap *snapshot.Cluster, nc *karpv1.NodeClaim, node *corev1.Node, reason string, replacements []string, savings float64) {
	lifecycle.RecordDisrupted(ctx, nc, reason)
	record := decisions.Record{Decision: decisions.Consolidation, Cluster: c.opts.ClusterName,
		NodePool: nc.Labels[karpv1.NodePoolLabelKey], NodeClaim: nc.Name,
		Size: nc.Labels[corev1.LabelInstanceTypeStable], Zone: nc.Labels[corev1.LabelTopologyZone],
		CapacityType: nc.Labels[karpv1.CapacityTypeLabelKey], Reason: reason,
		Replacements: replacements, SavingsPerHour: savings, Pods: []string{}}
	if reason == string(disruption.ReasonExpired) || reason == string(disruption.ReasonDrifted) {
		record.Decision = decisions.Disruption
	}
	if instanceType, ok := c.catalogType(record.Size); ok {
		for _, offering := range instanceType.Offerings {
			if offering.Zone == record.Zone && offering.CapacityType == record.CapacityType {
				record.PricePerHour = offering.Price
			}
		}
	}
	if node != nil {
		for _, pod := range snap.Pods {
			if pod.Spec.NodeName == node.Name {
				record.Pods = append(record.Pods, pod.Namespace+"/"+pod.Name)
			}
		}
	}
	c.opts.Decisions.Record(ctx, record)
}
