package armemulator

import (
	"encoding/base64"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestReadGPU: the node image's GPU provisioning, by AgentBaker's rules.
func TestReadGPU(t *testing.T) {
	nvidiaRuntime := base64.StdEncoding.EncodeToString([]byte(`default_runtime_name = "nvidia-container-runtime"`))
	runc := base64.StdEncoding.EncodeToString([]byte(`default_runtime_name = "runc"`))
	t4 := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	driver := func(typ, version, sha, config string) map[string]string {
		return map[string]string{"GPU_NODE": "true", "CONFIG_GPU_DRIVER_IF_NEEDED": "true", "GPU_DRIVER_TYPE": typ,
			"GPU_DRIVER_VERSION": version, "GPU_IMAGE_SHA": sha, "CONTAINERD_CONFIG_CONTENT": config}
	}
	for _, tc := range []struct {
		name     string
		vars     map[string]string
		size     string
		capacity corev1.ResourceList
		usable   bool   // usable with a device plugin alone
		fails    string // provisioning fails with this
	}{
		{"cuda-lts on T4", driver("cuda-lts", "580.159.04", "20260629214430", nvidiaRuntime), "Standard_NC4as_T4_v3", t4, true, ""},
		{"grid on A10", driver("grid", "570.211.01", "20260522192315", nvidiaRuntime), "Standard_NV36ads_A10_v5", t4, true, ""},
		{"cuda on A10", driver("cuda-lts", "580.159.04", "20260629214430", nvidiaRuntime), "Standard_NV36ads_A10_v5", t4, false, "does not fit"},
		{"unpublished image", driver("cuda-lts", "580.1.1", "20260629214430", nvidiaRuntime), "Standard_NC4as_T4_v3", t4, false, "not published"},
		{"driver on a CPU size", driver("cuda-lts", "580.159.04", "20260629214430", nvidiaRuntime), "Standard_D4s_v5", nil, false, "no NVIDIA GPUs"},
		{"runc default", driver("cuda-lts", "580.159.04", "20260629214430", runc), "Standard_NC4as_T4_v3", t4, false, ""},
		{"no driver", map[string]string{"GPU_NODE": "false"}, "Standard_NC4as_T4_v3", t4, false, ""},
	} {
		state, err := readGPU(tc.vars, tc.size, tc.capacity)
		switch {
		case tc.fails != "":
			if err == nil || !strings.Contains(err.Error(), tc.fails) {
				t.Errorf("%s: err %v, want one saying %q", tc.name, err, tc.fails)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case (state.why == "" && !state.userDriver) != tc.usable:
			t.Errorf("%s: usable %v (%q, needs a user driver %v), want %v", tc.name, state.why == "", state.why, state.userDriver, tc.usable)
		case tc.vars["GPU_NODE"] != "true" && !state.userDriver:
			t.Errorf("%s: GPU_NODE is not true on a GPU size, but the GPUs do not wait for a user's driver", tc.name)
		}
	}
}

func TestIsNvidiaDevicePlugin(t *testing.T) {
	pod := func(image, hostPath, mountPath string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Image: image, VolumeMounts: []corev1.VolumeMount{{Name: "dp", MountPath: mountPath}}}},
			Volumes:    []corev1.Volume{{Name: "dp", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostPath}}}},
		}}
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{pod("nvcr.io/nvidia/k8s-device-plugin:v0.17.1", devicePluginDir, devicePluginDir), true},
		{pod("nvcr.io/nvidia/k8s-device-plugin@sha256:abc", devicePluginDir, devicePluginDir), true},
		{pod("nvcr.io/nvidia/k8s-device-plugin:v0.17.1", "/tmp", devicePluginDir), false},
		{pod("busybox", devicePluginDir, devicePluginDir), false},
	} {
		if got := isNvidiaDevicePlugin(tc.pod); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.pod.Spec.Containers[0].Image, got, tc.want)
		}
	}
}

// TestGPUsBlocked: which pods on a node make its device plugin register
// its GPUs, with the AKS driver (GPU_NODE=true) and with the GPU
// Operator's driver and container toolkit (GPU_NODE=false).
func TestGPUsBlocked(t *testing.T) {
	hostPath := func(name, path string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}
	}
	running := func(name string, spec corev1.PodSpec) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-operator", Name: name}, Spec: spec,
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	plugin := func(driverRoot bool) corev1.Pod {
		spec := corev1.PodSpec{
			Containers: []corev1.Container{{Image: "nvcr.io/nvidia/k8s-device-plugin:v0.17.1",
				VolumeMounts: []corev1.VolumeMount{{Name: "dp", MountPath: devicePluginDir}}}},
			Volumes: []corev1.Volume{hostPath("dp", devicePluginDir)},
		}
		if driverRoot {
			spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "root", MountPath: "/driver-root"})
			spec.Volumes = append(spec.Volumes, hostPath("root", operatorDriverRoot))
		}
		return running("nvidia-device-plugin-daemonset-x", spec)
	}
	driver := func(image string, privileged bool, propagation corev1.MountPropagationMode) corev1.Pod {
		return running("nvidia-driver-daemonset-x", corev1.PodSpec{
			Containers: []corev1.Container{{Image: image, SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
				VolumeMounts: []corev1.VolumeMount{{Name: "run", MountPath: operatorRunDir, MountPropagation: &propagation}}}},
			Volumes: []corev1.Volume{hostPath("run", operatorRunDir)},
		})
	}
	toolkit := func(privileged bool) corev1.Pod {
		return running("nvidia-container-toolkit-daemonset-x", corev1.PodSpec{
			Containers: []corev1.Container{{Image: "nvcr.io/nvidia/k8s/container-toolkit:v1.17.8-ubuntu20.04", SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
				VolumeMounts: []corev1.VolumeMount{{Name: "install", MountPath: operatorToolkitDir}}}},
			Volumes: []corev1.Volume{hostPath("install", operatorToolkitDir)},
		})
	}
	operatorDriver := driver("nvcr.io/nvidia/driver:570.195.03-ubuntu22.04", true, corev1.MountPropagationBidirectional)
	pending := operatorDriver
	pending.Status.Phase = corev1.PodPending
	aks := gpuState{driver: true}
	none := gpuState{userDriver: true}
	for _, tc := range []struct {
		name  string
		state gpuState
		pods  []corev1.Pod
		want  string // "" advertises; otherwise part of the reason
	}{
		{"AKS driver and plugin", aks, []corev1.Pod{plugin(false)}, ""},
		{"AKS driver, no plugin", aks, nil, "no NVIDIA device plugin pod"},
		{"AKS driver, runc default", gpuState{driver: true, why: "runtime"}, []corev1.Pod{plugin(false)}, "registers no GPUs: runtime"},
		{"none: nothing", none, nil, "one would register no GPUs: GPU_NODE is not true"},
		{"none: plugin only", none, []corev1.Pod{plugin(true)}, "registers no GPUs: GPU_NODE is not true"},
		{"none: driver and toolkit only", none, []corev1.Pod{operatorDriver, toolkit(true)}, "nvidia.com/gpu is not registered"},
		{"none: driver, toolkit and plugin", none, []corev1.Pod{operatorDriver, toolkit(true), plugin(true)}, ""},
		{"none: driver and plugin, no toolkit", none, []corev1.Pod{operatorDriver, plugin(true)}, "no GPU Operator container toolkit pod"},
		{"none: toolkit not privileged", none, []corev1.Pod{operatorDriver, toolkit(false), plugin(true)}, "no GPU Operator container toolkit pod"},
		{"none: plugin without the driver root", none, []corev1.Pod{operatorDriver, toolkit(true), plugin(false)}, "does not mount"},
		{"none: driver pod pending", none, []corev1.Pod{pending, toolkit(true), plugin(true)}, "no GPU Operator driver pod"},
		{"none: driver not privileged", none, []corev1.Pod{driver("nvcr.io/nvidia/driver:570.195.03-ubuntu22.04", false, corev1.MountPropagationBidirectional), toolkit(true), plugin(true)}, "no GPU Operator driver pod"},
		{"none: driver without Bidirectional", none, []corev1.Pod{driver("nvcr.io/nvidia/driver:570.195.03-ubuntu22.04", true, corev1.MountPropagationHostToContainer), toolkit(true), plugin(true)}, "no GPU Operator driver pod"},
		{"none: another image", none, []corev1.Pod{driver("busybox", true, corev1.MountPropagationBidirectional), toolkit(true), plugin(true)}, "no GPU Operator driver pod"},
	} {
		got := gpusBlocked(tc.state, tc.pods)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
