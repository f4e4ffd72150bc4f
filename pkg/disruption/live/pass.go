package live

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/capacitybuffer"
	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// Pass runs one disruption pass; ev moves the named nodes' NodeClaims'
// status.lastPodEventTime first (Karpenter's pod events: consolidateAfter
// restarts).
func (c *Controller) Pass(ctx context.Context, ev PodEvents) (Result, error) {
	res := Result{Refused: map[string]int{}}
	started := time.Now()
	snap, err := snapshot.List(ctx, c.kube)
	if err != nil {
		return res, err
	}
	now := c.clock.Now()
	var errs []error
	errs = append(errs, c.notePodEvents(ctx, snap, ev)...)
	errs = append(errs, c.syncStatus(ctx, snap, &res.Outcome)...)
	inFlight, finished, err := c.resume(ctx, snap, &res.Outcome)
	res.Disrupted = append(res.Disrupted, finished...)
	errs = append(errs, err)
	if len(finished) > 0 {
		// The candidates just went: decide on what the cluster is now.
		if snap, err = snapshot.List(ctx, c.kube); err != nil {
			return res, errors.Join(append(errs, err)...)
		}
	}
	st, buffers, err := c.state(ctx, snap, now, true)
	if err != nil {
		return res, errors.Join(append(errs, err)...) // without the buffers, their room is unknown
	}
	decision := disruption.Decide(st)
	c.askBufferRoom(buffers, decision.BufferRooms, &res.Outcome)
	if err := snapshot.CheckTime(ctx, "disruption decision", started); err != nil {
		return res, errors.Join(append(errs, err)...) // nothing of the decision acted on
	}
	errs = append(errs, c.writeConditions(ctx, snap, st.Versions, now)...)
	errs = append(errs, c.expire(ctx, snap, decision.Expired, &res)...)
	c.budgetErrors(ctx, snap, decision.BudgetErrors, &res)
	c.explain(ctx, snap, decision.Refusals, res.Refused)
	// Deadlines land on slot boundaries (at most TriggerSlot late): nodes
	// that become consolidatable within one slot share one pass.
	next := decision.Next
	if !next.IsZero() {
		next = triggers.Due(next, TriggerSlot)
	}
	if inFlight == "" {
		inFlight = draining(snap)
	}
	next, err = c.startCommand(ctx, snap, decision.Command, inFlight, now, next, &res)
	errs = append(errs, err)
	if len(res.Expired) > 0 {
		next = earliest(next, triggers.Due(now, TriggerSlot))
	}
	c.askNext(next, &res)
	return res, errors.Join(errs...)
}

// expire deletes the NodeClaims past expireAfter.
func (c *Controller) expire(ctx context.Context, snap *snapshot.Cluster, expired []*karpv1.NodeClaim, res *Result) []error {
	var errs []error
	for _, nc := range expired {
		if err := c.disrupt(ctx, &res.Outcome, snap, nc, string(disruption.ReasonExpired), "", nil, 0); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Expired = append(res.Expired, nc.Name)
	}
	return errs
}

// startCommand starts the decided command unless another holds it back
// (one in flight, a drain, a validation pending); it returns next moved to
// when the pass after it is due. Drift acts at once; the other methods
// wait for their validation.
func (c *Controller) startCommand(ctx context.Context, snap *snapshot.Cluster, cmd *disruption.Command, inFlight string, now, next time.Time, res *Result) (time.Time, error) {
	pending := validating(snap, now)
	switch {
	case inFlight != "":
		res.InFlight = inFlight
		return earliest(next, triggers.Due(now, c.opts.ReplacementCheck)), nil
	case pending != "":
		// The validation decides, and asks for the next pass when it acts.
		res.InFlight = pending
		return next, nil
	case cmd == nil:
		return next, nil
	}
	res.Decided = cmd.String()
	if cmd.Reason != disruption.ReasonDrifted {
		at, err := c.askValidation(ctx, cmd, now, &res.Outcome)
		res.ValidateAt = at
		return next, err
	}
	// Drift does not wait for validation (Karpenter's order).
	executed, err := c.execute(ctx, snap, cmd)
	res.Replacing = append(res.Replacing, executed.Replacing...)
	res.Disrupted = append(res.Disrupted, executed.Disrupted...)
	res.Outcome.Then(executed.Outcome.Continuations...)
	return earliest(next, c.afterExecute(now, executed)), err
}

// afterExecute is when the pass after a command's execution is due: a
// replacement check when it launched replacements, else the next slot.
func (c *Controller) afterExecute(now time.Time, executed Result) time.Time {
	if len(executed.Replacing) > 0 {
		return triggers.Due(now, c.opts.ReplacementCheck)
	}
	return triggers.Due(now, TriggerSlot)
}

// askNext asks for the next pass at next (none when zero).
func (c *Controller) askNext(next time.Time, res *Result) {
	if next.IsZero() {
		return
	}
	res.Outcome.Then(triggers.DisruptionPass(c.opts.ClusterName, "deadline", next))
	res.Next = next
}

// state is what the engine decides from; versions that cannot be resolved
// now are logged and left out (their drift check waits for a later pass).
// Drift is held outside the cluster's maintenance windows
// (Options.Maintenance). Candidates are priced and replacements chosen
// with the NodeOverlays applied (Options.Overlays); writeOverlays writes
// the overlays' status. The CapacityBuffers are read for their virtual
// pods. Only reading the overlays or the buffers fails it.
func (c *Controller) state(ctx context.Context, snap *snapshot.Cluster, now time.Time, writeOverlays bool) (disruption.State, []capacitybuffer.Buffer, error) {
	st := disruption.State{Cluster: snap, Catalog: c.opts.Catalog, Now: now, Options: c.opts.Engine}
	overlays, objs, err := c.opts.Overlays.Resolve(ctx, snap.NodePools, c.opts.Catalog)
	if err != nil {
		return st, nil, err
	}
	st.PoolCatalogs = overlays.Catalogs(c.opts.Catalog)
	if writeOverlays {
		if err := c.opts.Overlays.WriteStatus(ctx, objs, overlays); err != nil {
			c.log.Warn("nodeoverlay status not written", "error", err)
		}
	}
	buffers, err := c.readBuffers(ctx)
	if err != nil {
		return st, nil, err
	}
	st.BufferPods = capacitybuffer.AllVirtualPods(buffers)
	if c.opts.Maintenance != nil {
		st.DriftHold = c.opts.Maintenance.DriftHold(ctx, now)
	}
	if c.opts.Versions == nil {
		return st, buffers, nil
	}
	versions, err := c.opts.Versions.Versions(ctx, snap.NodeClaims)
	if err != nil {
		c.log.Warn("node versions not fully resolved; their drift checks wait", "error", err)
	}
	st.Versions = versions
	return st, buffers, nil
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// draining names a NodeClaim being deleted whose node still has pods that
// must go elsewhere: until they have, capacity is in motion (an empty
// replacement is not empty for long) and no new command starts.
func draining(snap *snapshot.Cluster) string {
	leaving := map[string]string{}
	for _, nc := range snap.NodeClaims {
		if nc.DeletionTimestamp != nil && nc.Status.NodeName != "" {
			leaving[nc.Status.NodeName] = nc.Name
		}
	}
	if len(leaving) == 0 {
		return ""
	}
	for _, p := range snap.Pods {
		name, ok := leaving[p.Spec.NodeName]
		if !ok || p.DeletionTimestamp != nil || snapshot.Finished(p) || snapshot.OwnedByDaemonSet(p) {
			continue
		}
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		return "drain of " + name
	}
	return ""
}

func findClaim(snap *snapshot.Cluster, name string) *karpv1.NodeClaim {
	for _, nc := range snap.NodeClaims {
		if nc.Name == name {
			return nc
		}
	}
	return nil
}

// putClaim puts written, a copy of one of snap's NodeClaims that a pass
// wrote, in the place of the one it copied: the rest of the pass decides
// on what was written (the snapshot's own object is the cache's, never
// written).
func putClaim(snap *snapshot.Cluster, written *karpv1.NodeClaim) {
	for i, nc := range snap.NodeClaims {
		if nc.Name == written.Name {
			snap.NodeClaims[i] = written
			return
		}
	}
}

func nodeOf(snap *snapshot.Cluster, nc *karpv1.NodeClaim) *corev1.Node {
	if nc.Status.NodeName == "" {
		return nil
	}
	for _, n := range snap.Nodes {
		if n.Name == nc.Status.NodeName {
			return n
		}
	}
	return nil
}
