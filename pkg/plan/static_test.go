package plan_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/plan"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

const staticObjects = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: fixed}
spec:
  replicas: 3
  limits: {nodes: "%s"}
  template:
    spec:
      nodeClassRef: {group: karpenter.azure.com, kind: AKSNodeClass, name: default}
      requirements:
      - {key: karpenter.azure.com/sku-family, operator: In, values: [D]}
      - {key: karpenter.azure.com/sku-cpu, operator: Lt, values: ["5"]}
---
{"apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass", "metadata": {"name": "default"}}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
status:
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
`

// A static pool with no claims: plan shows the claims it would create, and
// the pending pod lands on one of them (static pools open no claim for
// pods, but their nodes take pods); limits.nodes caps the creation.
func TestPlanStatic(t *testing.T) {
	cat, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		limit   string
		create  int
		waiting bool
	}{{"10", 3, false}, {"2", 2, true}} {
		var objs plan.Objects
		if err := objs.Read("static.yaml", strings.NewReader(strings.Replace(staticObjects, "%s", tc.limit, 1))); err != nil {
			t.Fatal(err)
		}
		static := plan.KeepStatic(&objs.Cluster, cat, nil, time.Now())
		out := plan.NewOutput(scheduler.Solve(objs.Input(cat)), 0).WithStatic(static)
		if len(out.StaticNodePools) != 1 || len(out.StaticNodePools[0].Create) != tc.create || (out.StaticNodePools[0].Waiting != "") != tc.waiting {
			t.Fatalf("limit %s: static pools %+v, want one creating %d (waiting %v)", tc.limit, out.StaticNodePools, tc.create, tc.waiting)
		}
		if c := out.StaticNodePools[0].Create[0]; c.InstanceType == "" || c.PricePerHour <= 0 {
			t.Errorf("static claim not priced: %+v", c)
		}
		if len(out.NodeClaims) != 0 || len(out.ExistingNodes) != 1 || !strings.HasPrefix(out.ExistingNodes[0].NodeClaim, "static-fixed-") {
			t.Errorf("the pending pod should go to a static claim, not a new one: new %+v, existing %+v, unschedulable %+v",
				out.NodeClaims, out.ExistingNodes, out.Unschedulable)
		}
		var table, js bytes.Buffer
		if err := out.WriteTable(&table); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(table.String(), "STATIC NODEPOOL") || !strings.Contains(table.String(), "fixed") {
			t.Errorf("table has no static row:\n%s", table.String())
		}
		if err := out.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
		var back plan.Output
		if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.StaticNodePools) != 1 || back.StaticNodePools[0].Replicas != 3 {
			t.Errorf("JSON static pools = %+v (%v)", back.StaticNodePools, err)
		}
	}
}

// Without its static claims, a static pool opens none for a pending pod:
// the pod is unschedulable, and the reason names the pool as static.
func TestStaticPoolOpensNoClaimForPods(t *testing.T) {
	cat, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	var objs plan.Objects
	if err := objs.Read("static.yaml", strings.NewReader(strings.Replace(staticObjects, "%s", "10", 1))); err != nil {
		t.Fatal(err)
	}
	res := scheduler.Solve(objs.Input(cat))
	if len(res.NewNodeClaims) != 0 || len(res.Unschedulable) != 1 || !strings.Contains(res.Unschedulable[0].Reason, "static") {
		t.Fatalf("new %d, unschedulable %+v; want none new and the pod unschedulable because the pool is static", len(res.NewNodeClaims), res.Unschedulable)
	}
}
