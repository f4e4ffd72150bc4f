package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/repair"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// App settings of node repair.
const (
	// EnvNodeRepair replaces nodes that stay unhealthy ("true"/"false",
	// default true; package repair). Karpenter's NodeRepair feature gate.
	EnvNodeRepair = "KARPFUNC_NODE_REPAIR"
	// EnvNodeRepairReadyToleration replaces the 10 minutes Ready may stay
	// False or Unknown before a repair, a Go duration. For tests: Azure's
	// provider and Karpenter offer no such setting.
	EnvNodeRepairReadyToleration = "KARPFUNC_NODE_REPAIR_READY_TOLERATION"
)

// repairSettings reads EnvNodeRepair and EnvNodeRepairReadyToleration:
// nil policies when repair is off.
func (d *dependencies) repairSettings() ([]repair.Policy, error) {
	on, err := boolSetting(d.getenv, EnvNodeRepair, true)
	if err != nil || !on {
		return nil, err
	}
	tol, err := d.duration(EnvNodeRepairReadyToleration, repair.DefaultReadyToleration)
	if err != nil {
		return nil, err
	}
	return repair.Policies(tol), nil
}

// repairNode looks at node name for repair (nothing when repair is off).
func (d *dependencies) repairNode(ctx context.Context, c *call, name string) (triggers.Outcome, error) {
	if _, _, err := d.get(); err != nil {
		return triggers.Outcome{}, err
	}
	d.mu.Lock()
	rc := d.repairCtrl
	d.mu.Unlock()
	if rc == nil {
		return triggers.Outcome{}, nil
	}
	res, err := rc.Check(ctx, name)
	if err != nil {
		return res.Outcome, fmt.Errorf("repair of node %s: %w", name, err)
	}
	switch {
	case res.Skipped != "":
		c.log.Printf("node %s repair: %s", name, res.Skipped)
	case res.Decision.Action != repair.Healthy:
		c.log.Printf("node %s repair: %s (%s, due %s), nodeclaim %s nodepool %q, %d of %d unhealthy, replacements %v",
			name, res.Decision.Action, res.Decision.Unhealthy, res.Decision.Unhealthy.Due.UTC().Format(time.RFC3339), res.NodeClaim,
			res.NodePool, res.Decision.PoolUnhealthy, res.Decision.PoolNodes, res.Replacements)
	}
	return res.Outcome, nil
}

// repairCheck is a scheduled look at an unhealthy node.
func (d *dependencies) repairCheck(ctx context.Context, c *call) (triggers.Outcome, error) {
	data, err := messages.DecodeData[messages.Node](c.ev)
	if err != nil {
		return triggers.Outcome{}, err
	}
	return d.repairNode(ctx, c, data.Name)
}

// repairController is the repair controller, nil when repair is off.
func (d *dependencies) repairController(kube client.Client, cluster string, clk clock.Clock) (*repair.Controller, error) {
	policies, err := d.repairSettings()
	if err != nil || policies == nil {
		return nil, err
	}
	return repair.New(repair.Options{Kube: kube, Lifecycle: d.lifecycleController, Evacuator: d.provisioner, Policies: policies,
		ClusterName: cluster, Clock: clk, Logger: d.log}), nil
}
