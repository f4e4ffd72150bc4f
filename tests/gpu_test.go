package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// gpuPools are two tainted GPU NodePools as the NAP guide writes them: "gpu"
// on an AKSNodeClass that leaves spec.gpu unset (mode Driver, the default)
// and "gpu-byo" on one that sets mode None. Each allows NVIDIA sizes only.
const gpuPools = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %[1]s
spec:
  template:
    spec:
      nodeClassRef:
        group: karpenter.azure.com
        kind: AKSNodeClass
        name: %[1]s
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
        - key: karpenter.azure.com/sku-gpu-manufacturer
          operator: In
          values: ["nvidia"]
      taints:
        - key: %[1]s
          value: "true"
          effect: NoSchedule
---
apiVersion: karpenter.azure.com/v1beta1
kind: AKSNodeClass
metadata:
  name: %[1]s
spec:
  maxPods: 30
%[2]s
`

// nvidiaDevicePlugin is NVIDIA's device plugin DaemonSet
// (github.com/NVIDIA/k8s-device-plugin deployments/static/nvidia-device-plugin.yml),
// which AKS asks GPU users to install themselves
// (learn.microsoft.com/azure/aks/gpu-cluster), narrowed to one NodePool.
func nvidiaDevicePlugin(pool string) *appsv1.DaemonSet {
	labels := map[string]string{"name": "nvidia-device-plugin-ds"}
	hostPath := corev1.HostPathDirectory
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "nvidia-device-plugin-daemonset", Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:      map[string]string{karpv1.NodePoolLabelKey: pool},
					Tolerations:       []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					PriorityClassName: "system-node-critical",
					Containers: []corev1.Container{{
						Name: "nvidia-device-plugin-ctr", Image: "nvcr.io/nvidia/k8s-device-plugin:v0.17.1",
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptrTo(false),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						VolumeMounts: []corev1.VolumeMount{{Name: "device-plugin", MountPath: "/var/lib/kubelet/device-plugins"}},
					}},
					Volumes: []corev1.Volume{{Name: "device-plugin", VolumeSource: corev1.VolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kubelet/device-plugins", Type: &hostPath}}}},
				},
			},
		},
	}
}

// gpuOperatorDriver, gpuOperatorToolkit and gpuOperatorDevicePlugin are
// the driver, container toolkit and device plugin DaemonSets the NVIDIA GPU
// Operator deploys (NVIDIA/gpu-operator assets/state-driver,
// state-container-toolkit and state-device-plugin 0500_daemonset.yaml),
// with the images its chart's defaults name, narrowed to one NodePool and
// to what decides whether GPUs register: the privileged driver container
// shares the host's /run/nvidia with Bidirectional propagation, the
// privileged toolkit installs nvidia-container-runtime in the host's
// /usr/local/nvidia, and the device plugin mounts the driver root,
// /run/nvidia/driver.
func gpuOperatorDriver(pool string) *appsv1.DaemonSet {
	propagation := corev1.MountPropagationBidirectional
	return operatorDaemonSet("nvidia-driver-daemonset", pool, []corev1.Container{{
		Name: "nvidia-driver-ctr", Image: "nvcr.io/nvidia/driver:570.195.03-ubuntu22.04",
		Command: []string{"nvidia-driver"}, Args: []string{"init"},
		SecurityContext: &corev1.SecurityContext{Privileged: ptrTo(true)},
		VolumeMounts:    []corev1.VolumeMount{{Name: "run-nvidia", MountPath: "/run/nvidia", MountPropagation: &propagation}},
	}}, []corev1.Volume{hostPathVolume("run-nvidia", "/run/nvidia")})
}

func gpuOperatorToolkit(pool string) *appsv1.DaemonSet {
	return operatorDaemonSet("nvidia-container-toolkit-daemonset", pool, []corev1.Container{{
		Name: "nvidia-container-toolkit-ctr", Image: "nvcr.io/nvidia/k8s/container-toolkit:v1.17.8-ubuntu20.04",
		SecurityContext: &corev1.SecurityContext{Privileged: ptrTo(true)},
		VolumeMounts:    []corev1.VolumeMount{{Name: "toolkit-install-dir", MountPath: "/usr/local/nvidia"}},
	}}, []corev1.Volume{hostPathVolume("toolkit-install-dir", "/usr/local/nvidia")})
}

func gpuOperatorDevicePlugin(pool string) *appsv1.DaemonSet {
	propagation := corev1.MountPropagationHostToContainer
	return operatorDaemonSet("nvidia-device-plugin-daemonset", pool, []corev1.Container{{
		Name: "nvidia-device-plugin", Image: "nvcr.io/nvidia/k8s-device-plugin:v0.17.1",
		SecurityContext: &corev1.SecurityContext{Privileged: ptrTo(true)},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "device-plugin", MountPath: "/var/lib/kubelet/device-plugins"},
			{Name: "driver-install-dir", MountPath: "/driver-root", MountPropagation: &propagation},
		},
	}}, []corev1.Volume{hostPathVolume("device-plugin", "/var/lib/kubelet/device-plugins"), hostPathVolume("driver-install-dir", "/run/nvidia/driver")})
}

func operatorDaemonSet(name, pool string, containers []corev1.Container, volumes []corev1.Volume) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "gpu-operator"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:      map[string]string{karpv1.NodePoolLabelKey: pool},
					Tolerations:       []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					PriorityClassName: "system-node-critical",
					Containers:        containers,
					Volumes:           volumes,
				},
			},
		},
	}
}

func hostPathVolume(name, path string) corev1.Volume {
	kind := corev1.HostPathDirectoryOrCreate
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &kind}}}
}

// gpuJob is a Deployment of pods whose container sets only a GPU limit,
// as CUDA samples do; the API server defaults the request to it.
func gpuJob(name, pool string, replicas int32) *appsv1.Deployment {
	d := deployment(name, replicas, "100m", "128Mi")
	spec := &d.Spec.Template.Spec
	spec.Tolerations = []corev1.Toleration{{Key: pool, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{
		catalog.ResourceNvidiaGPU: resource.MustParse("1"),
	}}
	return d
}

// TestGPU: GPU pods on tainted GPU NodePools, end to end.
//
// Driver: pods whose containers only limit nvidia.com/gpu launch NVIDIA
// sizes provisioned with the driver (GPU_NODE=true); the device plugin
// DaemonSet registers the GPUs, the NodeClaims initialize and the pods run,
// never two on one GPU; an A10 pod gets the GRID driver.
//
// None, no device plugin: the node joins and is Ready but never registers
// nvidia.com/gpu, so the pod stays Pending and its NodeClaim shows Karpenter's
// ResourceNotRegistered, and no second node is launched for the pod.
//
// None with the GPU Operator: on that same node, the operator's device
// plugin alone registers nothing (no driver); once its driver and container
// toolkit DaemonSets run there too, the GPUs register, the NodeClaim initializes and the
// pending pod runs with its GPU, on the node it was launched for.
func TestGPU(t *testing.T) {
	t.Parallel()
	env := startEnv(t, localenv.Options{ClusterName: "gpu", BootDelay: time.Second})
	ctx := context.Background()
	kube := env.Kube
	for _, pool := range []struct{ name, gpu string }{{"gpu", ""}, {"gpu-byo", "  gpu:\n    mode: None"}} {
		if _, err := env.Apply(ctx, []byte(fmt.Sprintf(gpuPools, pool.name, pool.gpu)), pool.name+" NodePool"); err != nil {
			t.Fatalf("applying the %s NodePool: %v", pool.name, err)
		}
	}
	if err := kube.Create(ctx, nvidiaDevicePlugin("gpu")); err != nil {
		t.Fatal(err)
	}

	t.Run("driver", func(t *testing.T) {
		if err := kube.Create(ctx, gpuJob("cuda", "gpu", 2)); err != nil {
			t.Fatal(err)
		}
		eventually(t, 4*time.Minute, "both GPU pods running", func() (bool, string) {
			return allRunning(ctx, kube, "cuda", 2)
		})
		pods, err := podsWithLabel(ctx, kube, "app", "cuda")
		if err != nil {
			t.Fatal(err)
		}
		perNode := map[string]int64{}
		for _, pod := range pods {
			if got := pod.Spec.Containers[0].Resources.Requests[catalog.ResourceNvidiaGPU]; got.Value() != 1 {
				t.Errorf("pod %s requests nvidia.com/gpu %s; the API server defaults it to the limit, 1", pod.Name, got.String())
			}
			perNode[pod.Spec.NodeName]++
		}
		for nodeName, count := range perNode {
			node := &corev1.Node{}
			if err := kube.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
				t.Fatal(err)
			}
			gpus := node.Status.Allocatable[catalog.ResourceNvidiaGPU]
			t.Logf("node %s (%s): %d GPU pods, nvidia.com/gpu allocatable %s", nodeName, node.Labels[corev1.LabelInstanceTypeStable], count, gpus.String())
			if gpus.Value() < count {
				t.Errorf("node %s runs %d GPU pods with %s nvidia.com/gpu allocatable", nodeName, count, gpus.String())
			}
			if node.Labels[catalog.LabelSKUGPUManufacturer] != "nvidia" || node.Labels[catalog.LabelSKUGPUCount] != gpus.String() {
				t.Errorf("node %s (%s): labels sku-gpu-manufacturer=%q sku-gpu-count=%q, allocatable nvidia.com/gpu %s",
					nodeName, node.Labels[corev1.LabelInstanceTypeStable], node.Labels[catalog.LabelSKUGPUManufacturer],
					node.Labels[catalog.LabelSKUGPUCount], gpus.String())
			}
			vars := vmVariables(t, env, nodeName)
			if vars["GPU_NODE"] != "true" || vars["CONFIG_GPU_DRIVER_IF_NEEDED"] != "true" || vars["GPU_DRIVER_TYPE"] == "" {
				t.Errorf("node %s provisioned with GPU_NODE=%q CONFIG_GPU_DRIVER_IF_NEEDED=%q GPU_DRIVER_TYPE=%q; mode Driver installs the driver",
					nodeName, vars["GPU_NODE"], vars["CONFIG_GPU_DRIVER_IF_NEEDED"], vars["GPU_DRIVER_TYPE"])
			}
		}
		// An A10 size takes the GRID driver; a CUDA driver would fail to
		// install and the node would never join.
		a10 := gpuJob("a10", "gpu", 1)
		a10.Spec.Template.Spec.NodeSelector = map[string]string{catalog.LabelSKUGPUName: "A10"}
		if err := kube.Create(ctx, a10); err != nil {
			t.Fatal(err)
		}
		eventually(t, 4*time.Minute, "the A10 pod running", func() (bool, string) {
			return allRunning(ctx, kube, "a10", 1)
		})
		a10Pods, err := podsWithLabel(ctx, kube, "app", "a10")
		if err != nil {
			t.Fatal(err)
		}
		if vars := vmVariables(t, env, a10Pods[0].Spec.NodeName); vars["GPU_DRIVER_TYPE"] != "grid" {
			t.Errorf("A10 node %s provisioned with GPU_DRIVER_TYPE=%q, want grid", a10Pods[0].Spec.NodeName, vars["GPU_DRIVER_TYPE"])
		}
		eventually(t, time.Minute, "the GPU NodeClaims initialized", func() (bool, string) {
			claims := poolClaims(t, ctx, kube, "gpu")
			for _, nc := range claims {
				if cond := nc.StatusConditions().Get(karpv1.ConditionTypeInitialized); !cond.IsTrue() {
					return false, fmt.Sprintf("NodeClaim %s Initialized: %s %s", nc.Name, cond.Reason, cond.Message)
				}
			}
			return len(claims) > 0, fmt.Sprintf("%d NodeClaims", len(claims))
		})
	})

	t.Run("none without a device plugin", func(t *testing.T) {
		if err := kube.Create(ctx, gpuJob("byo", "gpu-byo", 1)); err != nil {
			t.Fatal(err)
		}
		const want = `Resource "nvidia.com/gpu" was requested but not registered`
		var claim karpv1.NodeClaim
		eventually(t, 4*time.Minute, "the NodeClaim not initialized for ResourceNotRegistered", func() (bool, string) {
			claims := poolClaims(t, ctx, kube, "gpu-byo")
			if len(claims) != 1 {
				return false, fmt.Sprintf("%d NodeClaims", len(claims))
			}
			claim = claims[0]
			cond := claim.StatusConditions().Get(karpv1.ConditionTypeInitialized)
			return cond.IsUnknown() && cond.Reason == "ResourceNotRegistered" && cond.Message == want,
				fmt.Sprintf("Initialized %s %s %q", cond.Status, cond.Reason, cond.Message)
		})
		node := &corev1.Node{}
		if err := kube.Get(ctx, client.ObjectKey{Name: claim.Status.NodeName}, node); err != nil {
			t.Fatal(err)
		}
		if gpus, ok := node.Status.Allocatable[catalog.ResourceNvidiaGPU]; ok && !gpus.IsZero() {
			t.Errorf("node %s advertises nvidia.com/gpu %s without a driver or device plugin", node.Name, gpus.String())
		}
		if vars := vmVariables(t, env, node.Name); vars["GPU_NODE"] != "false" || vars["CONFIG_GPU_DRIVER_IF_NEEDED"] != "false" {
			t.Errorf("mode None: node provisioned with GPU_NODE=%q CONFIG_GPU_DRIVER_IF_NEEDED=%q, want both false", vars["GPU_NODE"], vars["CONFIG_GPU_DRIVER_IF_NEEDED"])
		}
		problem := env.ARM.GPUProblem(node.Name)
		t.Logf("node %s (%s), NodeClaim %s Initialized Unknown ResourceNotRegistered; the emulator: %s", node.Name, node.Labels[corev1.LabelInstanceTypeStable], claim.Name, problem)
		if !strings.Contains(problem, "no NVIDIA device plugin") || !strings.Contains(problem, "GPU_NODE is not true") {
			t.Errorf("the emulator says of node %s's GPUs: %q", node.Name, problem)
		}
		pods, err := podsWithLabel(ctx, kube, "app", "byo")
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) != 1 || pods[0].Spec.NodeName != "" {
			t.Fatalf("the pod should stay Pending: %d pods, bound to %q", len(pods), pods[0].Spec.NodeName)
		}
		// The pod stays nominated to the uninitialized node, whose GPU the
		// engine counts from the NodeClaim: a later provisioning pass
		// launches nothing more for it.
		if claims := poolClaims(t, ctx, kube, "gpu-byo"); len(claims) != 1 {
			t.Errorf("%d NodeClaims in gpu-byo for one pending GPU pod, want 1", len(claims))
		}
	})

	t.Run("none with the GPU Operator", func(t *testing.T) {
		claims := poolClaims(t, ctx, kube, "gpu-byo")
		if len(claims) != 1 || claims[0].Status.NodeName == "" {
			t.Fatalf("want the gpu-byo node the pending pod waits for: %d NodeClaims", len(claims))
		}
		nodeName := claims[0].Status.NodeName
		if err := kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpu-operator"}}); err != nil {
			t.Fatal(err)
		}
		// The device plugin without the operator's driver finds no GPUs.
		if err := kube.Create(ctx, gpuOperatorDevicePlugin("gpu-byo")); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, "the device plugin running and registering nothing without a driver", func() (bool, string) {
			problem := env.ARM.GPUProblem(nodeName)
			return strings.Contains(problem, "device plugin pod gpu-operator/") && strings.Contains(problem, "no GPU Operator driver pod"), problem
		})
		node := &corev1.Node{}
		if err := kube.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
			t.Fatal(err)
		}
		if gpus, ok := node.Status.Allocatable[catalog.ResourceNvidiaGPU]; ok && !gpus.IsZero() {
			t.Fatalf("node %s advertises nvidia.com/gpu %s with a device plugin but no driver", nodeName, gpus.String())
		}

		for _, ds := range []*appsv1.DaemonSet{gpuOperatorDriver("gpu-byo"), gpuOperatorToolkit("gpu-byo")} {
			if err := kube.Create(ctx, ds); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, 2*time.Minute, "the pending GPU pod running", func() (bool, string) {
			return allRunning(ctx, kube, "byo", 1)
		})
		pods, err := podsWithLabel(ctx, kube, "app", "byo")
		if err != nil {
			t.Fatal(err)
		}
		if pods[0].Spec.NodeName != nodeName {
			t.Errorf("the GPU pod runs on %s, not on %s, the node launched for it", pods[0].Spec.NodeName, nodeName)
		}
		if err := kube.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
			t.Fatal(err)
		}
		gpus := node.Status.Allocatable[catalog.ResourceNvidiaGPU]
		requested := pods[0].Spec.Containers[0].Resources.Requests[catalog.ResourceNvidiaGPU]
		t.Logf("node %s (%s): nvidia.com/gpu allocatable %s, the pod requests %s", nodeName, node.Labels[corev1.LabelInstanceTypeStable], gpus.String(), requested.String())
		if requested.Value() != 1 || gpus.Value() < 1 || gpus.String() != node.Labels[catalog.LabelSKUGPUCount] {
			t.Errorf("node %s: nvidia.com/gpu allocatable %s, sku-gpu-count %q, the pod requests %s",
				nodeName, gpus.String(), node.Labels[catalog.LabelSKUGPUCount], requested.String())
		}
		if vars := vmVariables(t, env, nodeName); vars["GPU_NODE"] != "false" {
			t.Errorf("mode None: node provisioned with GPU_NODE=%q; the driver is the operator's", vars["GPU_NODE"])
		}
		eventually(t, time.Minute, "the gpu-byo NodeClaim initialized", func() (bool, string) {
			claims := poolClaims(t, ctx, kube, "gpu-byo")
			if len(claims) != 1 {
				return false, fmt.Sprintf("%d NodeClaims", len(claims))
			}
			cond := claims[0].StatusConditions().Get(karpv1.ConditionTypeInitialized)
			return cond.IsTrue(), fmt.Sprintf("Initialized %s %s %s", cond.Status, cond.Reason, cond.Message)
		})
	})
}

// vmVariables are the provisioning variables of the VM behind node.
func vmVariables(t *testing.T, env *localenv.Env, node string) map[string]string {
	t.Helper()
	for _, vm := range env.ARM.VMs() {
		if vm.Name == nil || !strings.EqualFold(*vm.Name, node) || vm.Properties == nil || vm.Properties.OSProfile == nil {
			continue
		}
		vars, err := azure.ParseCustomData(*vm.Properties.OSProfile.CustomData)
		if err != nil {
			t.Fatal(err)
		}
		return vars
	}
	t.Fatalf("no VM for node %s", node)
	return nil
}
