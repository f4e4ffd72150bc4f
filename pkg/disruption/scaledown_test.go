package disruption

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// planPrice is what a fresh plan for pods (all pending, empty cluster)
// costs at its cheapest offerings, and the plan.
func planPrice(f *fixture, pods []*corev1.Pod) (float64, scheduler.Result) {
	fresh := &snapshot.Cluster{NodePools: f.c.NodePools, NodeClasses: f.c.NodeClasses}
	for _, p := range pods {
		cp := *p
		cp.Spec.NodeName = ""
		fresh.Pods = append(fresh.Pods, &cp)
	}
	res := scheduler.Solve(fresh.Input(f.cat, snapshot.Offline))
	var price float64
	for _, nc := range res.NewNodeClaims {
		_, off := nc.Cheapest()
		price += off.Price
	}
	return price, res
}

// provision gives f the fleet res plans: one Ready node per planned
// NodeClaim, created at created, with each planned pod (one of pods) bound
// to its node.
func provision(f *fixture, pods []*corev1.Pod, res scheduler.Result, created time.Time) {
	byName := make(map[string]*corev1.Pod, len(pods))
	for _, p := range pods {
		byName[p.Name] = p
	}
	for i, plan := range res.NewNodeClaims {
		nc, node := fakeNode(fmt.Sprintf("n%03d", i), plan, created)
		f.c.NodeClaims = append(f.c.NodeClaims, nc)
		f.c.Nodes = append(f.c.Nodes, node)
		for _, p := range plan.Pods {
			byName[p.Name].Spec.NodeName = node.Name
		}
	}
}

// TestScaleDownConverges: a fleet provisioned for 400 generic pods loses
// 80% of them; replaying disruption (default 10% budgets, one command at a
// time) brings its price within 10% of a fresh plan for the pods left.
func TestScaleDownConverges(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	f := newFixture(t)
	f.np.Spec.Disruption.Budgets = nil
	// As the example NodePool: at most 32 vCPUs, so the fleet has many nodes.
	f.np.Spec.Template.Spec.Requirements = append(f.np.Spec.Template.Spec.Requirements,
		karpv1.NodeSelectorRequirementWithMinValues{Key: "karpenter.azure.com/sku-cpu", Operator: corev1.NodeSelectorOpLt, Values: []string{"33"}})
	var pods []*corev1.Pod
	for i := 0; i < 400; i++ {
		cpu := fmt.Sprintf("%dm", 100+rng.Intn(1900))
		mem := fmt.Sprintf("%dMi", 128+rng.Intn(4000))
		pods = append(pods, f.pod(fmt.Sprintf("p%03d", i), "", cpu, mem))
	}
	full, res := planPrice(f, pods)
	if len(res.Unschedulable) > 0 {
		t.Fatalf("unschedulable: %s", res.Unschedulable[0].Reason)
	}
	provision(f, pods, res, now.Add(-2*time.Hour))
	// Scale down by 80%.
	var kept []*corev1.Pod
	for i, p := range f.c.Pods {
		if i%5 == 0 {
			kept = append(kept, p)
		}
	}
	f.c.Pods = kept
	moves, before, last := Replay(State{Cluster: f.c, Catalog: f.cat, Now: now}, 1000)
	after := before
	if len(moves) > 0 {
		after = moves[len(moves)-1].FleetPriceAfter
	}
	want, _ := planPrice(f, kept)
	for _, m := range moves {
		t.Logf("move: %s %s of %d nodes (%d replacements) -> $%.3f/h", m.Command.Method, m.Command.Action(), len(m.Command.Candidates), len(m.Command.Replacements), m.FleetPriceAfter)
	}
	t.Logf("%d nodes at $%.3f/h for 400 pods; after the scale-down to %d pods: %d moves take the fleet from $%.3f/h to $%.3f/h; a fresh plan costs $%.3f/h (%.1f%%); %d nodes left alone",
		len(res.NewNodeClaims), full, len(kept), len(moves), before, after, want, 100*(after/want-1), len(last.Refusals))
	if last.Command != nil {
		t.Errorf("the fleet does not come to rest: %s", last.Command)
	}
	prev := before
	for _, m := range moves {
		if m.FleetPriceAfter >= prev {
			t.Errorf("move %s does not lower the fleet price ($%.3f/h -> $%.3f/h)", m.Command, prev, m.FleetPriceAfter)
		}
		prev = m.FleetPriceAfter
	}
	if after > want*1.10 {
		for _, r := range last.Refusals {
			t.Logf("left alone: %s: %s", r.NodeClaim, r.Reason)
		}
		t.Errorf("fleet after consolidation $%.3f/h is more than 10%% above the plan's $%.3f/h", after, want)
	}
}
