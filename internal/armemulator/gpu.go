package armemulator

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// GPUs on an emulated node, as the AKS node image and a kubelet treat them.
//
// A kubelet reports an extended resource such as nvidia.com/gpu only after a
// device plugin registered it through /var/lib/kubelet/device-plugins/
// kubelet.sock (https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/),
// so a node registers with no GPU resources whatever its size. The NVIDIA
// device plugin finds GPUs only through the driver's NVML library, which
// containers see only under nvidia-container-runtime
// (github.com/NVIDIA/k8s-device-plugin README, "Prerequisites"). The AKS node
// image installs the driver only when GPU_NODE=true (Azure/AgentBaker
// parts/linux/cloud-init/artifacts/cse_main.sh ensureGPUDrivers), and the
// Azure Karpenter provider leaves the device plugin to the user
// (karpenter-provider-azure designs/0002-gpu-selection-and-bootstrap.md:93-100
// @352646f5): the test installs it as a DaemonSet, as a user does.
//
// So the emulated node advertises nvidia.com/gpu (its size's count) once a
// pod of NVIDIA's device plugin image that mounts the device-plugins
// directory runs on it, and only if provisioning installed the driver and
// made nvidia-container-runtime containerd's default runtime.
//
// Without the AKS driver (GPU_NODE not true: spec.gpu.mode None), the
// driver is the user's, typically the NVIDIA GPU Operator's, which AKS
// pairs with node pools created without its driver (--gpu-driver none) and
// never with its own driver on one node
// (azure.github.io/aks-rdma-infiniband/configurations/gpu-drivers; the
// provider names the operator as AKS's direction for GPU software,
// designs/0002-gpu-selection-and-bootstrap.md:8 @352646f5). The operator
// installs the driver from a privileged driver container
// (nvcr.io/nvidia/driver) that mounts the host's /run/nvidia with
// Bidirectional propagation and exposes the installed driver's root at
// /run/nvidia/driver (NVIDIA/gpu-operator
// assets/state-driver/0500_daemonset.yaml @ff54ddaa, nvidia-driver-ctr;
// docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest). Its device
// plugin runs NVIDIA's device plugin image, mounts that driver root
// (hostPath /run/nvidia/driver at /driver-root) to load NVML from it, and
// starts only once the driver is validated (assets/state-device-plugin/
// 0500_daemonset.yaml @4ef16ed7 and 0400_configmap.yaml, entrypoint.sh
// waits for /run/nvidia/validations/driver-ready) and once the operator's
// container toolkit has made nvidia-container-runtime a containerd runtime
// (its toolkit-validation init container waits for
// /run/nvidia/validations/toolkit-ready, written by the toolkit container,
// assets/state-container-toolkit/0500_daemonset.yaml @76b1f9a7, which
// installs the runtime under the host's /usr/local/nvidia). So without the
// AKS driver a node advertises its GPUs only while the operator's driver
// pod, its container toolkit pod and a device plugin pod that mounts the
// driver root all run on it; a device plugin that does not mount the
// driver root finds no NVML on a node whose containerd runs runc.
//
// AMD GPUs are never advertised: AKS installs no AMD driver (the provider's
// IsDriverInstallSupported is NVIDIA only) and the emulator does not model
// an AMD GPU operator.

// devicePluginDir is where device plugins register with the kubelet.
const devicePluginDir = "/var/lib/kubelet/device-plugins"

// nvidiaDevicePluginImage is NVIDIA's device plugin image repository.
const nvidiaDevicePluginImage = "nvcr.io/nvidia/k8s-device-plugin"

// operatorDriverImage is the GPU Operator's driver container image
// repository (NVIDIA/gpu-operator deployments/gpu-operator/values.yaml
// @d7413be9: driver.repository nvcr.io/nvidia, driver.image driver).
const operatorDriverImage = "nvcr.io/nvidia/driver"

// operatorRunDir is the host directory the operator's driver container
// shares with the host; operatorDriverRoot is where the installed driver's
// root appears in it (values.yaml hostPaths.driverInstallDir).
const (
	operatorRunDir     = "/run/nvidia"
	operatorDriverRoot = "/run/nvidia/driver"
)

// operatorToolkitImage is the GPU Operator's container toolkit image
// repository (values.yaml toolkit.repository nvcr.io/nvidia/k8s,
// toolkit.image container-toolkit); operatorToolkitDir is the host
// directory it installs nvidia-container-runtime in (toolkit.installDir).
const (
	operatorToolkitImage = "nvcr.io/nvidia/k8s/container-toolkit"
	operatorToolkitDir   = "/usr/local/nvidia"
)

// publishedGPUDriverImages are the driver images AgentBaker publishes and
// the node image can pull, repository:tag (Azure/AgentBaker@06836ee2
// parts/common/components.json GPUContainerImages). configGPUDrivers pulls
// mcr.microsoft.com/aks/aks-gpu-${GPU_DRIVER_TYPE}:${GPU_DRIVER_VERSION}-${GPU_IMAGE_SHA}
// (cse_helpers.sh NVIDIA_DRIVER_IMAGE, NVIDIA_DRIVER_IMAGE_TAG) and exits
// ERR_GPU_DRIVERS_START_FAIL when the pull fails (cse_config.sh
// configGPUDrivers), before the kubelet starts.
var publishedGPUDriverImages = map[string]bool{
	"mcr.microsoft.com/aks/aks-gpu-cuda-lts:580.159.04-20260629214430": true,
	"mcr.microsoft.com/aks/aks-gpu-cuda:580.126.09-20260430040408":     true,
	"mcr.microsoft.com/aks/aks-gpu-grid:570.211.01-20260522192315":     true,
	"mcr.microsoft.com/aks/aks-gpu-grid-v20:595.58.03-20260609172331":  true,
}

// convergedDriverSizes need the GRID ("converged") driver: a CUDA driver
// fails to install on them (Azure/AgentBaker@06836ee2
// pkg/agent/datamodel/gpu_components.go ConvergedGPUDriverSizes).
var convergedDriverSizes = map[string]bool{
	"standard_nv6ads_a10_v5": true, "standard_nv12ads_a10_v5": true, "standard_nv18ads_a10_v5": true,
	"standard_nv36ads_a10_v5": true, "standard_nv72ads_a10_v5": true, "standard_nv36adms_a10_v5": true,
	"standard_nc8ads_a10_v4": true, "standard_nc16ads_a10_v4": true, "standard_nc32ads_a10_v4": true,
}

// driverKind is the driver family size's GPUs take: grid-v20 for the RTX
// PRO 6000 Blackwell sizes (AgentBaker's RTXPro6000GPUDriverSizes, same
// file), grid for the converged sizes, cuda (cuda or cuda-lts) otherwise.
func driverKind(size string) string {
	name := strings.ToLower(size)
	switch {
	case strings.HasSuffix(name, "_rtxpro6000bse_v6"):
		return "grid-v20"
	case convergedDriverSizes[name]:
		return "grid"
	}
	return "cuda"
}

// gpuState is what provisioning made of a node's GPUs.
type gpuState struct {
	// driver: the NVIDIA driver is installed and containers get it.
	driver bool
	// userDriver: provisioning installed no driver on a size with NVIDIA
	// GPUs, so they are usable only once a GPU Operator driver pod runs on
	// the node.
	userDriver bool
	// why the GPUs cannot be advertised even with a device plugin ("" when
	// they can).
	why string
}

// readGPU reads the GPU variables of customData on a VM of size whose
// capacity (before device plugins) is capacity. An error is a provisioning
// failure: the node image exits before it starts the kubelet.
func readGPU(vars map[string]string, size string, capacity corev1.ResourceList) (gpuState, error) {
	nvidia := capacity[corev1.ResourceName("nvidia.com/gpu")]
	if vars["GPU_NODE"] != "true" {
		// No driver install; containerd's config is the non-GPU one.
		if nvidia.Sign() > 0 {
			return gpuState{userDriver: true}, nil
		}
		return gpuState{why: "the size has no NVIDIA GPUs"}, nil
	}
	if nvidia.Sign() <= 0 {
		// configGPUDrivers then waits for nvidia-smi, which finds no GPU.
		return gpuState{}, fmt.Errorf("GPU_NODE=true on %s, which has no NVIDIA GPUs: the driver install's nvidia-smi check fails and provisioning exits (ERR_GPU_DRIVERS_START_FAIL)", size)
	}
	image := "mcr.microsoft.com/aks/aks-gpu-" + vars["GPU_DRIVER_TYPE"] + ":" + vars["GPU_DRIVER_VERSION"] + "-" + vars["GPU_IMAGE_SHA"]
	if !publishedGPUDriverImages[image] {
		return gpuState{}, fmt.Errorf("GPU driver image %s is not published: pulling it fails and provisioning exits (ERR_GPU_DRIVERS_START_FAIL)", image)
	}
	if want, got := driverKind(size), vars["GPU_DRIVER_TYPE"]; !strings.HasPrefix(got, want) || (want == "grid" && got != "grid") {
		return gpuState{}, fmt.Errorf("GPU_DRIVER_TYPE %s does not fit %s's GPUs (they need a %s driver): the driver install fails and provisioning exits (ERR_GPU_DRIVERS_START_FAIL)",
			got, size, want)
	}
	config, err := base64.StdEncoding.DecodeString(vars["CONTAINERD_CONFIG_CONTENT"])
	if err != nil {
		return gpuState{}, fmt.Errorf("CONTAINERD_CONFIG_CONTENT is not base64: %w", err)
	}
	if !strings.Contains(string(config), `default_runtime_name = "nvidia-container-runtime"`) {
		return gpuState{driver: true, why: "containerd's default runtime is not nvidia-container-runtime: the device plugin's container cannot load NVML and finds no GPUs"}, nil
	}
	return gpuState{driver: true}, nil
}

// withoutDeviceResources is capacity less the resources only device
// plugins report.
func withoutDeviceResources(capacity corev1.ResourceList) corev1.ResourceList {
	out := capacity.DeepCopy()
	delete(out, corev1.ResourceName("nvidia.com/gpu"))
	delete(out, corev1.ResourceName("amd.com/gpu"))
	return out
}

// devicePlugin is one node's kubelet device plugin manager: it watches the
// pods bound to the node (as the kubelet does, with its own credentials)
// and, once an NVIDIA device plugin pod runs there and the GPUs are usable,
// reports them in the Node's capacity and allocatable.
type devicePlugin struct {
	node   string
	gpus   resource.Quantity // the size's NVIDIA GPUs
	state  gpuState
	client kubernetes.Interface
	// problem records why the node does not advertise GPUs.
	problem func(node, why string)
}

// devicePluginPoll is how often the emulated kubelet looks at its pods.
const devicePluginPoll = 500 * time.Millisecond

// run reports the GPUs once and returns; it stops when ctx ends or wanted
// says the VM is gone.
func (d *devicePlugin) run(ctx context.Context, wanted func() bool) {
	for wanted() {
		why := d.try(ctx)
		d.problem(d.node, why)
		if why == "" {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(devicePluginPoll):
		}
	}
}

// try advertises the GPUs if the node's pods register them, and says why
// not otherwise.
func (d *devicePlugin) try(ctx context.Context) string {
	pods, err := d.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + d.node})
	if err != nil {
		return "listing the node's pods: " + err.Error()
	}
	if why := gpusBlocked(d.state, pods.Items); why != "" {
		return why
	}
	if err := d.advertise(ctx); err != nil {
		return "advertising nvidia.com/gpu: " + err.Error()
	}
	return ""
}

// gpuPods are the running pods on a node that take part in registering
// its NVIDIA GPUs (nil when none runs).
type gpuPods struct {
	plugin, driver, toolkit *corev1.Pod
}

// findGPUPods picks the first running, not terminating pod of each kind.
func findGPUPods(pods []corev1.Pod) gpuPods {
	var out gpuPods
	for i := range pods {
		pod := &pods[i]
		if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
			continue
		}
		if out.plugin == nil && isNvidiaDevicePlugin(pod) {
			out.plugin = pod
		}
		if out.driver == nil && isOperatorDriver(pod) {
			out.driver = pod
		}
		if out.toolkit == nil && isOperatorToolkit(pod) {
			out.toolkit = pod
		}
	}
	return out
}

// driverProblem says why the GPUs are unusable to any device plugin: what
// provisioning left wrong, or, without the AKS driver, which part of the
// GPU Operator's stack does not run on the node.
func driverProblem(state gpuState, found gpuPods) string {
	switch {
	case !state.userDriver:
		return state.why
	case found.driver == nil:
		return "GPU_NODE is not true: the node image installed no NVIDIA driver, and no GPU Operator driver pod (" +
			operatorDriverImage + ", privileged, mounting the host's " + operatorRunDir + " with Bidirectional propagation) runs on the node"
	case found.toolkit == nil:
		return "GPU_NODE is not true: the node image configured no NVIDIA container runtime, and no GPU Operator container toolkit pod (" +
			operatorToolkitImage + ", privileged, mounting the host's " + operatorToolkitDir + ") runs on the node, so the operator's device plugin waits for toolkit-ready"
	}
	return ""
}

// gpusBlocked says why a node whose provisioning made state of its GPUs,
// running pods, does not advertise them; "" when the device plugin
// registers them.
func gpusBlocked(state gpuState, pods []corev1.Pod) string {
	found := findGPUPods(pods)
	const noPlugin = "no NVIDIA device plugin pod (" + nvidiaDevicePluginImage + ", mounting " + devicePluginDir + ") runs on the node"
	why := driverProblem(state, found)
	switch {
	case found.plugin == nil && why != "":
		return noPlugin + ", and one would register no GPUs: " + why
	case found.plugin == nil:
		return noPlugin + ": nvidia.com/gpu is not registered"
	}
	plugin := found.plugin.Namespace + "/" + found.plugin.Name
	switch {
	case why != "":
		return "device plugin pod " + plugin + " registers no GPUs: " + why
	case state.userDriver && !mountsHostPath(found.plugin, operatorDriverRoot):
		return "device plugin pod " + plugin + " registers no GPUs: the driver from " + found.driver.Namespace + "/" + found.driver.Name +
			" is under the host's " + operatorDriverRoot + ", which the plugin does not mount, and containerd runs runc on this node, so the plugin finds no NVML"
	}
	return ""
}

// isNvidiaDevicePlugin: a container of NVIDIA's device plugin image that
// mounts a hostPath volume of the kubelet's device-plugins directory, where
// it registers (NVIDIA's deployments/static/nvidia-device-plugin.yml).
func isNvidiaDevicePlugin(pod *corev1.Pod) bool {
	hostPaths := hostPathVolumes(pod)
	for _, c := range pod.Spec.Containers {
		if imageRepository(c.Image) != nvidiaDevicePluginImage {
			continue
		}
		for _, m := range c.VolumeMounts {
			if hostPaths[m.Name] == devicePluginDir && strings.TrimSuffix(m.MountPath, "/") == devicePluginDir {
				return true
			}
		}
	}
	return false
}

// isOperatorDriver: a container of the GPU Operator's driver image,
// privileged, that mounts the host's /run/nvidia at /run/nvidia with
// Bidirectional propagation, so the driver root it installs appears on the
// host (NVIDIA/gpu-operator assets/state-driver/0500_daemonset.yaml
// @ff54ddaa, nvidia-driver-ctr). The API server admits Bidirectional
// propagation only in privileged containers.
func isOperatorDriver(pod *corev1.Pod) bool {
	hostPaths := hostPathVolumes(pod)
	for _, c := range pod.Spec.Containers {
		if imageRepository(c.Image) != operatorDriverImage || c.SecurityContext == nil ||
			c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
			continue
		}
		for _, m := range c.VolumeMounts {
			if hostPaths[m.Name] == operatorRunDir && strings.TrimSuffix(m.MountPath, "/") == operatorRunDir &&
				m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional {
				return true
			}
		}
	}
	return false
}

// isOperatorToolkit: a privileged container of the GPU Operator's
// container toolkit image that mounts the host's /usr/local/nvidia, where
// it installs nvidia-container-runtime (NVIDIA/gpu-operator
// assets/state-container-toolkit/0500_daemonset.yaml @76b1f9a7,
// nvidia-container-toolkit-ctr).
func isOperatorToolkit(pod *corev1.Pod) bool {
	hostPaths := hostPathVolumes(pod)
	for _, c := range pod.Spec.Containers {
		if imageRepository(c.Image) != operatorToolkitImage || c.SecurityContext == nil ||
			c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
			continue
		}
		for _, m := range c.VolumeMounts {
			if hostPaths[m.Name] == operatorToolkitDir {
				return true
			}
		}
	}
	return false
}

// mountsHostPath: a container of NVIDIA's device plugin image in pod
// mounts the host directory path (anywhere in the container).
func mountsHostPath(pod *corev1.Pod, path string) bool {
	hostPaths := hostPathVolumes(pod)
	for _, c := range pod.Spec.Containers {
		if imageRepository(c.Image) != nvidiaDevicePluginImage {
			continue
		}
		for _, m := range c.VolumeMounts {
			if hostPaths[m.Name] == path {
				return true
			}
		}
	}
	return false
}

// hostPathVolumes maps pod's hostPath volumes to their host paths.
func hostPathVolumes(pod *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			out[v.Name] = strings.TrimSuffix(v.HostPath.Path, "/")
		}
	}
	return out
}

// imageRepository is image without its tag or digest.
func imageRepository(image string) string {
	repo, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return repo
}

// advertise patches the Node's status with the GPUs, as the kubelet's
// node status update does once the plugin registered them (extended
// resources are allocatable in full).
func (d *devicePlugin) advertise(ctx context.Context) error {
	patch := fmt.Sprintf(`{"status":{"capacity":{"nvidia.com/gpu":%q},"allocatable":{"nvidia.com/gpu":%q}}}`, d.gpus.String(), d.gpus.String())
	_, err := d.client.CoreV1().Nodes().Patch(ctx, d.node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	return err
}
