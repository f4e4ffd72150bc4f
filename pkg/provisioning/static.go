package provisioning

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/claimnames"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/ownership"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
	"github.com/karpfunc/karpfunc/pkg/staticcapacity"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// StaticResult is what a pass did for one static NodePool.
type StaticResult struct {
	NodePool string
	Replicas int64
	// Running counts the claims toward replicas before the pass acted.
	Running int
	Created []string
	Deleted []string
	// Waiting says why the pool is short of replicas and the pass could
	// not help it (limits.nodes, not Ready, no instance type).
	Waiting string
}

// keepStatic brings every static NodePool (spec.replicas) to its replica
// count, as Karpenter's static provisioning and deprovisioning controllers
// (package staticcapacity): it creates pod-less NodeClaims up to replicas
// within limits.nodes, and deletes the claims staticcapacity chooses when
// there are more, asking termination to drain them (PDBs and the
// termination grace period hold as for any deleted NodeClaim). Static
// pools are skipped when the Provisioner refuses them (StaticCapacity
// off: their status says so) or when they are not Ready. The claims it
// creates join in.NodeClaims, so pending pods placed in the same pass may
// use them.
func (p *Provisioner) keepStatic(ctx context.Context, ps *pass, snap *snapshot.Cluster, in *scheduler.Input, view int64) {
	held := make(map[string]bool, len(snap.NodeClaims))
	for _, nc := range snap.NodeClaims {
		held[nc.Name] = true
	}
	retire := int64(-1)
	for _, np := range snap.NodePools {
		if !staticcapacity.IsStatic(np) || np.DeletionTimestamp != nil {
			continue
		}
		if p.staticOff {
			p.refuseStatic(ctx, ps, np)
			continue
		}
		retire = max(retire, p.keepPool(ctx, ps, np, snap, in, held, view))
	}
	if retire >= 0 {
		if err := p.names.Retire(ctx, retire); err != nil {
			ps.errs = append(ps.errs, err)
		}
	}
}

// keepPool brings static pool np to its replica count (see keepStatic) and
// returns the highest name generation it created (-1: none).
func (p *Provisioner) keepPool(ctx context.Context, ps *pass, np *karpv1.NodePool, snap *snapshot.Cluster, in *scheduler.Input, held map[string]bool, view int64) int64 {
	retire := int64(-1)
	claims := staticcapacity.ClaimsOf(np, staticcapacity.Objects{NodeClaims: managed(snap.NodeClaims), Nodes: snap.Nodes, Pods: snap.Pods}, p.clock.Now())
	d := staticcapacity.Decide(np, claims)
	res := StaticResult{NodePool: np.Name, Replicas: d.Replicas, Running: d.Running, Waiting: d.LimitReached}
	if why, notReady := in.NotReady[np.Name]; notReady && d.Create > 0 {
		res.Waiting = "NodePool is not Ready: " + why
		d.Create = 0
	}
	if d.Create > 0 {
		created, generation := p.createStatic(ctx, ps, np, *in, d.Create, held, view, &res)
		in.NodeClaims = append(in.NodeClaims, created...)
		snap.NodeClaims = append(snap.NodeClaims, created...)
		retire = generation
	}
	for _, nc := range d.Delete {
		if err := p.kube.Delete(ctx, nc, client.Preconditions{UID: &nc.UID}); client.IgnoreNotFound(err) != nil {
			ps.errs = append(ps.errs, fmt.Errorf("deleting NodeClaim %s of static NodePool %s: %w", nc.Name, np.Name, err))
			continue
		}
		p.log.Info("deleted nodeclaim to satisfy replica count", "nodeclaim", nc.Name, "nodepool", np.Name,
			"current", d.Running, "desired", d.Replicas)
		res.Deleted = append(res.Deleted, nc.Name)
		ps.res.Outcome.Then(triggers.NodeClaimDeleting(p.clusterName, nc.Name, string(nc.UID), p.clock.Now()))
	}
	if res.Waiting != "" {
		p.log.Warn("static nodepool short of replicas", "nodepool", np.Name, "replicas", d.Replicas, "running", d.Running, "reason", res.Waiting)
	}
	// A pool left short waits for what can change that, each of which
	// asks for a pass: a termination (room under limits.nodes), a spec
	// change or the Sweep (the Disruption pass sees it unsettled), the
	// NodePool turning Ready. Karpenter polls every 30s instead.
	if len(res.Created)+len(res.Deleted) > 0 || res.Waiting != "" {
		ps.res.Static = append(ps.res.Static, res)
	}
	return retire
}

// createStatic creates n pod-less NodeClaims for static pool np and
// returns them and the highest name generation used (-1: none).
func (p *Provisioner) createStatic(ctx context.Context, ps *pass, np *karpv1.NodePool, in scheduler.Input, n int64, held map[string]bool, view int64, res *StaticResult) ([]*karpv1.NodeClaim, int64) {
	plan, why := scheduler.StaticPlan(in, np)
	if plan == nil {
		res.Waiting = why
		if err := p.recorder.Publish(ctx, events.Event{Object: np, Type: corev1.EventTypeWarning,
			Reason: events.ReasonFailedScheduling, Message: "karpfunc: static NodePool cannot launch: " + why,
			DedupeValues: []string{string(np.UID), why}}); err != nil {
			ps.errs = append(ps.errs, err)
		}
		return nil, -1
	}
	var created []*karpv1.NodeClaim
	retire := int64(-1)
	for range n {
		nc, isNew, err := p.create(ctx, plan, func(name string) bool { return held[name] }, view, nil)
		if err != nil {
			if IsLimitExceeded(err) || IsNameRetired(err) {
				res.Waiting = err.Error()
			} else {
				ps.errs = append(ps.errs, err)
			}
			break
		}
		held[nc.Name] = true
		if !isNew {
			continue
		}
		created = append(created, nc)
		res.Created = append(res.Created, nc.Name)
		ps.res.Created = append(ps.res.Created, nc.Name)
		recordCreated(ctx, nc, nil, p.clock.Now())
		if generation, ok := claimnames.GenerationOf(nc); ok && generation > retire {
			retire = generation
		}
	}
	return created, retire
}

// refuseStatic writes a Warning event on a static NodePool the Provisioner
// does not serve (its status condition says the same; see
// nodepoolstatus.ClassOptions.RefuseStatic).
func (p *Provisioner) refuseStatic(ctx context.Context, ps *pass, np *karpv1.NodePool) {
	if err := p.recorder.Publish(ctx, events.Event{Object: np, Type: corev1.EventTypeWarning, Reason: staticcapacity.ReasonDisabled,
		Message: staticcapacity.DisabledMessage(np), DedupeValues: []string{string(np.UID)}}); err != nil {
		ps.errs = append(ps.errs, err)
	}
}

// managed are the claims karpfunc owns: another controller's claims are
// not ours to count or delete.
func managed(claims []*karpv1.NodeClaim) []*karpv1.NodeClaim {
	out := make([]*karpv1.NodeClaim, 0, len(claims))
	for _, nc := range claims {
		if ownership.Owns(nc) {
			out = append(out, nc)
		}
	}
	return out
}
