package azure

import (
	"encoding/base64"
	"strconv"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/gpu"
)

// gpuVariables are the node provisioning variables that depend on the
// VM size and the AKSNodeClass's spec.gpu.mode, with the provider's values
// (package gpu): GPU_NODE, CONFIG_GPU_DRIVER_IF_NEEDED, the driver's type,
// version and image tag suffix, and the containerd configuration, whose
// default runtime is nvidia-container-runtime exactly when the driver is
// installed (karpenter-provider-azure @352646f5
// pkg/providers/imagefamily/bootstrap/containerd.toml.gtpl:6-32). The node
// image reads them in cse_main.sh (ensureGPUDrivers when GPU_NODE=true) and
// cse_config.sh (configGPUDrivers, ensureContainerd) (Azure/AgentBaker
// parts/linux/cloud-init/artifacts).
func gpuVariables(size string, mode v1beta1.GPUMode) map[string]string {
	p := gpu.ProvisioningFor(size, mode)
	config := containerdConfig
	if p.ConfigDriver {
		config = containerdConfigNvidia
	}
	return map[string]string{
		"GPU_NODE":                    strconv.FormatBool(p.GPUNode),
		"CONFIG_GPU_DRIVER_IF_NEEDED": strconv.FormatBool(p.ConfigDriver),
		"GPU_DRIVER_VERSION":          p.Driver.Version,
		"GPU_DRIVER_TYPE":             p.Driver.Type,
		"GPU_IMAGE_SHA":               p.Driver.ImageSuffix,
		"CONTAINERD_CONFIG_CONTENT":   base64.StdEncoding.EncodeToString([]byte(config)),
	}
}

// containerdConfigNvidia is containerdConfig with nvidia-container-runtime
// as the default and untrusted runtime: the NVIDIA container toolkit the
// driver install brings hands containers the GPUs (the provider's template,
// containerd.toml.gtpl:6-18 @352646f5).
const containerdConfigNvidia = `version = 2
oom_score = 0
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "mcr.microsoft.com/oss/kubernetes/pause:3.6"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "nvidia-container-runtime"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-container-runtime]
      runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia-container-runtime.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
      SystemdCgroup = true
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.untrusted]
      runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.untrusted.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"
  [plugins."io.containerd.grpc.v1.cri".registry.headers]
    X-Meta-Source-Client = ["azure/aks"]
[metrics]
  address = "0.0.0.0:10257"
`
