package main

import (
	"context"

	"fmt"
	"github.com/awslabs/operatorpkg/status"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

const (
	instanceType = "Standard_D16as_v5"
	poolName     = "general"
	apps         = 500 // distinct workloads (a ReplicaSet, labels, a PDB each)
)

var zones = []string{"eastus-1", "eastus-2", "eastus-3"}

// shape is the cluster to create.
type shape struct {
	nodes, pods, pending, namespaces, workers int
}

// parallel runs create over 0..n-1 in chunks of chunk items on workers
// goroutines, printing its progress every 10 s and its rate at the end.
func parallel(ctx context.Context, what string, n, chunk, workers int, create func(ctx context.Context, from, to int) error) error {
	start := time.Now()
	var next, done atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		ticker := time.NewTicker(10 * time.Second)
		defer ticker.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-ticker.C:
				created := done.Load()
				fmt.Printf("  %s: %d/%d in %s (%.0f/s)\n", what, created, n, time.Since(start).Round(time.Second), float64(created)/time.Since(start).Seconds())
			}
		}
	}()
	for range workers {
		wg.Go(func() {
			for {
				from := int(next.Add(int64(chunk)) - int64(chunk))
				if from >= n || ctx.Err() != nil {
					return
				}
				to := min(from+chunk, n)
				if err := create(ctx, from, to); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("%s %d-%d: %w", what, from, to-1, err)
					}
					mu.Unlock()
					return
				}
				done.Add(int64(to - from))
			}
		})
	}
	wg.Wait()
	close(stopProgress)
	<-progressDone
	elapsed := time.Since(start)
	fmt.Printf("created %d %s in %s (%.0f/s)\n", n, what, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())
	return firstErr
}

// eachOne adapts a per-item create to parallel's chunks.
func eachOne(create func(ctx context.Context, i int) error) func(ctx context.Context, from, to int) error {
	return func(ctx context.Context, from, to int) error {
		for i := from; i < to; i++ {
			if err := create(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
}

func nodeName(i int) string { return fmt.Sprintf("aks-general-%05d", i) }

func providerID(name string) string {
	return "azure:///subscriptions/00000000-0000-0000-0000-0000000000aa/resourceGroups/MC_test/providers/Microsoft.Compute/virtualMachines/" + name
}

func capacity() corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("128Gi")}
}

func allocatable() corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("15820m"), corev1.ResourceMemory: resource.MustParse("58Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("118Gi")}
}

func nodeLabels(name string, i int) map[string]string {
	return map[string]string{
		karpv1.NodePoolLabelKey: poolName, karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand,
		corev1.LabelInstanceTypeStable: instanceType, corev1.LabelTopologyZone: zones[i%len(zones)],
		corev1.LabelTopologyRegion: "eastus", corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
		karpv1.NodeRegisteredLabelKey: "true", karpv1.NodeInitializedLabelKey: "true",
		"karpenter.azure.com/sku-family": "D", "karpenter.azure.com/sku-cpu": "16", "team": "platform",
		"kubernetes.azure.com/cluster": "MC_test", "kubernetes.azure.com/mode": "user",
	}
}

// nodeObjects are node i's NodeClaim and Node, with the status the
// launcher and the kubelet write.
func nodeObjects(i int) (*karpv1.NodeClaim, *corev1.Node) {
	name := nodeName(i)
	now := metav1.Now()
	claim := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: nodeLabels(name, i), Generation: 1,
		Annotations: map[string]string{"karpenter.sh/nodepool-hash": "1234567890", "karpenter.sh/nodepool-hash-version": "v3"}},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{instanceType}}},
			ExpireAfter:  karpv1.MustParseNillableDuration("720h")}}
	claim.Status = karpv1.NodeClaimStatus{ProviderID: providerID(name), NodeName: name, Capacity: capacity(), Allocatable: allocatable(), ImageID: "/CommunityGalleries/AKSUbuntu/images/2204gen2containerd/versions/202511.01.0"}
	for _, condition := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized, "Ready"} {
		claim.Status.Conditions = append(claim.Status.Conditions, statusCondition(condition, now))
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: nodeLabels(name, i),
		Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
		Spec: corev1.NodeSpec{ProviderID: providerID(name), PodCIDR: fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256)}}
	node.Spec.PodCIDRs = []string{node.Spec.PodCIDR}
	node.Status = corev1.NodeStatus{Capacity: capacity(), Allocatable: allocatable(),
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastHeartbeatTime: now, LastTransitionTime: now}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.224.%d.%d", i/250, i%250+4)}, {Type: corev1.NodeHostName, Address: name}},
		NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.33.2", ContainerRuntimeVersion: "containerd://1.7.27", OSImage: "Ubuntu 22.04.5 LTS",
			KernelVersion: "5.15.0-1090-azure", OperatingSystem: "linux", Architecture: "amd64"}}
	for image := range 12 {
		node.Status.Images = append(node.Status.Images, corev1.ContainerImage{Names: []string{fmt.Sprintf("mcr.microsoft.com/oss/kubernetes/image-%d:v1.%d.0", image, image)}, SizeBytes: int64(50+image) << 20})
	}
	node.ManagedFields = nodeManagedFields(node, now)
	return claim, node
}

func statusCondition(t string, now metav1.Time) status.Condition {
	return status.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t, LastTransitionTime: now}
}

func namespace(i, namespaces int) string { return fmt.Sprintf("team-%02d", i%apps%namespaces) }

// boundPod is pod i of the cluster, on node i%nodes, as the API server
// returns it once the kubelet has written its status.
func boundPod(i int, s shape, pending bool) (*corev1.Pod, corev1.PodStatus) {
	app := i % apps
	name := fmt.Sprintf("app-%03d-%06d", app, i)
	rs := fmt.Sprintf("app-%03d-7c9f8d6b5", app)
	ctrl := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, GenerateName: rs + "-", Namespace: namespace(i, s.namespaces),
		Labels: map[string]string{"app.kubernetes.io/name": fmt.Sprintf("app-%03d", app), "app.kubernetes.io/part-of": fmt.Sprintf("system-%02d", app%40),
			"pod-template-hash": "7c9f8d6b5", "tier": []string{"web", "api", "worker", "batch"}[app%4], "version": fmt.Sprintf("v%d", app%7)},
		Annotations:     map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-30T10:00:00Z", "prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", app)), Controller: &ctrl, BlockOwnerDeletion: &ctrl}}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: fmt.Sprintf("myregistry.azurecr.io/app-%03d:1.%d.0", app, app%9),
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env:   []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprintf("%dm", 100+100*(app%4))), corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", 256*(1+app%4)))},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", 512*(1+app%4)))}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10}}},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))}},
		}}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": fmt.Sprintf("app-%03d", app)}}
	switch {
	case app%10 == 1: // zone spread
		pod.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: selector}}
	case app%20 == 2: // one per node
		pod.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: selector}}}}}
	}
	now := metav1.Now()
	if pending {
		return pod, corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/5000 nodes are available: 5000 Insufficient cpu.", LastTransitionTime: now}}}
	}
	node := i % s.nodes
	pod.Spec.NodeName = nodeName(node)
	podStatus := corev1.PodStatus{Phase: corev1.PodRunning, HostIP: fmt.Sprintf("10.224.%d.%d", node/250, node%250+4), PodIP: fmt.Sprintf("10.244.%d.%d", i/250%250, i%250+2),
		StartTime: &now, QOSClass: corev1.PodQOSBurstable}
	podStatus.HostIPs = []corev1.HostIP{{IP: podStatus.HostIP}}
	podStatus.PodIPs = []corev1.PodIP{{IP: podStatus.PodIP}}
	for _, condition := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		podStatus.Conditions = append(podStatus.Conditions, corev1.PodCondition{Type: condition, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	podStatus.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Ready: true, Started: ptr(true), RestartCount: int32(i % 3),
		Image: pod.Spec.Containers[0].Image, ImageID: "myregistry.azurecr.io/app@sha256:3f1e0f7c2b8d4c6a9e5f1d2c3b4a5968778695a4b3c2d1e0f9e8d7c6b5a49382",
		ContainerID: fmt.Sprintf("containerd://%064x", i), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
	return pod, podStatus
}

func ptr[T any](v T) *T { return &v }

// createPod creates pod i through the API server and writes its status
// (the kubelet's, or kube-scheduler's Unschedulable mark for a pending pod).
func createPod(ctx context.Context, kube client.Client, i int, s shape, pending bool) error {
	pod, podStatus := boundPod(i, s, pending)
	if pending {
		pod.Name = fmt.Sprintf("pending-%06d", i)
	}
	if err := kube.Create(ctx, pod); err != nil {
		return err
	}
	pod.Status = podStatus
	return kube.Status().Update(ctx, pod)
}

// storedPod is pod i as the API server stores it after the same create and
// status update: status and managedFields included.
func storedPod(i int, s shape, pending bool) *corev1.Pod {
	pod, podStatus := boundPod(i, s, pending)
	if pending {
		pod.Name = fmt.Sprintf("pending-%06d", i)
	}
	pod.Status = podStatus
	pod.ManagedFields = podManagedFields(pod, metav1.Now())
	return pod
}

func createPDB(ctx context.Context, kube client.Client, app int, s shape) error {
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%03d", app), Namespace: namespace(app, s.namespaces)},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": fmt.Sprintf("app-%03d", app)}}}}
	return kube.Create(ctx, pdb)
}
