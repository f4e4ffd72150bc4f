// Package scaletest builds a cluster at AKS's limits for benchmarks: 5,000
// Standard_D16as_v5 nodes with their NodeClaims, pods bound to them and
// pods pending, every object shaped as the API server returns it
// (managedFields, status with conditions and container statuses, owner
// references, the kube-api-access volume). The scheduler's benchmark solves
// it; `karpfunc plan`'s benchmark reads it as a `kubectl get -o json` or
// `-o yaml` List. Nothing here is committed data: the cluster is generated
// from a seed.
package scaletest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"time"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
)

// Size says how large a cluster to build.
type Size struct {
	Nodes       int
	BoundPods   int
	PendingPods int
	Seed        int64
}

// AKSLimits is a cluster at AKS's limits: AKS's 5,000 nodes, the Kubernetes
// scalability envelope's 150,000 pods, and a burst of 2,000 pending.
var AKSLimits = Size{Nodes: 5000, BoundPods: 150000, PendingPods: 2000, Seed: 20}

// Cluster is the generated objects.
type Cluster struct {
	NodePools   []*karpv1.NodePool
	NodeClasses []*v1beta1.AKSNodeClass
	Nodes       []*corev1.Node
	NodeClaims  []*karpv1.NodeClaim
	BoundPods   []*corev1.Pod
	PendingPods []*corev1.Pod
}

// The node shape: Standard_D16as_v5 as AKS reports it with maxPods 250.
const (
	nodeType    = "Standard_D16as_v5"
	region      = "eastus"
	nodePool    = "general"
	deployments = 3000
	namespaces  = 40
)

var zones = []string{"eastus-1", "eastus-2", "eastus-3"}

// app is a Deployment: its pods share labels, requests and constraints.
type app struct {
	name, namespace, hash string
	cpu, memory           resource.Quantity
	// spreadZone: a zone topology spread (maxSkew 1, DoNotSchedule);
	// antiHost: required hostname anti-affinity against its own pods.
	spreadZone, antiHost bool
}

var created = metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))

// Generate builds a cluster of size: nodes spread over three zones, bound
// pods dealt over them with room left on most nodes, pending pods from the
// same Deployments. One in ten Deployments spreads over zones, one in
// twenty keeps its pods on distinct nodes.
func Generate(size Size) *Cluster {
	rng := rand.New(rand.NewSource(size.Seed)) //nolint:gosec // deterministic workload
	apps := makeApps(rng)
	c := &Cluster{
		NodePools:   []*karpv1.NodePool{makeNodePool()},
		NodeClasses: []*v1beta1.AKSNodeClass{{TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.azure.com/v1beta1", Kind: "AKSNodeClass"}, ObjectMeta: metav1.ObjectMeta{Name: "default"}}},
	}
	for i := range size.Nodes {
		name := fmt.Sprintf("aks-general-%05d", i)
		zone := zones[i%len(zones)]
		c.Nodes = append(c.Nodes, makeNode(name, zone))
		c.NodeClaims = append(c.NodeClaims, makeNodeClaim(name, zone))
	}
	c.BoundPods = bindPods(c.Nodes, apps, size.BoundPods, rng)
	burst := makeBurstApps(rng)
	for i := range size.PendingPods {
		a := burst[rng.Intn(len(burst))]
		p := makePod(a, size.BoundPods+i, rng)
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, LastTransitionTime: created,
			Message: "0/5000 nodes are available: 5000 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.",
		}}}
		c.PendingPods = append(c.PendingPods, p)
	}
	return c
}

// bindPods deals n pods of apps over nodes as a kube-scheduler would
// leave them: a pod goes to a random node with room for it (CPU and
// memory within allocatable, up to 250 pods), the next node with room
// otherwise; an anti-affine app's pods take distinct nodes.
func bindPods(nodes []*corev1.Node, apps []*app, n int, rng *rand.Rand) []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, n)
	cpuLeft := make([]int64, len(nodes))
	memLeft := make([]int64, len(nodes))
	podsLeft := make([]int, len(nodes))
	for i, node := range nodes {
		cpuLeft[i], memLeft[i], podsLeft[i] = node.Status.Allocatable.Cpu().MilliValue(), node.Status.Allocatable.Memory().Value(), 250
	}
	taken := map[*app]map[int]bool{}
	for i := range n {
		a := apps[rng.Intn(len(apps))]
		p := makePod(a, i, rng)
		cpu, mem := a.cpu.MilliValue(), a.memory.Value()
		start := rng.Intn(max(len(nodes), 1))
		for k := range len(nodes) {
			idx := (start + k) % len(nodes)
			if cpuLeft[idx] < cpu || memLeft[idx] < mem || podsLeft[idx] == 0 || (a.antiHost && taken[a][idx]) {
				continue
			}
			cpuLeft[idx], memLeft[idx], podsLeft[idx] = cpuLeft[idx]-cpu, memLeft[idx]-mem, podsLeft[idx]-1
			if a.antiHost {
				if taken[a] == nil {
					taken[a] = map[int]bool{}
				}
				taken[a][idx] = true
			}
			bind(p, nodes[idx], rng)
			break
		}
		pods = append(pods, p)
	}
	return pods
}

// makeBurstApps are the Deployments scaling up: larger pods than most of
// what runs, so some fit the room left on existing nodes and the rest
// need new ones.
func makeBurstApps(rng *rand.Rand) []*app {
	cpus := []string{"500m", "1", "2", "3", "4", "6"}
	mems := []string{"1Gi", "2Gi", "4Gi", "8Gi", "12Gi"}
	apps := make([]*app, 100)
	for i := range apps {
		apps[i] = &app{
			name: fmt.Sprintf("burst-%03d", i), namespace: fmt.Sprintf("team-%02d", i%namespaces),
			hash: fmt.Sprintf("%010x", rng.Int63n(1<<40)),
			cpu:  resource.MustParse(cpus[rng.Intn(len(cpus))]), memory: resource.MustParse(mems[rng.Intn(len(mems))]),
			spreadZone: i%5 == 1, antiHost: i%10 == 2,
		}
	}
	return apps
}

func makeApps(rng *rand.Rand) []*app {
	cpus := []string{"100m", "200m", "250m", "250m", "500m", "500m", "500m", "750m", "1"}
	mems := []string{"128Mi", "256Mi", "512Mi", "512Mi", "1Gi", "1Gi", "2Gi", "4Gi"}
	apps := make([]*app, deployments)
	for i := range apps {
		apps[i] = &app{
			name: fmt.Sprintf("app-%04d", i), namespace: fmt.Sprintf("team-%02d", i%namespaces),
			hash: fmt.Sprintf("%010x", rng.Int63n(1<<40)),
			cpu:  resource.MustParse(cpus[rng.Intn(len(cpus))]), memory: resource.MustParse(mems[rng.Intn(len(mems))]),
			spreadZone: i%10 == 3, antiHost: i%20 == 7,
		}
	}
	return apps
}

func makeNodePool() *karpv1.NodePool {
	np := &karpv1.NodePool{TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodePool"}, ObjectMeta: metav1.ObjectMeta{Name: nodePool}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: "karpenter.azure.com/sku-family", Operator: corev1.NodeSelectorOpIn, Values: []string{"D"}},
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
	}
	return np
}

func nodeLabels(name, zone string) map[string]string {
	return map[string]string{
		corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux", corev1.LabelHostname: name,
		corev1.LabelInstanceTypeStable: nodeType, "beta.kubernetes.io/instance-type": nodeType,
		corev1.LabelTopologyZone: zone, corev1.LabelTopologyRegion: region, "failure-domain.beta.kubernetes.io/zone": zone,
		karpv1.NodePoolLabelKey: nodePool, karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand, karpv1.NodeInitializedLabelKey: "true", karpv1.NodeRegisteredLabelKey: "true",
		"karpenter.azure.com/sku-family": "D", "karpenter.azure.com/sku-cpu": "16", "karpenter.azure.com/sku-memory": "65536",
		"kubernetes.azure.com/cluster": "MC_rg_aks_eastus", "kubernetes.azure.com/mode": "user", "kubernetes.azure.com/os-sku": "Ubuntu",
		"kubernetes.azure.com/node-image-version": "AKSUbuntu-2204gen2containerd-202611.04.0", "kubernetes.azure.com/role": "agent",
		"node.kubernetes.io/exclude-from-external-load-balancers": "", "topology.disk.csi.azure.com/zone": zone,
	}
}

func fields(manager, subresource, raw string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(raw)}, Subresource: subresource}
}

func makeNode(name, zone string) *corev1.Node {
	n := &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: nodeLabels(name, zone), UID: types.UID("uid-" + name), ResourceVersion: "123456789", CreationTimestamp: created,
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true", "karpenter.sh/nodeclaim": name},
			ManagedFields: []metav1.ManagedFieldsEntry{
				fields("kubelet", "", `{"f:metadata":{"f:annotations":{".":{},"f:volumes.kubernetes.io/controller-managed-attach-detach":{}},"f:labels":{".":{},"f:beta.kubernetes.io/arch":{},"f:kubernetes.io/hostname":{}}},"f:spec":{"f:providerID":{}}}`),
				fields("kubelet", "status", `{"f:status":{"f:allocatable":{"f:cpu":{},"f:memory":{}},"f:conditions":{"k:{\"type\":\"Ready\"}":{"f:lastHeartbeatTime":{}}},"f:images":{},"f:nodeInfo":{"f:bootID":{}}}}`),
			}},
		Spec: corev1.NodeSpec{ProviderID: "azure:///subscriptions/0000/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachines/" + name},
	}
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("65851704Ki"),
		corev1.ResourcePods: resource.MustParse("250"), corev1.ResourceEphemeralStorage: resource.MustParse("129886128Ki")}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("15740m"), corev1.ResourceMemory: resource.MustParse("58678072Ki"),
		corev1.ResourcePods: resource.MustParse("250"), corev1.ResourceEphemeralStorage: resource.MustParse("119703055367")}
	for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: c, Status: corev1.ConditionFalse, LastHeartbeatTime: created, LastTransitionTime: created, Reason: "KubeletHasSufficient" + string(c), Message: "kubelet has sufficient resources"})
	}
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: created, LastTransitionTime: created, Reason: "KubeletReady", Message: "kubelet is posting ready status"})
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.224.0.4"}, {Type: corev1.NodeHostName, Address: name}}
	n.Status.NodeInfo = corev1.NodeSystemInfo{MachineID: "0123456789abcdef", SystemUUID: "uuid", BootID: "boot", KernelVersion: "5.15.0-1074-azure", OSImage: "Ubuntu 22.04.5 LTS",
		ContainerRuntimeVersion: "containerd://1.7.23-1", KubeletVersion: "v1.33.3", KubeProxyVersion: "v1.33.3", OperatingSystem: "linux", Architecture: "amd64"}
	for i := range 12 {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{fmt.Sprintf("mcr.microsoft.com/oss/kubernetes/image-%d@sha256:%064d", i, i), fmt.Sprintf("mcr.microsoft.com/oss/kubernetes/image-%d:v1.%d", i, i)}, SizeBytes: int64(1e7 * (i + 1))})
	}
	return n
}

func makeNodeClaim(name, zone string) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: nodeLabels(name, zone), UID: types.UID("claim-" + name), CreationTimestamp: created, Finalizers: []string{"karpenter.sh/termination"},
			ManagedFields: []metav1.ManagedFieldsEntry{fields("karpfunc", "", `{"f:metadata":{"f:labels":{}},"f:spec":{"f:requirements":{}}}`), fields("karpfunc", "status", `{"f:status":{"f:conditions":{}}}`)}},
	}
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: "default"}
	nc.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{nodeType}},
		{Key: karpv1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{nodePool}},
		{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}},
	}
	nc.Status.NodeName = name
	nc.Status.ProviderID = "azure:///subscriptions/0000/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachines/" + name
	nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("65851704Ki"), corev1.ResourcePods: resource.MustParse("250")}
	nc.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("15740m"), corev1.ResourceMemory: resource.MustParse("58678072Ki"), corev1.ResourcePods: resource.MustParse("250")}
	for _, t := range []string{"Launched", "Registered", "Initialized", "Ready"} {
		nc.Status.Conditions = append(nc.Status.Conditions, status.Condition{Type: t, Status: metav1.ConditionTrue, LastTransitionTime: created, Reason: t})
	}
	return nc
}

func makePod(a *app, i int, rng *rand.Rand) *corev1.Pod {
	labels := map[string]string{"app": a.name, "pod-template-hash": a.hash, "app.kubernetes.io/part-of": a.namespace}
	name := fmt.Sprintf("%s-%s-%05x", a.name, a.hash, i)
	controller := true
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: a.namespace, Labels: labels, UID: types.UID(fmt.Sprintf("pod-uid-%08d", i)),
			ResourceVersion: fmt.Sprint(100000 + i), CreationTimestamp: created, GenerateName: a.name + "-" + a.hash + "-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: a.name + "-" + a.hash, UID: types.UID("rs-" + a.name), Controller: &controller, BlockOwnerDeletion: &controller}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				fields("kube-controller-manager", "", `{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"rs\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{},"f:resources":{".":{},"f:limits":{},"f:requests":{}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`),
				fields("kubelet", "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:podIPs":{},"f:startTime":{}}}`),
			}},
		Spec: podSpec(a, rng),
	}
	if a.spreadZone {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": a.name}}, MatchLabelKeys: []string{"pod-template-hash"}}}
	}
	if a.antiHost {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": a.name}}, TopologyKey: corev1.LabelHostname}}}}
	}
	return p
}

func podSpec(a *app, rng *rand.Rand) corev1.PodSpec {
	grace := int64(30)
	seconds := int64(300)
	limits := corev1.ResourceList{corev1.ResourceMemory: a.memory}
	if rng.Intn(3) == 0 {
		limits[corev1.ResourceCPU] = a.cpu
	}
	return corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: "main", Image: "myregistry.azurecr.io/" + a.name + ":1.4.2", ImagePullPolicy: corev1.PullIfNotPresent,
			Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			Env:       []corev1.EnvVar{{Name: "APP", Value: a.name}, {Name: "LOG_LEVEL", Value: "info"}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: a.cpu, corev1.ResourceMemory: a.memory}, Limits: limits},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080), Scheme: corev1.URISchemeHTTP}},
				PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
			VolumeMounts:             []corev1.VolumeMount{{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			TerminationMessagePath:   corev1.TerminationMessagePathDefault,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		}},
		RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace, DNSPolicy: corev1.DNSClusterFirst,
		ServiceAccountName: "default", DeprecatedServiceAccount: "default", SchedulerName: corev1.DefaultSchedulerName, SecurityContext: &corev1.PodSecurityContext{},
		Tolerations: []corev1.Toleration{
			{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds},
			{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds},
		},
		Volumes: []corev1.Volume{{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &[]int64{3607}[0]}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		}}}}},
		PreemptionPolicy: &[]corev1.PreemptionPolicy{corev1.PreemptLowerPriority}[0], Priority: &[]int32{0}[0], EnableServiceLinks: &[]bool{true}[0],
	}
}

// bind makes p a running pod on node, with the status the kubelet writes.
func bind(p *corev1.Pod, node *corev1.Node, rng *rand.Rand) {
	p.Spec.NodeName = node.Name
	started := metav1.NewTime(created.Add(time.Duration(rng.Intn(3600)) * time.Second))
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable, HostIP: "10.224.0.4", PodIP: fmt.Sprintf("10.244.%d.%d", rng.Intn(256), rng.Intn(256)),
		HostIPs: []corev1.HostIP{{IP: "10.224.0.4"}}, StartTime: &started,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: started},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: started},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: started},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "main", Ready: true, RestartCount: 0, Image: p.Spec.Containers[0].Image, ImageID: p.Spec.Containers[0].Image + "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			ContainerID: fmt.Sprintf("containerd://%064x", rng.Int63()), Started: &[]bool{true}[0],
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		}},
	}
	p.Status.PodIPs = []corev1.PodIP{{IP: p.Status.PodIP}}
}

// Objects are the cluster's objects in the order `kubectl get` would list
// them: NodePools, AKSNodeClasses, Nodes, NodeClaims, pods.
func (c *Cluster) Objects() []any {
	out := make([]any, 0, 2+2*len(c.Nodes)+len(c.BoundPods)+len(c.PendingPods))
	for _, np := range c.NodePools {
		out = append(out, np)
	}
	for _, nc := range c.NodeClasses {
		out = append(out, nc)
	}
	for _, n := range c.Nodes {
		out = append(out, n)
	}
	for _, nc := range c.NodeClaims {
		out = append(out, nc)
	}
	for _, p := range c.BoundPods {
		out = append(out, p)
	}
	for _, p := range c.PendingPods {
		out = append(out, p)
	}
	return out
}

// WriteJSONList writes the cluster as `kubectl get -o json` prints a
// List (see ListWriter).
func (c *Cluster) WriteJSONList(w io.Writer) error { return c.writeList(NewJSONListWriter(w)) }

// WriteYAMLList writes the cluster as `kubectl get -o yaml` prints a
// List (see ListWriter).
func (c *Cluster) WriteYAMLList(w io.Writer) error { return c.writeList(NewYAMLListWriter(w)) }

func (c *Cluster) writeList(lw *ListWriter) error {
	for _, obj := range c.Objects() {
		if err := lw.Add(obj); err != nil {
			return err
		}
	}
	return lw.Close()
}

// ListWriter writes objects as kubectl prints a v1 List, one item at a
// time, so a dump of any size is never whole in memory: JSON indented by
// four spaces with items in order, or YAML with the items as a block
// sequence at column 0 and kind after them. Close ends the List and
// flushes.
type ListWriter struct {
	out   *bufio.Writer
	yaml  bool
	items int
}

// NewJSONListWriter writes a List as `kubectl get -o json` prints it.
func NewJSONListWriter(w io.Writer) *ListWriter {
	lw := &ListWriter{out: bufio.NewWriterSize(w, 1<<20)}
	lw.out.WriteString("{\n    \"apiVersion\": \"v1\",\n    \"items\": [")
	return lw
}

// NewYAMLListWriter writes a List as `kubectl get -o yaml` prints it.
func NewYAMLListWriter(w io.Writer) *ListWriter {
	lw := &ListWriter{out: bufio.NewWriterSize(w, 1<<20), yaml: true}
	lw.out.WriteString("apiVersion: v1\nitems:\n")
	return lw
}

// Add writes obj as the List's next item.
func (lw *ListWriter) Add(obj any) error {
	lw.items++
	if lw.yaml {
		return lw.addYAML(obj)
	}
	js, err := json.MarshalIndent(obj, "        ", "    ")
	if err != nil {
		return err
	}
	if lw.items > 1 {
		lw.out.WriteByte(',')
	}
	lw.out.WriteString("\n        ")
	_, err = lw.out.Write(js)
	return err
}

func (lw *ListWriter) addYAML(obj any) error {
	y, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	for i, line := range bytes.SplitAfter(y, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if i == 0 {
			lw.out.WriteString("- ")
		} else {
			lw.out.WriteString("  ")
		}
		lw.out.Write(line)
	}
	return nil
}

// Close ends the List and flushes what is buffered.
func (lw *ListWriter) Close() error {
	switch {
	case lw.yaml:
		lw.out.WriteString("kind: List\nmetadata:\n  resourceVersion: \"\"\n")
	case lw.items == 0:
		lw.out.WriteString("],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n")
	default:
		lw.out.WriteString("\n    ],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n")
	}
	return lw.out.Flush()
}
