package plan_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/plan"
)

const disruptionPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.azure.com, kind: AKSNodeClass, name: default}
      requirements:
      - {key: karpenter.azure.com/sku-family, operator: In, values: [D]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
    budgets: [{nodes: "100%"}]
---
apiVersion: karpenter.azure.com/v1beta1
kind: AKSNodeClass
metadata: {name: default}
spec: {imageFamily: Ubuntu2204}
`

func disruptionNode(name string, pods int, doNotDisrupt bool) string {
	labels := fmt.Sprintf(`{karpenter.sh/nodepool: general, node.kubernetes.io/instance-type: Standard_D8as_v5, topology.kubernetes.io/zone: eastus-1, karpenter.sh/capacity-type: on-demand, kubernetes.io/hostname: %s, kubernetes.io/arch: amd64, kubernetes.io/os: linux}`, name)
	var b strings.Builder
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
  allocatable: {cpu: 7820m, memory: 27Gi, pods: "110"}
  conditions: [{type: Ready, status: "True"}]
`, name, labels)
	for i := 0; i < pods; i++ {
		ann := ""
		if doNotDisrupt {
			ann = `, annotations: {karpenter.sh/do-not-disrupt: "true"}`
		}
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata: {name: %s-%d, namespace: default%s}
spec:
  nodeName: %s
  containers: [{name: c, image: x, resources: {requests: {cpu: 700m, memory: 2Gi}}}]
status: {phase: Running}
`, name, i, ann, name)
	}
	return b.String()
}

func TestDisruptionView(t *testing.T) {
	c, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	o := &plan.Objects{}
	dump := disruptionPool + disruptionNode("a", 2, false) + disruptionNode("b", 2, false) + disruptionNode("c", 0, false) + disruptionNode("keep", 1, true)
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
