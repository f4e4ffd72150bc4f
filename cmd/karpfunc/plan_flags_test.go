package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/plan"
	"github.com/karpfunc/karpfunc/pkg/plan/plantest"
)

func TestPlanRebalanceNeedsDisruption(t *testing.T) {
	err := runPlanTo(io.Discard, []string{"-f", "-", "--rebalance"})
	if err == nil || !strings.Contains(err.Error(), "--rebalance applies to --disruption only") {
		t.Fatalf("err = %v, want --rebalance refused without --disruption", err)
	}
}

// skewedDump is two Standard_D8as_v5 nodes whose pods (1 CPU with 1Gi or
// 4Gi) would be cheaper on a D8als_v6 and a D8as_v5: no Karpenter method
// can take them, rebalancing can.
func skewedDump() string {
	dump := plantest.NodePool("{key: kubernetes.io/arch, operator: In, values: [amd64]}")
	for _, n := range []struct {
		name       string
		lean, rich int
	}{{"a", 4, 3}, {"b", 3, 2}} {
		var pods []plantest.Pod
		for range n.lean {
			pods = append(pods, plantest.Pod{CPU: "1", Memory: "1Gi"})
		}
		for range n.rich {
			pods = append(pods, plantest.Pod{CPU: "1", Memory: "4Gi"})
		}
		dump += plantest.Node(n.name, "26382591590", pods...)
	}
	return dump
}

// TestPlanRebalance: `plan --disruption` leaves the skewed pair alone;
// with --rebalance it shows one rebalancing move onto two cheaper nodes.
func TestPlanRebalance(t *testing.T) {
	file := filepath.Join(t.TempDir(), "dump.yaml")
	if err := os.WriteFile(file, []byte(skewedDump()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flags []string
		moves int
	}{
		{nil, 0},
		{[]string{"--rebalance"}, 1},
	} {
		var out bytes.Buffer
		if err := runPlanTo(&out, append([]string{"-f", file, "--region", "eastus", "--disruption", "-o", "json"}, tc.flags...)); err != nil {
			t.Fatal(err)
		}
		var got plan.DisruptionOutput
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		if len(got.Moves) != tc.moves {
			t.Fatalf("%v: moves %+v, want %d", tc.flags, got.Moves, tc.moves)
		}
		if tc.moves == 0 {
			continue
		}
		m := got.Moves[0]
		if m.Method != "rebalancing consolidation" || m.Action != "replace" || len(m.Replacements) != 2 || m.SavingsPerHour <= 0 ||
			got.FleetPriceAfterPerHour >= got.FleetPricePerHour {
			t.Errorf("move %+v (fleet $%.4f/h -> $%.4f/h), want a rebalancing replace onto two nodes that saves", m, got.FleetPricePerHour, got.FleetPriceAfterPerHour)
		}
	}
}
