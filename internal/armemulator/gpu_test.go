package armemulator

import (
	"encoding/base64"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
		usable   bool
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
		case (state.why == "") != tc.usable:
			t.Errorf("%s: usable %v (%q), want %v", tc.name, state.why == "", state.why, tc.usable)
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
