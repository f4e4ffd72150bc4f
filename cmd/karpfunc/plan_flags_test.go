package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/plan"
)

func TestPlanRebalanceNeedsDisruption(t *testing.T) {
	err := runPlanTo(io.Discard, []string{"-f", "-", "--rebalance"})
	if err == nil || !strings.Contains(err.Error(), "--rebalance applies to --disruption only") {
		t.Fatalf("err = %v, want --rebalance refused without --disruption", err)
	}
}

// skewedDump is two CPU-full Standard_D8as_v5 nodes whose pods would be
// cheaper on a D8als_v6 (the 1-CPU, 1Gi pods) and a D8as_v5 (the 2-CPU,
// 7Gi ones): no Karpenter method can take them, rebalancing can.
func skewedDump() string {
	var b strings.Builder
	b.WriteString(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.azure.com, kind: AKSNodeClass, name: default}
      requirements:
      - {key: karpenter.azure.com/sku-family, operator: In, values: [D]}
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 1m, budgets: [{nodes: "100%"}]}
---
apiVersion: karpenter.azure.com/v1beta1
kind: AKSNodeClass
metadata: {name: default}
spec: {imageFamily: Ubuntu2204}
`)
	for _, n := range []struct {
		name       string
		lean, rich int
	}{{"a", 4, 1}, {"b", 3, 2}} {
		labels := fmt.Sprintf(`{karpenter.sh/nodepool: general, node.kubernetes.io/instance-type: Standard_D8as_v5, topology.kubernetes.io/zone: eastus-1, karpenter.sh/capacity-type: on-demand, kubernetes.io/hostname: %s, kubernetes.io/arch: amd64, kubernetes.io/os: linux}`, n.name)
		fmt.Fprintf(&b, `---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: %[1]s, labels: %[2]s, creationTimestamp: "2026-11-01T00:00:00Z"}
spec: {nodeClassRef: {group: karpenter.azure.com, kind: AKSNodeClass, name: default}, requirements: []}
status:
  nodeName: %[1]s
  providerID: azure:///%[1]s
  conditions: [{type: Initialized, status: "True", reason: Initialized, lastTransitionTime: "2026-11-01T00:10:00Z"}]
---
apiVersion: v1
kind: Node
metadata: {name: %[1]s, labels: %[2]s}
spec: {providerID: azure:///%[1]s}
status:
  allocatable: {cpu: 7820m, memory: "26382591590", pods: "110"}
  conditions: [{type: Ready, status: "True"}]
`, n.name, labels)
		for i := range n.lean + n.rich {
			cpu, mem := "1", "1Gi"
			if i >= n.lean {
				cpu, mem = "2", "7Gi"
			}
			fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata: {name: %s-%d, namespace: default}
spec:
  nodeName: %s
  containers: [{name: c, image: x, resources: {requests: {cpu: "%s", memory: %s}}}]
status: {phase: Running}
`, n.name, i, n.name, cpu, mem)
		}
	}
	return b.String()
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
