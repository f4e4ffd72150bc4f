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

// A static NodePool whose requirements no longer allow its nodes (amd64
// nodes, the pool now arm64): the replay replaces them one for one with
// pod-less NodeClaims of the pool, as many at once as its budget allows,
// and then leaves the pool alone.
func TestDisruptionViewStaticDrift(t *testing.T) {
	c, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	pool := strings.Replace(plantest.NodePool("{key: kubernetes.io/arch, operator: In, values: [arm64]}"), "spec:\n  template:", "spec:\n  replicas: 2\n  template:", 1)
	o := &plan.Objects{}
	if err := o.Read("dump.yaml", strings.NewReader(pool+disruptionNode("a", 1, false)+disruptionNode("b", 0, false))); err != nil {
		t.Fatal(err)
	}
	moves, before, last := disruption.Replay(disruption.State{Cluster: &o.Cluster, Catalog: c, Now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}, 10)
	out := plan.NewDisruptionOutput(moves, before, last)
	if len(out.Moves) != 1 {
		t.Fatalf("moves %+v, want one static drift of a and b", out.Moves)
	}
	move := out.Moves[0]
	if move.Method != disruption.MethodStaticDrift || move.Action != "replace" || move.Reason != "Drifted" || strings.Join(move.NodeClaims, ",") != "b,a" {
		t.Errorf("move %s %s (%s) of %v, want static drift replace (Drifted) of b,a (cheapest to disrupt first)", move.Method, move.Action, move.Reason, move.NodeClaims)
	}
	if len(move.Replacements) != 2 {
		t.Fatalf("%d replacements, want one for each drifted node", len(move.Replacements))
	}
	for _, r := range move.Replacements {
		if r.NodePool != "general" || len(r.Pods) != 0 || !strings.Contains(r.InstanceType, "p") {
			t.Errorf("replacement %+v, want a pod-less arm64 NodeClaim of general", r)
		}
	}
	var table bytes.Buffer
	if err := out.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "static drift") {
		t.Errorf("table lacks the static drift move:\n%s", table.String())
	}
	t.Log("\n" + table.String())
}
