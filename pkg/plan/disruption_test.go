package plan_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/plan"
	"github.com/karpfunc/karpfunc/pkg/plan/plantest"
)

// disruptionNode is a D8as_v5 with pods of 700m and 2Gi each.
func disruptionNode(name string, pods int, doNotDisrupt bool) string {
	ps := make([]plantest.Pod, pods)
	for i := range ps {
		ps[i] = plantest.Pod{CPU: "700m", Memory: "2Gi", DoNotDisrupt: doNotDisrupt}
	}
	return plantest.Node(name, "27Gi", ps...)
}

func TestDisruptionView(t *testing.T) {
	c, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	o := &plan.Objects{}
	dump := plantest.NodePool() + disruptionNode("a", 2, false) + disruptionNode("b", 2, false) + disruptionNode("c", 0, false) + disruptionNode("keep", 1, true)
	if err := o.Read("dump.yaml", strings.NewReader(dump)); err != nil {
		t.Fatal(err)
	}
	moves, before, last := disruption.Replay(disruption.State{Cluster: &o.Cluster, Catalog: c, Now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}, 10)
	out := plan.NewDisruptionOutput(moves, before, last)
	if len(out.Moves) == 0 || out.Moves[0].Method != "emptiness" || strings.Join(out.Moves[0].NodeClaims, ",") != "c" {
		t.Fatalf("moves %+v, want emptiness of c first", out.Moves)
	}
	if out.FleetPriceAfterPerHour >= out.FleetPricePerHour {
		t.Errorf("fleet $%.4f/h after, not below $%.4f/h", out.FleetPriceAfterPerHour, out.FleetPricePerHour)
	}
	var keep *plan.UntouchedNode
	for i := range out.Untouched {
		if out.Untouched[i].NodeClaim == "keep" {
			keep = &out.Untouched[i]
		}
	}
	if keep == nil || !keep.Blocked || !strings.Contains(keep.Reason, "do-not-disrupt") {
		t.Errorf("keep: %+v, want blocked by do-not-disrupt", keep)
	}
	var table bytes.Buffer
	if err := out.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"emptiness", "DisruptionBlocked", "fleet $"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	t.Log("\n" + table.String())
}
