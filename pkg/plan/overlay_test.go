package plan_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/nodeoverlay"
	"github.com/karpfunc/karpfunc/pkg/plan"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// overlayObjects: a pool of two sizes, a pending one-vCPU pod (the small
// size is the cheaper at catalog prices), an overlay that prices the
// large size below it, and one of the same weight that conflicts.
const overlayObjects = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.azure.com, kind: AKSNodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: node.kubernetes.io/instance-type, operator: In, values: [Standard_D2s_v5, Standard_D4s_v5]}
---
{"apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass", "metadata": {"name": "default"}}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: large-reserved}
spec:
  requirements:
  - {key: node.kubernetes.io/instance-type, operator: In, values: [Standard_D4s_v5]}
  price: "0.001"
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: large-other}
spec:
  requirements:
  - {key: node.kubernetes.io/instance-type, operator: In, values: [Standard_D4s_v5]}
  priceAdjustment: "+5%"
`

// The plan reads NodeOverlays from its input, launches the size they
// make cheapest, and shows the overlays and overlaid prices in its table
// and JSON; without them it launches the catalog's cheapest.
func TestPlanOverlay(t *testing.T) {
	cat, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, input, want string
		overlaid          bool
	}{
		{"with overlays", overlayObjects, "Standard_D4s_v5", true},
		{"without", overlayObjects[:strings.Index(overlayObjects, "---\napiVersion: karpenter.sh/v1alpha1")], "Standard_D2s_v5", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs plan.Objects
			if err := objs.Read("overlay.yaml", strings.NewReader(tc.input)); err != nil {
				t.Fatal(err)
			}
			res := objs.Overlays(cat)
			out := plan.NewOutput(scheduler.Solve(objs.OverlaidInput(cat, res)), 0).WithOverlays(res, cat)
			if len(out.NodeClaims) != 1 || out.NodeClaims[0].InstanceType != tc.want {
				t.Fatalf("new NodeClaims %+v, want one %s", out.NodeClaims, tc.want)
			}
			nc := out.NodeClaims[0]
			if !tc.overlaid {
				if nc.CatalogPricePerHour != nil || len(out.NodeOverlays) != 0 {
					t.Fatalf("no overlay, but the output shows %+v, %+v", nc, out.NodeOverlays)
				}
				return
			}
			if nc.PricePerHour != 0.001 || nc.CatalogPricePerHour == nil || *nc.CatalogPricePerHour <= 0.001 || nc.Overlay != "large-reserved" {
				t.Errorf("NodeClaim %+v: want $0.001 from large-reserved beside the catalog price", nc)
			}
			if len(out.NodeOverlays) != 2 || !out.NodeOverlays[0].Applied || out.NodeOverlays[0].Name != "large-reserved" ||
				out.NodeOverlays[1].Applied || out.NodeOverlays[1].Reason != nodeoverlay.ReasonConflict {
				t.Errorf("overlays %+v: want large-reserved applied, large-other refused as a Conflict", out.NodeOverlays)
			}
			if len(out.OverlaidPrices) == 0 {
				t.Errorf("no overlaid prices")
			}
			for _, p := range out.OverlaidPrices {
				if p.InstanceType != "Standard_D4s_v5" || p.PricePerHour != 0.001 || p.Overlay != "large-reserved" {
					t.Errorf("overlaid price %+v", p)
				}
			}
			var table, js bytes.Buffer
			if err := out.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"NODEOVERLAY", "large-reserved", "Conflict", "OVERLAID NODECLAIM"} {
				if !strings.Contains(table.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, table.String())
				}
			}
			if err := out.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			var back plan.Output
			if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.NodeOverlays) != 2 || len(back.OverlaidPrices) != len(out.OverlaidPrices) {
				t.Errorf("JSON round trip: %v, %+v", err, back.NodeOverlays)
			}
		})
	}
}
