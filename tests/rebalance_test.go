package tests

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/pkg/events"
)

// TestRebalancingConsolidation runs rebalancing consolidation (opt-in,
// beyond Karpenter) through the whole loop: two Standard_D8as_v5 nodes,
// each with memory-heavy and lean pods, are re-packed onto a
// Standard_D8als_v6 and a Standard_D8as_v5 once the NodePool allows the
// cheaper low-memory type. Karpenter's own methods cannot: each node holds
// more memory than a D8als_v6 and both together more CPU than one node.
// The two replacements are Initialized before the candidates are drained,
// so no pod waits longer than a launch; the kube-scheduler can place the
// evicted pods on them in any order, so none is stranded, nothing is
// launched for them, and the fleet then stays at rest.
func TestRebalancingConsolidation(t *testing.T) {
	env := startEnv(t, localenv.Options{ClusterName: "rebalance", BootDelay: time.Second,
		HostSettings: map[string]string{"KARPFUNC_REBALANCE_CONSOLIDATION": "true"}})
	ctx := context.Background()
	kube := env.Kube
	if _, err := env.ApplyFile(ctx, filepath.Join(env.Options.RepoRoot, "examples", "nodepool.yaml")); err != nil {
		t.Fatal(err)
	}
	// Only D8as_v5 at first; both nodes may be disrupted at once.
	patchPool(t, ctx, kube, "general", `{"spec":{"disruption":{"consolidateAfter":"10s","budgets":[{"nodes":"2"}]},"template":{"spec":{"requirements":[
		{"key":"karpenter.sh/capacity-type","operator":"In","values":["on-demand"]},
		{"key":"node.kubernetes.io/instance-type","operator":"In","values":["Standard_D8as_v5"]}]}}}}`)

	create := func(name string, replicas int32, cpu, memory string) {
		d := deployment(name, replicas, cpu, memory)
		d.Labels = map[string]string{"rebalance": "yes"}
		d.Spec.Template.Labels["rebalance"] = "yes"
		d.Spec.Template.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "general"}
		if err := kube.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	// The first node: one rich pod (1 vCPU, 7Gi), four lean ones (1 vCPU,
	// 1Gi) and a filler that leaves no room for the second node's pods;
	// the filler goes once both nodes run.
	create("rich-1", 1, "1", "7Gi")
	create("lean-1", 4, "1", "1Gi")
	create("filler", 1, "2500m", "1Gi")
	eventually(t, 3*time.Minute, "the first node's pods running", func() (bool, string) {
		for app, n := range map[string]int{"rich-1": 1, "lean-1": 4, "filler": 1} {
			if ok, why := allRunning(ctx, kube, app, n); !ok {
				return false, why
			}
		}
		return true, ""
	})
	if first := poolClaims(t, ctx, kube, "general"); len(first) != 1 {
		t.Fatalf("7.5 vCPU of pods on Standard_D8as_v5 took %d NodeClaims (%s); want 1", len(first), strings.Join(claimNames(first), ", "))
	}
	create("rich-2", 2, "1", "7Gi")
	create("lean-2", 3, "1", "1Gi")
	running := func() (bool, string) {
		for app, n := range map[string]int{"rich-1": 1, "lean-1": 4, "rich-2": 2, "lean-2": 3} {
			if ok, why := allRunning(ctx, kube, app, n); !ok {
				return false, why
			}
		}
		return true, ""
	}
	eventually(t, 3*time.Minute, "all pods running", running)
	if err := kube.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "filler"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the filler gone", func() (bool, string) {
		pods, err := podsWithLabel(ctx, kube, "app", "filler")
		if err != nil {
			return false, err.Error()
		}
		return len(pods) == 0, fmt.Sprintf("%d filler pods", len(pods))
	})
	before := poolClaims(t, ctx, kube, "general")
	if len(before) != 2 {
		t.Fatalf("10 vCPU of pods on Standard_D8as_v5 took %d NodeClaims (%s); want 2", len(before), strings.Join(claimNames(before), ", "))
	}
	priceBefore := fleetPrice(env.Catalog, before)

	fleet := watchFleet(ctx, kube, "general")
	// The cheaper low-memory type is allowed: no drift (the NodePool hash
	// leaves requirements out, and the nodes still meet them).
	patchPool(t, ctx, kube, "general", `{"spec":{"template":{"spec":{"requirements":[
		{"key":"karpenter.sh/capacity-type","operator":"In","values":["on-demand"]},
		{"key":"node.kubernetes.io/instance-type","operator":"In","values":["Standard_D8as_v5","Standard_D8als_v6"]}]}}}}`)
	var after []karpv1.NodeClaim
	eventually(t, 3*time.Minute, "the pair re-packed onto a D8als_v6 and a D8as_v5", func() (bool, string) {
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
	// At rest afterwards: no evicted pod was stranded and re-provisioned,
	// and no later pass merges the replacements again.
	settled := claimNames(after)
	time.Sleep(3 * 10 * time.Second) // three consolidateAfter periods
	if now := claimNames(poolClaims(t, ctx, kube, "general")); !slices.Equal(now, settled) {
		t.Errorf("the fleet churned after the rebalance: NodeClaims %s, then %s", strings.Join(settled, ", "), strings.Join(now, ", "))
	}
	sampled := fleet.result()
	if evicted := 10; sampled.bound > evicted {
		t.Errorf("%d pods bound during the watch, more than the %d evicted ones: pods were evicted again", sampled.bound, evicted)
	}
	priceAfter := fleetPrice(env.Catalog, after)
	launches := launchTimes(append(slices.Clone(before), after...))
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
	if n := eventCount(t, ctx, kube, events.ReasonDisruptionLaunching, "Underutilized, rebalancing consolidation"); n < 2 {
		t.Errorf("%d DisruptionLaunching events name rebalancing consolidation; want one per candidate (2)", n)
	}
	if n := eventCount(t, ctx, kube, events.ReasonDisruptionTerminating, "Disrupting NodeClaim: Underutilized, rebalancing consolidation"); n < 2 {
		t.Errorf("%d DisruptionTerminating events name rebalancing consolidation; want one per candidate (2)", n)
	}
}
