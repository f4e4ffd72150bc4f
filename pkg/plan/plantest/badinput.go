package plantest

// PodWithResources is a Pod ns/p whose one container has the given
// resources (flow YAML, e.g. "{requests: {cpu: 1}}").
func PodWithResources(resources string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec: {containers: [{name: c, image: x, resources: " + resources + "}]}\n"
}

// BadInput is an object the API server refuses, read from a file named
// f.yaml, with the words the refusal must hold.
type BadInput struct {
	Name, Input string
	Want        []string
	// APIServer is what a kube-apiserver's refusal of the same input
	// holds (the field and reason, in its words).
	APIServer string
}

// BadInputs are objects the API server refuses, each with the words the
// refusal must hold: where (file, document, item), what (kind and name)
// and the field with the API server's reason (k8s.io/kubernetes
// pkg/apis/core/validation validation.go validateResourceRequirements and
// ValidateContainerResourceName; Karpenter's NodePool CRD and
// RuntimeValidate). pkg/plan's reader and the end-to-end check of
// `karpfunc plan` (cmd/karpfunc) both read this list, and pkg/plan checks
// that a real kube-apiserver refuses each input too, with APIServer.
var BadInputs = []BadInput{
	{"negative quantity", PodWithResources(`{requests: {cpu: "-1"}}`),
		[]string{"f.yaml: document 1: Pod ns/p is invalid", `spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0`},
		`spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0`},
	{"malformed quantity", PodWithResources(`{requests: {cpu: lots}}`),
		[]string{"f.yaml: document 1: Pod ns/p is invalid", `spec.containers[0].resources.requests[cpu]: Invalid value: "lots": quantities must match the regular expression`},
		"quantities must match the regular expression"},
	{"request above limit", PodWithResources(`{requests: {cpu: "2"}, limits: {cpu: "1"}}`),
		[]string{"Pod ns/p", `spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1`},
		`spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1`},
	{"no containers", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec: {nodeSelector: {a: b}}\n",
		[]string{"Pod ns/p", "spec.containers: Required value"},
		"spec.containers: Required value"},
	{"non-standard name without a domain", PodWithResources(`{requests: {gpu: "1"}, limits: {gpu: "1"}}`),
		[]string{"Pod ns/p", `spec.containers[0].resources.limits[gpu]: Invalid value: "gpu": must be a standard resource type or fully qualified`},
		`spec.containers[0].resources.limits[gpu]: Invalid value: "gpu": must be a standard resource type or fully qualified`},
	{"standard name not for containers", PodWithResources(`{requests: {pods: "1"}}`),
		[]string{`spec.containers[0].resources.requests[pods]: Invalid value: "pods": must be a standard resource for containers`},
		`spec.containers[0].resources.requests[pods]: Invalid value: "pods": must be a standard resource for containers`},
	{"extended name against the standard", PodWithResources(`{limits: {requests.example.com/x: "1"}}`),
		[]string{`spec.containers[0].resources.limits[requests.example.com/x]: Invalid value: "requests.example.com/x": doesn't follow extended resource name standard`},
		`spec.containers[0].resources.limits[requests.example.com/x]: Invalid value: "requests.example.com/x": doesn't follow extended resource name standard`},
	{"extended request unlike its limit", PodWithResources(`{requests: {nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "2"}}`),
		[]string{`spec.containers[0].resources.requests: Invalid value: "1": must be equal to nvidia.com/gpu limit of 2`},
		`spec.containers[0].resources.requests: Invalid value: "1": must be equal to nvidia.com/gpu limit of 2`},
	{"extended request without a limit", PodWithResources(`{requests: {nvidia.com/gpu: "1"}}`),
		[]string{"spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"},
		"spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"},
	{"fraction of an extended resource", PodWithResources(`{limits: {nvidia.com/gpu: 500m}}`),
		[]string{"spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: \"500m\": must be an integer"},
		`spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": must be an integer`},
	{"hugepages not whole pages", PodWithResources(`{limits: {hugepages-2Mi: 3Mi, memory: 1Gi}}`),
		[]string{`spec.containers[0].resources.limits[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is not positive integer multiple of hugepages-2Mi`},
		`spec.containers[0].resources.limits[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is not positive integer multiple of hugepages-2Mi`},
	{"hugepages without cpu or memory", PodWithResources(`{limits: {hugepages-2Mi: 4Mi}}`),
		[]string{"spec.containers[0].resources: Forbidden: HugePages require cpu or memory"},
		"spec.containers[0].resources: Forbidden: HugePages require cpu or memory"},
	{"init container", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec: {initContainers: [{name: i, resources: {limits: {memory: -1Gi}}}], containers: [{name: c}]}\n",
		[]string{`spec.initContainers[0].resources.limits[memory]: Invalid value: "-1Gi": must be greater than or equal to 0`},
		`spec.initContainers[0].resources.limits[memory]: Invalid value: "-1Gi": must be greater than or equal to 0`},
	{"pod-level resource not supported there", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec: {resources: {limits: {nvidia.com/gpu: 1}}, containers: [{name: c}]}\n",
		[]string{`spec.resources.limits[nvidia.com/gpu]: Unsupported value: "nvidia.com/gpu": supported values: "cpu", "hugepages-", "memory"`},
		`spec.resources.limits[nvidia.com/gpu]: Unsupported value: "nvidia.com/gpu": supported values: "cpu", "hugepages-", "memory"`},
	{"item of a List in a later document", "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n---\napiVersion: v1\nkind: List\nitems:\n" +
		"- {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: ns}, spec: {containers: [{name: c, resources: {requests: {cpu: 1}}}]}}\n" +
		"- {apiVersion: v1, kind: Pod, metadata: {name: q, namespace: ns}, spec: {containers: [{name: c, resources: {requests: {memory: \"-5\"}}}]}}\n",
		[]string{"f.yaml: document 2, item 2: Pod ns/q is invalid", `spec.containers[0].resources.requests[memory]: Invalid value: "-5"`},
		`spec.containers[0].resources.requests[memory]: Invalid value: "-5": must be greater than or equal to 0`},
	{"DaemonSet template", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: ds, namespace: kube-system}\nspec: {template: {spec: {containers: [{name: c, resources: {requests: {cpu: 2}, limits: {cpu: 1}}}]}}}\n",
		[]string{"DaemonSet kube-system/ds is invalid", `spec.template.spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1`},
		`spec.template.spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1`},
	{"Node allocatable", "apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\nstatus: {allocatable: {cpu: \"-2\", memory: 1Gi}}\n",
		[]string{"f.yaml: document 1: Node node-a is invalid", `status.allocatable.cpu: Invalid value: "-2": must be greater than or equal to 0`},
		`status.allocatable.cpu: Invalid value: "-2": must be greater than or equal to 0`},
	{"NodePool weight", "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec: {weight: 0, template: {spec: {nodeClassRef: {group: karpenter.azure.com, kind: AKSNodeClass, name: d}, requirements: []}}}\n",
		[]string{"NodePool np is invalid", "spec.weight: Invalid value: 0: must be between 1 and 100"},
		"spec.weight: Invalid value: 0: spec.weight in body should be greater than or equal to 1"},
	{"NodePool malformed limit", "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec: {limits: {memory: lots}, template: {spec: {nodeClassRef: {group: karpenter.azure.com, kind: AKSNodeClass, name: d}, requirements: []}}}\n",
		[]string{"NodePool np is invalid", `spec.limits[memory]: Invalid value: "lots": quantities must match`},
		`spec.limits.memory: Invalid value: "lots"`},
	{"NodePool restricted label", "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec: {template: {metadata: {labels: {karpenter.sh/nodepool: x}}, spec: {nodeClassRef: {group: karpenter.azure.com, kind: AKSNodeClass, name: d}, requirements: []}}}\n",
		[]string{"NodePool np is invalid", `spec.template: Invalid value: invalid key name "karpenter.sh/nodepool" in labels, restricted`},
		`label "karpenter.sh/nodepool" is restricted`},
}
