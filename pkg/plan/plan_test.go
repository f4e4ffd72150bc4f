package plan_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/plan"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

const objects = `
# comment-only documents are skipped
---
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
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: web-1, namespace: default}
  spec:
    containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 2Gi}}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: big, namespace: default}
  spec:
    containers: [{name: c, image: x, resources: {requests: {cpu: "200", memory: 2Gi}}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: running, namespace: default}
  spec:
    nodeName: aks-x
    containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
- apiVersion: v1
  kind: Pod
  metadata:
    name: ds-pod
    namespace: kube-system
    ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: ds, uid: u, controller: true}]
  spec:
    containers: [{name: c, image: x}]
- apiVersion: v1
  kind: Service
  metadata: {name: svc, namespace: default}
- apiVersion: v1
  kind: Namespace
  metadata: {name: team-b, labels: {tier: prod}}
---
apiVersion: v1
kind: Node
metadata:
  name: aks-x
  labels: {topology.kubernetes.io/region: westeurope}
status:
  allocatable: {cpu: "2", memory: 4Gi, pods: "110"}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: managed-csi}
provisioner: disk.csi.azure.com
`

func TestRead(t *testing.T) {
	o := &plan.Objects{}
	if err := o.Read("objects.yaml", strings.NewReader(objects)); err != nil {
		t.Fatal(err)
	}
	if len(o.NodePools) != 1 || len(o.NodeClasses) != 1 || len(o.Pods) != 4 || len(o.Nodes) != 1 || len(o.StorageClasses) != 1 {
		t.Fatalf("read %d nodepools, %d classes, %d pods, %d nodes, %d storageclasses; want 1,1,4,1,1",
			len(o.NodePools), len(o.NodeClasses), len(o.Pods), len(o.Nodes), len(o.StorageClasses))
	}
	if len(o.Warnings) != 1 || !strings.Contains(o.Warnings[0], "objects.yaml: document 3, item 5: ignoring Service default/svc") {
		t.Errorf("warnings = %q, want one naming the Service by file, document and item", o.Warnings)
	}
	if got := o.Region(); got != "westeurope" {
		t.Errorf("Region() = %q, want westeurope from the Node label", got)
	}
	in := o.Input(nil)
	if len(in.Namespaces) != 1 || in.Namespaces[0].Name != "team-b" || in.Namespaces[0].Labels["tier"] != "prod" {
		t.Errorf("namespaces = %v, want team-b with tier=prod passed to the engine (namespaceSelector terms match its labels)", in.Namespaces)
	}
	if len(in.Pods) != 2 || len(in.BoundPods) != 1 {
		t.Errorf("pending %d, bound %d; want 2 pending (web-1, big) and 1 bound; DaemonSet pods are not pending", len(in.Pods), len(in.BoundPods))
	}
}

func TestReadErrors(t *testing.T) {
	for _, tc := range []struct {
		name, input, want string
	}{
		{"invalid YAML", "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n---\na: [b\n", "f.yaml: document 2: not valid YAML or JSON"},
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", "f.yaml: document 1: has no kind"},
		{"bad quantity", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}\n", "f.yaml: document 1: Pod ns/p is invalid (the API server would refuse it): spec.containers[0].resources.requests[cpu]: Invalid value: \"lots\": quantities must match"},
		{"bad item in a List", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: node-a}}\n- {apiVersion: v1, kind: Node, metadata: {name: 7}}\n", "f.yaml: document 1, item 2:"},
		{"wrong field type", "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec: {weight: heavy}\n", "f.yaml: document 1: NodePool np:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := (&plan.Objects{}).Read("f.yaml", strings.NewReader(tc.input))
			var de *plan.DocumentError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want a DocumentError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestOutput(t *testing.T) {
	o := &plan.Objects{}
	if err := o.Read("objects.yaml", strings.NewReader(objects)); err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	in := o.Input(c)
	in.Nodes = nil // the node has no NodePool; keep web-1 for a new claim
	in.BoundPods = nil
	out := plan.NewOutput(scheduler.Solve(in), 12*time.Millisecond)
	var buf bytes.Buffer
	if err := out.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if out.Pods["new"] != 1 || out.Pods["unschedulable"] != 1 || out.Pods["node"] != 0 {
		t.Errorf("pods by outcome %v; want 1 new, 1 unschedulable", out.Pods)
	}
	for _, k := range []string{"nodeClaims", "existingNodes", "unschedulable", "totalPricePerHour", "solveSeconds", "pods", "summary"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, buf.String())
		}
	}
	if len(out.NodeClaims) != 1 || out.NodeClaims[0].NodePool != "general" || out.NodeClaims[0].InstanceType == "" ||
		out.NodeClaims[0].PricePerHour <= 0 || out.NodeClaims[0].Pods[0] != "default/web-1" || out.NodeClaims[0].Zone == "" {
		t.Errorf("nodeClaims = %+v, want one priced claim for default/web-1", out.NodeClaims)
	}
	if out.TotalPricePerHour != out.NodeClaims[0].PricePerHour {
		t.Errorf("total %v != claim price %v", out.TotalPricePerHour, out.NodeClaims[0].PricePerHour)
	}
	if len(out.Unschedulable) != 1 || out.Unschedulable[0].Pod != "default/big" || !strings.Contains(out.Unschedulable[0].Reason, "requests 200 vCPU; the largest allowed SKU in NodePool general") {
		t.Errorf("unschedulable = %+v", out.Unschedulable)
	}
	buf.Reset()
	if err := out.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "2 pending: 0 on nodes, 0 on in-flight NodeClaims [], 1 on new NodeClaims [], 1 unschedulable, 0 deferred; 1 new NodeClaims") ||
		!strings.Contains(buf.String(), "default/big") {
		t.Errorf("table:\n%s", buf.String())
	}
}
