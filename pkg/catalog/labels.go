package catalog

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Labels the Azure Karpenter provider puts on nodes, with the same names so
// NodePools written for NAP select the same SKUs.
const (
	LabelSKUName                  = "karpenter.azure.com/sku-name"
	LabelSKUFamily                = "karpenter.azure.com/sku-family"
	LabelSKUSeries                = "karpenter.azure.com/sku-series"
	LabelSKUVersion               = "karpenter.azure.com/sku-version"
	LabelSKUCPU                   = "karpenter.azure.com/sku-cpu"
	LabelSKUMemory                = "karpenter.azure.com/sku-memory" // MiB
	LabelSKUGPUName               = "karpenter.azure.com/sku-gpu-name"
	LabelSKUGPUManufacturer       = "karpenter.azure.com/sku-gpu-manufacturer"
	LabelSKUGPUCount              = "karpenter.azure.com/sku-gpu-count"
	LabelSKUAcceleratedNetworking = "karpenter.azure.com/sku-networking-accelerated"
	LabelSKUStoragePremiumCapable = "karpenter.azure.com/sku-storage-premium-capable"
)

// Extended resources for GPUs, as the device plugins name them.
const (
	ResourceNvidiaGPU corev1.ResourceName = "nvidia.com/gpu"
	ResourceAMDGPU    corev1.ResourceName = "amd.com/gpu"
)

// SKULabels are the karpenter.azure.com labels an instance type may carry.
// When a type lacks one, its Requirements say DoesNotExist, so a pod asking
// for sku-gpu-name=A100 never lands on a CPU-only size.
var SKULabels = []string{
	LabelSKUName, LabelSKUFamily, LabelSKUSeries, LabelSKUVersion, LabelSKUCPU, LabelSKUMemory,
	LabelSKUGPUName, LabelSKUGPUManufacturer, LabelSKUGPUCount,
	LabelSKUAcceleratedNetworking, LabelSKUStoragePremiumCapable, LabelSKUStorageEphemeralOSMaxSize,
}

func init() {
	// Karpenter lets well-known labels be undefined on a NodePool and still be
	// narrowed by pods; cloud providers register theirs the same way.
	karpv1.WellKnownLabels.Insert(SKULabels...)
}

// skuFacts are what labels are derived from.
type skuFacts struct {
	name, architecture             string
	vcpus, memoryMiB, gpuCount     int64
	gpuName, gpuManufacturer       string
	acceleratedNetworking, premium *bool
	region                         string
}

func deriveLabels(f skuFacts) map[string]string {
	labels := map[string]string{
		corev1.LabelInstanceTypeStable: f.name,
		corev1.LabelArchStable:         f.architecture,
		corev1.LabelOSStable:           "linux",
		LabelSKUName:                   f.name,
		LabelSKUCPU:                    strconv.FormatInt(f.vcpus, 10),
		LabelSKUMemory:                 strconv.FormatInt(f.memoryMiB, 10),
		LabelSKUGPUCount:               strconv.FormatInt(f.gpuCount, 10),
	}
	if f.region != "" {
		labels[corev1.LabelTopologyRegion] = f.region
	}
	if size, ok := ParseSizeName(f.name); ok {
		labels[LabelSKUFamily] = size.Family
		labels[LabelSKUSeries] = size.Series()
		labels[LabelSKUVersion] = size.Version
		// The provider names the GPU as the size does (A100), not by the
		// marketing model (A100-80GB); keep its values.
		if size.Accelerator != "" {
			f.gpuName = size.Accelerator
		}
	}
	if f.gpuCount > 0 {
		if f.gpuName != "" {
			labels[LabelSKUGPUName] = f.gpuName
		}
		if f.gpuManufacturer != "" {
			labels[LabelSKUGPUManufacturer] = f.gpuManufacturer
		}
	}
	if f.acceleratedNetworking != nil {
		labels[LabelSKUAcceleratedNetworking] = fmt.Sprint(*f.acceleratedNetworking)
	}
	if f.premium != nil {
		labels[LabelSKUStoragePremiumCapable] = fmt.Sprint(*f.premium)
	}
	return labels
}
