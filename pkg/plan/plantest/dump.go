// Package plantest writes cluster dumps as `kubectl get -o yaml` prints
// them, for the tests of `karpfunc plan`: a NodePool with its
// AKSNodeClass, and running Standard_D8as_v5 nodes (Node and NodeClaim)
// with their pods.
package plantest

import (
	"fmt"
	"strings"
)

// NodePool is the NodePool "general" (D family, on-demand, consolidation
// after 1m, every node disruptable at once) with the extra requirements
// given as flow-style YAML lines (e.g. "{key: kubernetes.io/arch,
// operator: In, values: [amd64]}"), and its AKSNodeClass "default".
func NodePool(requirements ...string) string {
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
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
`)
	for _, r := range requirements {
		fmt.Fprintf(&b, "      - %s\n", r)
	}
	b.WriteString(`  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 1m, budgets: [{nodes: "100%"}]}
---
apiVersion: karpenter.azure.com/v1beta1
kind: AKSNodeClass
metadata: {name: default}
spec: {imageFamily: Ubuntu2204}
`)
	return b.String()
}

// Pod is a running pod's requests, and whether it carries
// karpenter.sh/do-not-disrupt.
type Pod struct {
	CPU, Memory  string
	DoNotDisrupt bool
}

// Node is an initialized Standard_D8as_v5 NodeClaim of "general" in
// eastus-1, its Ready Node and pods running on it (named name-0, name-1...),
// each document starting with "---".
func Node(name, allocatableMemory string, pods ...Pod) string {
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
  allocatable: {cpu: 7820m, memory: "%[3]s", pods: "110"}
  conditions: [{type: Ready, status: "True"}]
`, name, labels, allocatableMemory)
	for i, p := range pods {
		ann := ""
		if p.DoNotDisrupt {
			ann = `, annotations: {karpenter.sh/do-not-disrupt: "true"}`
		}
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Pod
metadata: {name: %s-%d, namespace: default%s}
spec:
  nodeName: %s
  containers: [{name: c, image: x, resources: {requests: {cpu: "%s", memory: "%s"}}}]
status: {phase: Running}
`, name, i, ann, name, p.CPU, p.Memory)
	}
	return b.String()
}
