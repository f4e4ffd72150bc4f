// Package gpu knows which Azure VM sizes carry GPUs that AKS node images
// support, who makes them, on which operating systems AKS supports them, and
// which NVIDIA driver the node's provisioning installs on each. It decides,
// per AKSNodeClass spec.gpu.mode, which GPU sizes a NodePool may launch and
// what the node's provisioning variables say about GPUs.
//
// Invariants (the Azure Karpenter provider's, karpenter-provider-azure
// @352646f5 pkg/utils/gpu.go and pkg/utils/supported-gpus.yaml):
//   - a size is a GPU size only when it is in the registry below; a size
//     with GPUs that is not is never offered (the catalog leaves it out);
//   - the driver is installed only on NVIDIA sizes and only in mode Driver
//     (the default); AMD sizes never get a managed driver;
//   - mode Driver offers only GPU sizes whose driver AKS installs, so a GPU
//     pod fails to schedule rather than land on a GPU without a driver;
//     mode None offers every registered GPU size and installs nothing.
//
// Lookups ignore case and a trailing "_Promo", as the provider's do.
package gpu

import (
	"fmt"
	"strings"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
)

// Manufacturers, as the karpenter.azure.com/sku-gpu-manufacturer label
// writes them.
const (
	NVIDIA = "nvidia"
	AMD    = "amd"
)

// Operating systems a GPU size is supported on, as the provider's registry
// names them.
const (
	OSUbuntu      = "ubuntu"
	OSAzureLinux  = "azurelinux"  // Azure Linux 2.0
	OSAzureLinux3 = "azurelinux3" // Azure Linux 3.0
)

// SKU is one registered GPU size.
type SKU struct {
	Manufacturer string
	// OS are the Linux operating systems AKS supports the size on.
	OS []string
}

// series are the registered sizes by series, each with its maker and
// operating systems (Windows, which karpfunc does not launch, left out).
// The provider's registry is the source (supported-gpus.yaml @352646f5,
// which groups them the same way); TestRegistryMatchesCatalog checks every
// GPU size of the embedded catalog is here with the same maker.
var series = []struct {
	manufacturer string
	os           []string
	sizes        []string
}{
	// A10 (NCads_A10_v4, NVads_A10_v5), A100 (NCads_A100_v4, NDasr_v4,
	// NDamsr_A100_v4), H100/H200 (NCads_H100_v5, ND*_H100_v5, ND*_H200_v5).
	{NVIDIA, []string{OSUbuntu, OSAzureLinux3}, []string{
		"standard_nc8ads_a10_v4", "standard_nc16ads_a10_v4", "standard_nc32ads_a10_v4",
		"standard_nc24ads_a100_v4", "standard_nc48ads_a100_v4", "standard_nc96ads_a100_v4",
		"standard_nc40ads_h100_v5", "standard_nc80adis_h100_v5",
		"standard_nd96asr_v4", "standard_nd112asr_a100_v4", "standard_nd120asr_a100_v4",
		"standard_nv6ads_a10_v5", "standard_nv12ads_a10_v5", "standard_nv18ads_a10_v5",
		"standard_nv36ads_a10_v5", "standard_nv36adms_a10_v5", "standard_nv72ads_a10_v5",
		"standard_nd96amsr_a100_v4", "standard_nd112amsr_a100_v4", "standard_nd120amsr_a100_v4",
		"standard_nd96isr_h100_v5", "standard_nd96is_h100_v5", "standard_nd96is_noib_h100_v5", "standard_nd96is_flex_h100_v5",
		"standard_nd96isf_h100_v5", "standard_nd96isrf_h100_v5",
		"standard_nd96ams_v4", "standard_nd96ams_a100_flex_v4", "standard_nd96ams_a100_v4", "standard_nd96amsf_a100_v4",
		"standard_nd96amsrf_a100_v4",
		"standard_nd96isr_h200_v5", "standard_nd96is_h200_v5", "standard_nd96isf_h200_v5", "standard_nd96isrf_h200_v5",
	}},
	// T4 (NCas_T4_v3), V100 (NCs_v3, NDrs_v2, NDs_v3): Azure Linux 2.0 too.
	{NVIDIA, []string{OSUbuntu, OSAzureLinux, OSAzureLinux3}, []string{
		"standard_nc4as_t4_v3", "standard_nc8as_t4_v3", "standard_nc16as_t4_v3", "standard_nc64as_t4_v3",
		"standard_nc6s_v3", "standard_nc12s_v3", "standard_nc24s_v3", "standard_nc24rs_v3",
		"standard_nd40rs_v2", "standard_nd40s_v3",
	}},
	// Older series (NC K80, NCs_v2 P100, NDs P40, NV and NVs_v3 M60) and
	// the newest (GB200/GB300, RTX PRO 6000 BSE): Ubuntu only.
	{NVIDIA, []string{OSUbuntu}, []string{
		"standard_nc6", "standard_nc12", "standard_nc24", "standard_nc24r",
		"standard_nc6s_v2", "standard_nc12s_v2", "standard_nc24s_v2", "standard_nc24rs_v2",
		"standard_nd6s", "standard_nd12s", "standard_nd24s", "standard_nd24rs",
		"standard_nv6", "standard_nv12", "standard_nv24", "standard_nv24r",
		"standard_nv12s_v3", "standard_nv24s_v3", "standard_nv48s_v3",
		"standard_nd128isr_ndr_gb200_v6", "standard_nd128isr_gb300_v6",
		"standard_nc24lds_xl_rtxpro6000bse_v6", "standard_nc36ds_xl_rtxpro6000bse_v6", "standard_nc36lds_xl_rtxpro6000bse_v6",
		"standard_nc72ds_xl_rtxpro6000bse_v6", "standard_nc72lds_xl_rtxpro6000bse_v6", "standard_nc144ds_xl_rtxpro6000bse_v6",
		"standard_nc144lds_xl_rtxpro6000bse_v6", "standard_nc288ds_xl_rtxpro6000bse_v6", "standard_nc288lds_xl_rtxpro6000bse_v6",
	}},
	// AMD: Radeon PRO V710 (NVads_V710_v5) and Instinct MI300X (ND_MI300X_v5).
	{AMD, []string{OSUbuntu}, []string{
		"standard_nv4ads_v710_v5", "standard_nv8ads_v710_v5", "standard_nv12ads_v710_v5", "standard_nv24ads_v710_v5",
		"standard_nv28adms_v710_v5", "standard_nd96isr_mi300x_v5", "standard_nd96is_mi300x_v5",
	}},
}

var registry = func() map[string]SKU {
	out := map[string]SKU{}
	for _, s := range series {
		for _, size := range s.sizes {
			out[size] = SKU{Manufacturer: s.manufacturer, OS: s.os}
		}
	}
	return out
}()

func normalize(size string) string {
	return strings.TrimSuffix(strings.ToLower(size), "_promo")
}

// Lookup returns the registered GPU size named size.
func Lookup(size string) (SKU, bool) {
	sku, ok := registry[normalize(size)]
	return sku, ok
}

// IsGPU says whether size is a registered GPU size (any maker).
func IsGPU(size string) bool {
	_, ok := Lookup(size)
	return ok
}

// DriverInstallable says whether AKS installs a GPU driver on size: the
// NVIDIA sizes (the provider's IsDriverInstallSupported).
func DriverInstallable(size string) bool {
	sku, ok := Lookup(size)
	return ok && sku.Manufacturer == NVIDIA
}

// Mode is spec.gpu.mode with its default: Driver when unset.
func Mode(spec *v1beta1.AKSNodeClassSpec) v1beta1.GPUMode {
	if spec == nil || spec.GPU == nil || spec.GPU.Mode == nil {
		return v1beta1.GPUModeDriver
	}
	return *spec.GPU.Mode
}

// imageFamilyOS are the registry's operating systems an image family may
// boot: Ubuntu families need "ubuntu"; AzureLinux takes either Azure Linux
// entry, as the provider's isInstanceTypeSupportedByImageFamily does
// (pkg/providers/instancetype/instancetypes.go:353-367 @352646f5).
func imageFamilyOS(family string) []string {
	switch family {
	case v1beta1.ImageFamilyAzureLinux:
		return []string{OSAzureLinux, OSAzureLinux3}
	case v1beta1.ImageFamilyUbuntu, v1beta1.ImageFamilyUbuntu2204, v1beta1.ImageFamilyUbuntu2404, "":
		return []string{OSUbuntu}
	}
	return nil
}

// NotOfferedError says why a GPU size is not offered to a NodePool.
type NotOfferedError struct {
	Size, ImageFamily string
	Mode              v1beta1.GPUMode
	// Reason is "image family" or "driver".
	Reason string
}

func (e *NotOfferedError) Error() string {
	if e.Reason == "driver" {
		return fmt.Sprintf("%s: AKS installs no driver for its GPUs and the AKSNodeClass's spec.gpu.mode is %s; "+
			"set spec.gpu.mode to None and install the driver and device plugin yourself to use it", e.Size, e.Mode)
	}
	return fmt.Sprintf("%s: AKS does not support its GPUs on image family %s", e.Size, e.ImageFamily)
}

// Offered says whether a NodePool whose AKSNodeClass has image family
// family and GPU mode mode may launch size; nil for every non-GPU size. The
// provider's filters (instancetypes.go:353-367 and :416-429 @352646f5): a
// GPU size must be supported on the family's OS, and in mode Driver its
// driver must be one AKS installs.
func Offered(size, family string, mode v1beta1.GPUMode) error {
	sku, ok := Lookup(size)
	if !ok {
		return nil
	}
	supported := false
	for _, os := range imageFamilyOS(family) {
		for _, have := range sku.OS {
			supported = supported || os == have
		}
	}
	if !supported {
		return &NotOfferedError{Size: size, ImageFamily: family, Mode: mode, Reason: "image family"}
	}
	if mode != v1beta1.GPUModeNone && !DriverInstallable(size) {
		return &NotOfferedError{Size: size, ImageFamily: family, Mode: mode, Reason: "driver"}
	}
	return nil
}
