package disruption

import (
	"fmt"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// After a scale-down leaves 12 nodes a fifth used, replaying the decisions
// shrinks the fleet to within 10% of what a fresh plan for the remaining
// pods costs, and every pod still has a node.
func TestReplayShrinksToPlanPrice(t *testing.T) {
	f := newFixture(t)
	f.np.Spec.Disruption.Budgets = nil // default 10%
	for i := 0; i < 12; i++ {
		n := fmt.Sprintf("n%02d", i)
		f.node(n, "Standard_D8as_v5", "on-demand")
		f.pods(n, n, 2, "700m", "2800Mi")
	}
	moves, before, last := Replay(State{Cluster: f.c, Catalog: f.cat, Now: now}, 50)
	if len(moves) == 0 {
		t.Fatalf("no moves; refusals %+v", last.Refusals)
	}
	if last.Command != nil {
		t.Errorf("still a command after 50 moves: %s", last.Command)
	}
	after := moves[len(moves)-1].FleetPriceAfter
	for _, m := range moves {
		t.Logf("%s -> fleet $%.3f/h", m.Command, m.FleetPriceAfter)
		if m.Command.Savings <= 0 {
			t.Errorf("move %s saves nothing", m.Command)
		}
	}
	// A fresh plan for the same pods, all pending, on an empty cluster.
	fresh := &snapshot.Cluster{NodePools: f.c.NodePools, NodeClasses: f.c.NodeClasses}
	for _, p := range f.c.Pods {
		cp := *p
		cp.Spec.NodeName = ""
		fresh.Pods = append(fresh.Pods, &cp)
	}
	res := scheduler.Solve(fresh.Input(f.cat, snapshot.Offline))
	var planned float64
	for _, nc := range res.NewNodeClaims {
		_, off := nc.Cheapest()
		planned += off.Price
	}
	t.Logf("fleet $%.3f/h before, $%.3f/h after %d moves; a fresh plan costs $%.3f/h", before, after, len(moves), planned)
	if after >= before || after > planned*1.10 {
		t.Errorf("fleet after replay $%.3f/h, want below $%.3f/h and within 10%% of the plan's $%.3f/h", after, before, planned)
	}
}
