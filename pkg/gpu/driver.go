package gpu

import (
	"strings"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
)

// Driver is the NVIDIA driver the node's provisioning installs: the
// container image mcr.microsoft.com/aks/aks-gpu-<Type>:<Version>-<ImageSuffix>
// on Ubuntu (Azure/AgentBaker parts/linux/cloud-init/artifacts/cse_helpers.sh
// NVIDIA_DRIVER_IMAGE and NVIDIA_DRIVER_IMAGE_TAG).
type Driver struct {
	// Type is GPU_DRIVER_TYPE: cuda-lts, cuda, grid or grid-v20.
	Type string
	// Version is GPU_DRIVER_VERSION, ImageSuffix GPU_IMAGE_SHA.
	Version, ImageSuffix string
}

// Image is the driver's container image reference.
func (d Driver) Image() string {
	return "mcr.microsoft.com/aks/aks-gpu-" + d.Type + ":" + d.Version + "-" + d.ImageSuffix
}

// The drivers the provider pins, each with the image tag AgentBaker
// publishes (karpenter-provider-azure @352646f5 pkg/utils/gpu.go:33-57,
// kept by hand in step with Azure/AgentBaker parts/common/components.json
// GPUContainerImages).
var (
	// cudaLTS is the R580 LTS CUDA driver: every CUDA size but NCv1. The
	// AKS GPU node image prebakes this branch, so an older CUDA driver on
	// top would mismatch its user-space libraries.
	cudaLTS = Driver{Type: "cuda-lts", Version: "580.159.04", ImageSuffix: "20260629214430"}
	// cudaNCv1 is NCv1's (K80) legacy R470 driver. The provider pairs it
	// with the CUDA LTS image suffix (GetAKSGPUImageSHA has no NCv1 case);
	// karpfunc sets the same values. NCv1 is retired and in no catalog.
	cudaNCv1 = Driver{Type: "cuda", Version: "470.82.01", ImageSuffix: "20260629214430"}
	// grid is the converged CUDA/GRID driver the A10 sizes need: a plain
	// CUDA driver fails to install on them.
	grid = Driver{Type: "grid", Version: "570.211.01", ImageSuffix: "20260522192315"}
	// gridV20 is the R595 GRID driver of the RTX PRO 6000 Blackwell sizes.
	gridV20 = Driver{Type: "grid-v20", Version: "595.58.03", ImageSuffix: "20260609172331"}
)

// gridSizes need the converged GRID driver (gpu.go:193-203 @352646f5; the
// provider cites Azure/azhpc-extensions NvidiaGPU/resources.json).
var gridSizes = map[string]bool{
	"standard_nv6ads_a10_v5": true, "standard_nv12ads_a10_v5": true, "standard_nv18ads_a10_v5": true,
	"standard_nv36ads_a10_v5": true, "standard_nv72ads_a10_v5": true, "standard_nv36adms_a10_v5": true,
	"standard_nc8ads_a10_v4": true, "standard_nc16ads_a10_v4": true, "standard_nc32ads_a10_v4": true,
}

// DriverFor is the driver the provider picks for size (GetGPUDriverType,
// GetGPUDriverVersion, GetAKSGPUImageSHA; gpu.go:110-185 @352646f5): GRID
// v20 for the RTX PRO 6000 BSE sizes, GRID for the A10 sizes, the legacy
// CUDA driver for NCv1 (Standard_NC<n>[r], no _v), CUDA LTS otherwise. It
// answers for any size; callers ask only about NVIDIA ones.
func DriverFor(size string) Driver {
	name := normalize(size)
	switch {
	case strings.HasSuffix(name, "_rtxpro6000bse_v6"):
		return gridV20
	case gridSizes[name]:
		return grid
	case strings.HasPrefix(name, "standard_nc") && !strings.Contains(name, "_v"):
		return cudaNCv1
	}
	return cudaLTS
}

// Provisioning are the GPU variables of a node's provisioning, as the
// provider sets them (launchtemplate.go:183-187 and
// imagefamily/bootstrap/aksbootstrap.go:309-322 @352646f5): on an NVIDIA
// size whose class's mode is not None, GPU_NODE and
// CONFIG_GPU_DRIVER_IF_NEEDED are true and the driver is named; otherwise
// both are false and the driver variables empty, so the node image installs
// no driver, starts no fabric manager and runs containers with runc.
type Provisioning struct {
	GPUNode, ConfigDriver bool
	Driver                Driver
}

// ProvisioningFor is Provisioning for size under mode.
func ProvisioningFor(size string, mode v1beta1.GPUMode) Provisioning {
	sku, ok := Lookup(size)
	if !ok || sku.Manufacturer != NVIDIA || mode == v1beta1.GPUModeNone {
		return Provisioning{}
	}
	return Provisioning{GPUNode: true, ConfigDriver: true, Driver: DriverFor(size)}
}
