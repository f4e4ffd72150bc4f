package tests

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/internal/otlpreceiver"
	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/events"
)

// TestRebalancingConsolidation runs rebalancing consolidation (opt-in,
// beyond Karpenter) through the whole loop: a Standard_D16as_v5 with
// memory-heavy and lean pods is re-packed onto a Standard_D8als_v6 and a
// Standard_D8as_v5 once the NodePool allows those cheaper types.
// Karpenter's own methods cannot: the pods need more memory than a
// D8als_v6 and more CPU than a D8as_v5, and they replace a node with one
// node. The two replacements are Initialized before the candidate is
// drained, so no pod waits longer than a launch; the kube-scheduler can
// place the evicted pods on them in the order it gets them, so none is
// stranded, nothing is launched for them, and the fleet then stays at
// rest.
func TestRebalancingConsolidation(t *testing.T) {
	otlp := otlpreceiver.Start()
	t.Cleanup(otlp.Close)
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "rebalance", BootDelay: time.Second, OTLPEndpoint: otlp.URL(),
		HostSettings: map[string]string{"KARPFUNC_REBALANCE_CONSOLIDATION": "true"}})
	ctx := context.Background()
	kube := env.Kube
	// Only D16as_v5 at first.
	patchPool(t, ctx, kube, "general", `{"spec":{"disruption":{"consolidateAfter":"10s","budgets":[{"nodes":"2"}]},"template":{"spec":{"requirements":[
		{"key":"karpenter.sh/capacity-type","operator":"In","values":["on-demand"]},
		{"key":"node.kubernetes.io/instance-type","operator":"In","values":["Standard_D16as_v5"]}]}}}}`)

	create := func(name string, replicas int32, cpu, memory string) {
		d := deployment(name, replicas, cpu, memory)
		d.Labels = map[string]string{"rebalance": "yes"}
		d.Spec.Template.Labels["rebalance"] = "yes"
		d.Spec.Template.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "general"}
		if err := kube.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	// Six lean pods (1 vCPU, 1Gi) and four rich ones (1 vCPU, 4Gi): 10
	// vCPU and 22Gi.
	create("lean", 6, "1", "1Gi")
	create("rich", 4, "1", "4Gi")
	running := func() (bool, string) {
		for app, n := range map[string]int{"lean": 6, "rich": 4} {
			if ok, why := allRunning(ctx, kube, app, n); !ok {
				return false, why
			}
		}
		return true, ""
	}
	eventually(t, 3*time.Minute, "all pods running", running)
	before := poolClaims(t, ctx, kube, "general")
	if len(before) != 1 {
		t.Fatalf("10 vCPU of pods on Standard_D16as_v5 took %d NodeClaims (%s); want 1", len(before), strings.Join(claimNames(before), ", "))
	}
	priceBefore := fleetPrice(env.Catalog, before)

	fleet := watchFleet(ctx, kube, "general")
	// The cheaper 8-vCPU types are allowed: no drift (the NodePool hash
	// leaves requirements out, and the node still meets them).
	patchPool(t, ctx, kube, "general", `{"spec":{"template":{"spec":{"requirements":[
		{"key":"karpenter.sh/capacity-type","operator":"In","values":["on-demand"]},
		{"key":"node.kubernetes.io/instance-type","operator":"In","values":["Standard_D16as_v5","Standard_D8as_v5","Standard_D8als_v6"]}]}}}}`)
	var after []karpv1.NodeClaim
	eventually(t, 3*time.Minute, "the node re-packed onto a D8als_v6 and a D8as_v5", func() (bool, string) {
		after = poolClaims(t, ctx, kube, "general")
		ok, why := running()
		var types []string
		for _, nc := range after {
			if slices.ContainsFunc(before, func(b karpv1.NodeClaim) bool { return b.Name == nc.Name }) || nc.DeletionTimestamp != nil {
				return false, fmt.Sprintf("%s still there; %s", nc.Name, why)
			}
			types = append(types, nc.Labels[corev1.LabelInstanceTypeStable])
		}
		slices.Sort(types)
		return ok && slices.Equal(types, []string{"Standard_D8als_v6", "Standard_D8as_v5"}), fmt.Sprintf("NodeClaims %s of types %v; %s", strings.Join(claimNames(after), ", "), types, why)
	})
	// Afterwards: no evicted pod was stranded (nothing launched for pods),
	// and the fleet comes to rest: no NodeClaim change for three
	// consolidateAfter periods, and no command awaiting its validation
	// (each validation clears its candidates' mark, whatever it decides).
	// A later pass may still replace a replacement with a cheaper node
	// when the kube-scheduler placed the pods other than the simulation
	// did, but only for less.
	rebalanced := fleetPrice(env.Catalog, after)
	settled, quietSince := claimNames(after), time.Now()
	eventually(t, 3*time.Minute, "the fleet at rest for 30s, no command awaiting validation", func() (bool, string) {
		claims := poolClaims(t, ctx, kube, "general")
		if now := claimNames(claims); !slices.Equal(now, settled) {
			settled, quietSince = now, time.Now()
		}
		var marked []string
		for _, nc := range claims {
			if at := nc.Annotations[apis.AnnotationDisruptionValidating]; at != "" {
				marked = append(marked, nc.Name+" (validation due "+at+")")
			}
		}
		return time.Since(quietSince) >= 3*10*time.Second && len(deletingClaims(t, ctx, kube, "general")) == 0 && len(marked) == 0,
			fmt.Sprintf("NodeClaims %s, unchanged for %s; awaiting validation: %v", strings.Join(settled, ", "), time.Since(quietSince).Round(time.Second), marked)
	})
	if ok, why := running(); !ok {
		t.Errorf("at rest, not all pods run: %s", why)
	}
	atRest := poolClaims(t, ctx, kube, "general")
	if price := fleetPrice(env.Catalog, atRest); price > rebalanced {
		t.Errorf("the fleet at rest (%s) costs $%.4f/h, more than the $%.4f/h after the rebalance", strings.Join(claimNames(atRest), ", "), price, rebalanced)
	}
	sampled := fleet.result()
	// Each command held the others back while it awaited validation.
	if !sampled.validating {
		t.Error("no sample saw a candidate marked " + apis.AnnotationDisruptionValidating + ": commands awaiting validation do not hold others back")
	}
	if len(sampled.provisioned) > 0 {
		t.Errorf("NodeClaims %s were launched for pending pods after the rebalance: an evicted pod was stranded", strings.Join(sampled.provisioned, ", "))
	}
	priceAfter := fleetPrice(env.Catalog, atRest)
	launches := launchTimes(append(append(slices.Clone(before), after...), atRest...))
	slowest := slices.Max(append(launches, 0))
	t.Logf("$%.4f/h -> $%.4f/h; %d samples, at most %d NodeClaims disrupting; %d pods bound meanwhile, longest pending %s (%s); slowest launch %s",
		priceBefore, priceAfter, sampled.samples, sampled.mostDisrupting, sampled.bound, sampled.longestPending.Round(time.Millisecond), sampled.longestPendingPod, slowest.Round(time.Second))
	if priceAfter >= priceBefore {
		t.Errorf("the fleet costs $%.4f/h after the rebalance, $%.4f/h before", priceAfter, priceBefore)
	}
	for _, over := range sampled.overBudget {
		t.Errorf("budget exceeded: %s", over)
	}
	if sampled.bound == 0 {
		t.Error("the fleet watch saw none of the evicted pods' replacements bound")
	}
	if sampled.longestPending > slowest {
		t.Errorf("pod %s stayed pending %s, longer than the slowest launch (%s): the candidates were drained before their replacements were up",
			sampled.longestPendingPod, sampled.longestPending.Round(time.Millisecond), slowest.Round(time.Second))
	}
	// Karpenter counts a replacement under its command's reason, not as
	// provisioning.
	if n := counter(otlp, "karpenter_nodeclaims_created_total", map[string]string{"reason": "underutilized"}); n < 2 {
		t.Errorf("karpenter_nodeclaims_created_total{reason=underutilized} = %v; want the rebalance's 2 replacements at least", n)
	}
	if n := counter(otlp, "karpenter_nodeclaims_created_total", map[string]string{"reason": "provisioning"}); n != 1 {
		t.Errorf("karpenter_nodeclaims_created_total{reason=provisioning} = %v; want 1, the first node", n)
	}
	if n := eventCount(t, ctx, kube, events.ReasonDisruptionLaunching, "Underutilized, rebalancing consolidation"); n < 1 {
		t.Errorf("%d DisruptionLaunching events name rebalancing consolidation; want one on the candidate", n)
	}
	if n := eventCount(t, ctx, kube, events.ReasonDisruptionTerminating, "Disrupting NodeClaim: Underutilized, rebalancing consolidation"); n < 1 {
		t.Errorf("%d DisruptionTerminating events name rebalancing consolidation; want one on the candidate", n)
	}
}
