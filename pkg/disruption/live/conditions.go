package live

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/nodepoolstatus"
	"github.com/karpfunc/karpfunc/pkg/ownership"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
	"github.com/karpfunc/karpfunc/pkg/staticcapacity"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// writeConditions keeps every NodeClaim's Consolidatable and Drifted
// conditions true to the engine's view; it writes only what changed.
func (c *Controller) writeConditions(ctx context.Context, snap *snapshot.Cluster, versions disruption.Versions, now time.Time) []error {
	pools := map[string]*karpv1.NodePool{}
	for _, np := range snap.NodePools {
		pools[np.Name] = np
	}
	hashes := map[string]string{}
	for _, class := range snap.NodeClasses {
		hashes[class.Name] = disruption.NodeClassHash(class)
	}
	nodes := make(map[string]*corev1.Node, len(snap.Nodes))
	for _, n := range snap.Nodes {
		nodes[n.Name] = n
	}
	var errs []error
	for i, nc := range snap.NodeClaims {
		np := pools[nc.Labels[karpv1.NodePoolLabelKey]]
		if np == nil || nc.DeletionTimestamp != nil || !ownership.Owns(nc) {
			continue
		}
		err := c.writeClaimStatus(ctx, snap, i, func(cur *karpv1.NodeClaim) bool {
			return cur.DeletionTimestamp == nil && syncConditions(cur, nodes[cur.Status.NodeName], np, hashes, versions, now)
		})
		if client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("writing the disruption conditions of NodeClaim %s: %w", nc.Name, err))
		}
	}
	return errs
}

// syncConditions sets nc's Consolidatable and Drifted conditions to the
// engine's view of it; false when they already say so.
func syncConditions(nc *karpv1.NodeClaim, node *corev1.Node, np *karpv1.NodePool, hashes map[string]string, versions disruption.Versions, now time.Time) bool {
	want := disruption.Conditions(nc, node, np, hashes, versions, now)
	changed := false
	if nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
		changed = syncConsolidatable(nc, want)
	}
	return syncDrifted(nc, want) || changed
}

// syncConsolidatable sets Consolidatable to want's; false when it says so.
func syncConsolidatable(nc *karpv1.NodeClaim, want disruption.ConditionState) bool {
	conds := nc.StatusConditions()
	cur := conds.Get(karpv1.ConditionTypeConsolidatable)
	if want.Consolidatable && (cur == nil || !cur.IsTrue()) {
		return conds.SetTrue(karpv1.ConditionTypeConsolidatable)
	}
	if !want.Consolidatable && (cur == nil || cur.IsTrue()) {
		msg := "consolidateAfter is Never"
		if !want.ConsolidatableAt.IsZero() {
			msg = "consolidatable at " + want.ConsolidatableAt.UTC().Format(time.RFC3339)
		}
		return conds.SetFalse(karpv1.ConditionTypeConsolidatable, "NotConsolidatable", msg)
	}
	return false
}

// syncDrifted sets Drifted to want's (cleared when not drifted); false
// when it says so.
func syncDrifted(nc *karpv1.NodeClaim, want disruption.ConditionState) bool {
	conds := nc.StatusConditions()
	cur := conds.Get(karpv1.ConditionTypeDrifted)
	switch {
	case want.Drifted != "" && (cur == nil || !cur.IsTrue() || cur.Message != want.Drifted):
		reason, _, _ := strings.Cut(want.Drifted, ":")
		return conds.SetTrueWithReason(karpv1.ConditionTypeDrifted, reason, want.Drifted)
	case want.Drifted == "" && cur != nil:
		return conds.Clear(karpv1.ConditionTypeDrifted) == nil
	}
	return false
}

// writeClaimStatus writes snap.NodeClaims[i]'s status (a copy: the
// snapshot shares the object with the cache) and puts what was written in
// its place, so the rest of the pass decides on it.
func (c *Controller) writeClaimStatus(ctx context.Context, snap *snapshot.Cluster, i int, mutate func(*karpv1.NodeClaim) bool) error {
	written, wrote, err := lifecycle.WriteNodeClaimStatus(ctx, c.kube, snap.NodeClaims[i], mutate)
	if err == nil && wrote {
		snap.NodeClaims[i] = written
	}
	return err
}

// notePodEvents moves lastPodEventTime forward on the NodeClaims of the
// nodes named (never backward: events arrive out of order).
func (c *Controller) notePodEvents(ctx context.Context, snap *snapshot.Cluster, ev PodEvents) []error {
	if len(ev.Nodes) == 0 || ev.At.IsZero() {
		return nil
	}
	named := make(map[string]bool, len(ev.Nodes))
	for _, n := range ev.Nodes {
		named[n] = true
	}
	var errs []error
	for i, nc := range snap.NodeClaims {
		if !named[nc.Status.NodeName] || nc.DeletionTimestamp != nil || !ownership.Owns(nc) || !nc.Status.LastPodEventTime.Time.Before(ev.At) {
			continue
		}
		err := c.writeClaimStatus(ctx, snap, i, func(cur *karpv1.NodeClaim) bool {
			if cur.DeletionTimestamp != nil || !cur.Status.LastPodEventTime.Time.Before(ev.At) {
				return false
			}
			cur.Status.LastPodEventTime = metav1.NewTime(ev.At)
			return true
		})
		if client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("writing lastPodEventTime of NodeClaim %s: %w", nc.Name, err))
		}
	}
	return errs
}

// syncStatus writes NodePool and AKSNodeClass status from snap and asks
// (in out) for a provisioning pass when a NodePool became Ready (its
// pending pods waited for it; the relay's resync would come later).
func (c *Controller) syncStatus(ctx context.Context, snap *snapshot.Cluster, out *triggers.Outcome) []error {
	if c.opts.Status == nil {
		return nil
	}
	synced, err := nodepoolstatus.Sync(ctx, c.kube, nodepoolstatus.Objects{NodePools: snap.NodePools,
		NodeClasses: snap.NodeClasses, NodeClaims: snap.NodeClaims}, *c.opts.Status, c.clock)
	errs := []error{err}
	if c.opts.Status.RefuseStatic {
		errs = append(errs, c.refuseStatic(ctx, snap)...)
	}
	// A static NodePool whose replicas changed (the relay reports its spec
	// change here) or whose claims went: the provisioning pass keeps its
	// replicas. The Sweep's pass catches any event lost.
	if unsettled := staticcapacity.Unsettled(snap.NodePools, synced.NotReady, staticcapacity.Objects{NodeClaims: snap.NodeClaims,
		Nodes: snap.Nodes, Pods: snap.Pods}, c.clock.Now()); len(unsettled) > 0 {
		out.Then(triggers.ProvisionPass(c.opts.ClusterName, "static-replicas", c.clock.Now(), 0))
		c.log.Info("static nodepools not at their replicas; provisioning pass asked", "nodepools", unsettled)
	}
	if len(synced.BecameReady) == 0 {
		return errs
	}
	out.Then(triggers.ProvisionPass(c.opts.ClusterName, "nodepool-ready", c.clock.Now(), 0))
	c.log.Info("nodepools became ready; provisioning pass asked", "nodepools", synced.BecameReady)
	return errs
}

// refuseStatic writes the Warning event on each static NodePool while
// static capacity is off (its status says the same, see
// nodepoolstatus.RefuseStatic): a refusal by name, also when no
// provisioning pass runs. The recorder writes it once per window.
func (c *Controller) refuseStatic(ctx context.Context, snap *snapshot.Cluster) []error {
	var errs []error
	for _, np := range snap.NodePools {
		if !staticcapacity.IsStatic(np) || np.DeletionTimestamp != nil {
			continue
		}
		if err := c.recorder.Publish(ctx, events.Event{Object: np, Type: corev1.EventTypeWarning, Reason: staticcapacity.ReasonDisabled,
			Message: staticcapacity.DisabledMessage(np), DedupeValues: []string{string(np.UID)}}); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
