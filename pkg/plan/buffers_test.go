package plan_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/pkg/capacitybuffer"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/plan"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

const bufferObjects = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.azure.com, kind: AKSNodeClass, name: default}
      requirements:
      - {key: karpenter.azure.com/sku-family, operator: In, values: [D]}
---
{"apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass", "metadata": {"name": "default"}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 10
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: web, namespace: default}
spec:
  scalableRef: {apiGroup: apps, kind: Deployment, name: web}
  percentage: 30
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: lost, namespace: default}
spec:
  podTemplateRef: {name: nowhere}
  replicas: 1
`

// TestPlanBuffers: the plan keeps 30% of a 10-replica Deployment's room (3
// chunks) on new NodeClaims, says why a buffer without its PodTemplate
// keeps none, and counts no virtual pod as pending.
func TestPlanBuffers(t *testing.T) {
	var objs plan.Objects
	if err := objs.Read("buffers.yaml", strings.NewReader(bufferObjects)); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	bufs := objs.Buffers()
	in := objs.Input(cat)
	in.Pods = append(in.Pods, capacitybuffer.AllVirtualPods(bufs)...)
	res := scheduler.Solve(in)
	out := plan.NewOutput(res, time.Second).WithBuffers(bufs, res)
	if len(out.CapacityBuffers) != 2 {
		t.Fatalf("capacityBuffers %+v", out.CapacityBuffers)
	}
	lost, web := out.CapacityBuffers[0], out.CapacityBuffers[1]
	if web.Name != "default/web" || !web.Ready || web.Replicas != 3 || web.New != 3 || web.Existing != 0 || web.Failed != 0 {
		t.Errorf("web buffer %+v", web)
	}
	if lost.Name != "default/lost" || lost.Ready || lost.Reason != capacitybuffer.ReasonPodTemplateNotFound || lost.Replicas != 0 {
		t.Errorf("lost buffer %+v", lost)
	}
	if len(out.NodeClaims) == 0 || out.TotalPricePerHour <= 0 {
		t.Errorf("no priced NodeClaim for the buffer's room: %+v", out.NodeClaims)
	}
	if n := out.Pods["new"] + out.Pods["unschedulable"]; n != 0 {
		t.Errorf("virtual pods counted as pending: %v", out.Pods)
	}
	var js bytes.Buffer
	if err := out.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var decoded struct {
		CapacityBuffers []plan.CapacityBuffer `json:"capacityBuffers"`
	}
	if err := json.Unmarshal(js.Bytes(), &decoded); err != nil || len(decoded.CapacityBuffers) != 2 {
		t.Fatalf("JSON capacityBuffers: %v %s", err, js.String())
	}
	var table bytes.Buffer
	if err := out.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "CAPACITY BUFFER") || !strings.Contains(table.String(), "default/web") {
		t.Errorf("table without the buffers:\n%s", table.String())
	}
}
