package azure

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
)

// TestGPUVariables: an NVIDIA size in mode Driver is provisioned to
// install its driver with nvidia-container-runtime as containerd's default;
// mode None, AMD and CPU sizes install nothing and run runc.
func TestGPUVariables(t *testing.T) {
	for _, tc := range []struct {
		size    string
		mode    v1beta1.GPUMode
		install bool
		runtime string
	}{
		{"Standard_NC6s_v3", "", true, "nvidia-container-runtime"},
		{"Standard_NC6s_v3", v1beta1.GPUModeNone, false, "runc"},
		{"Standard_ND96isr_MI300X_v5", v1beta1.GPUModeNone, false, "runc"},
		{"Standard_D2s_v5", v1beta1.GPUModeDriver, false, "runc"},
	} {
		vars := gpuVariables(tc.size, tc.mode)
		want := map[bool]string{true: "true", false: "false"}[tc.install]
		if vars["GPU_NODE"] != want || vars["CONFIG_GPU_DRIVER_IF_NEEDED"] != want {
			t.Errorf("%s %q: GPU_NODE=%s CONFIG_GPU_DRIVER_IF_NEEDED=%s, want %s", tc.size, tc.mode, vars["GPU_NODE"], vars["CONFIG_GPU_DRIVER_IF_NEEDED"], want)
		}
		if (vars["GPU_DRIVER_TYPE"] != "" && vars["GPU_DRIVER_VERSION"] != "" && vars["GPU_IMAGE_SHA"] != "") != tc.install {
			t.Errorf("%s %q: driver %q %q %q", tc.size, tc.mode, vars["GPU_DRIVER_TYPE"], vars["GPU_DRIVER_VERSION"], vars["GPU_IMAGE_SHA"])
		}
		config, err := base64.StdEncoding.DecodeString(vars["CONTAINERD_CONFIG_CONTENT"])
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(config), `default_runtime_name = "`+tc.runtime+`"`) {
			t.Errorf("%s %q: containerd config without default runtime %s:\n%s", tc.size, tc.mode, tc.runtime, config)
		}
	}
}
