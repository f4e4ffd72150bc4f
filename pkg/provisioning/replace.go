package provisioning

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/capacitybuffer"
	"github.com/karpfunc/karpfunc/pkg/claimnames"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// Replace creates the NodeClaim a disruption command's plan asks for (the
// command's replacement, launched before its candidates go), with
// annotations that tie it to the command, and returns the launch check,
// due now, that has lifecycle launch it (for the caller to send). The
// plan's instance types are the ones the disruption engine found cheaper;
// the NodePool's limits apply as to any NodeClaim.
//
// It is not idempotent on its own (a second call makes a second claim):
// the caller finds an earlier replacement by its annotations first.
func (p *Provisioner) Replace(ctx context.Context, plan *scheduler.NodeClaimPlan, annotations map[string]string) (*karpv1.NodeClaim, triggers.Continuation, error) {
	view, err := p.names.Read(ctx) // before the list, as in Provision
	if err != nil {
		return nil, triggers.Continuation{}, err
	}
	var list karpv1.NodeClaimList
	if err := p.kube.List(ctx, &list); err != nil {
		return nil, triggers.Continuation{}, fmt.Errorf("listing NodeClaims: %w", err)
	}
	held := make(map[string]bool, len(list.Items))
	for _, nc := range list.Items {
		held[nc.Name] = true
	}
	nc, created, err := p.create(ctx, plan, func(name string) bool { return held[name] }, view, annotations)
	if err != nil {
		return nil, triggers.Continuation{}, err
	}
	if created {
		var unwritten events.Unwritten
		p.nominate(ctx, nc, capacitybuffer.RealPods(plan.Pods), &unwritten)
		if len(unwritten) > 0 {
			p.log.Info("events not written", "nodeclaim", nc.Name, "count", unwritten.Total(), "byReason", unwritten.String())
		}
	}
	if generation, ok := claimnames.GenerationOf(nc); ok && created {
		// Not fatal: termination retires it before the name is free.
		if err := p.names.Retire(ctx, generation); err != nil {
			p.log.Warn("retiring the replacement's name generation", "nodeclaim", nc.Name, "error", err)
		}
	}
	patch := client.MergeFrom(nc.DeepCopy())
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	for key, value := range annotations {
		nc.Annotations[key] = value
	}
	// A new replacement's first check is the one any pass would ask for;
	// an adopted claim's launch is looked at now (a duplicate of a check
	// already due leaves the work to it).
	check := triggers.LaunchCheck(p.clusterName, nc.Name, string(nc.UID), p.clock.Now())
	if created {
		check = triggers.FirstLaunchCheck(p.clusterName, nc.Name, string(nc.UID), p.clock.Now())
	}
	if err := p.kube.Patch(ctx, nc, patch); err != nil {
		return nc, check, fmt.Errorf("annotating replacement NodeClaim %s: %w", nc.Name, err)
	}
	recordCreated(ctx, nc, nil, p.clock.Now())
	return nc, check, nil
}
