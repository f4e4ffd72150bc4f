package gpu_test

import (
	"errors"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/gpu"
)

// TestRegistryMatchesCatalog: every size with GPUs in every region of the
// embedded catalog is a registered GPU size of the same maker, and every
// size without is not, so the scheduler's counts and the node's driver
// agree.
func TestRegistryMatchesCatalog(t *testing.T) {
	for _, region := range catalog.Regions() {
		c, err := catalog.Default(region)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range c.InstanceTypes {
			maker := it.Labels[catalog.LabelSKUGPUManufacturer]
			sku, ok := gpu.Lookup(it.Name)
			if ok != (maker != "") || (ok && sku.Manufacturer != maker) {
				t.Errorf("%s %s: catalog GPU maker %q, registry %v %+v", region, it.Name, maker, ok, sku)
			}
		}
	}
}

func TestOffered(t *testing.T) {
	none, driver := v1beta1.GPUModeNone, v1beta1.GPUModeDriver
	for _, tc := range []struct {
		size, family string
		mode         v1beta1.GPUMode
		reason       string // "" offered
	}{
		{"Standard_D4s_v5", v1beta1.ImageFamilyAzureLinux, driver, ""},
		{"Standard_NC4as_T4_v3", v1beta1.ImageFamilyUbuntu, driver, ""},
		{"Standard_NC4as_T4_v3", v1beta1.ImageFamilyAzureLinux, driver, ""},
		{"Standard_NV12s_v3", v1beta1.ImageFamilyAzureLinux, none, "image family"},
		{"Standard_NV12s_v3", v1beta1.ImageFamilyUbuntu2404, driver, ""},
		{"Standard_ND96isr_MI300X_v5", v1beta1.ImageFamilyUbuntu, driver, "driver"},
		{"Standard_ND96isr_MI300X_v5", v1beta1.ImageFamilyUbuntu, none, ""},
		{"Standard_ND96isr_MI300X_v5", v1beta1.ImageFamilyAzureLinux, none, "image family"},
		{"standard_nv6_promo", v1beta1.ImageFamilyUbuntu, driver, ""},
	} {
		err := gpu.Offered(tc.size, tc.family, tc.mode)
		var notOffered *gpu.NotOfferedError
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("%s on %s, mode %s: %v; want offered", tc.size, tc.family, tc.mode, err)
		case tc.reason != "" && (!errors.As(err, &notOffered) || notOffered.Reason != tc.reason):
			t.Errorf("%s on %s, mode %s: %v; want not offered for %s", tc.size, tc.family, tc.mode, err, tc.reason)
		}
	}
}

func TestProvisioningFor(t *testing.T) {
	for _, tc := range []struct {
		size       string
		mode       v1beta1.GPUMode
		gpuNode    bool
		driverType string
		version    string
	}{
		{"Standard_NC24ads_A100_v4", "", true, "cuda-lts", "580.159.04"},
		{"Standard_NC4as_T4_v3", v1beta1.GPUModeDriver, true, "cuda-lts", "580.159.04"},
		{"Standard_NV36ads_A10_v5", "", true, "grid", "570.211.01"},
		{"Standard_NC8ads_A10_v4", "", true, "grid", "570.211.01"},
		{"Standard_NC72ds_xl_RTXPRO6000BSE_v6", "", true, "grid-v20", "595.58.03"},
		{"Standard_NC24r", "", true, "cuda", "470.82.01"},
		{"Standard_NC4as_T4_v3", v1beta1.GPUModeNone, false, "", ""},
		{"Standard_ND96isr_MI300X_v5", "", false, "", ""},
		{"Standard_D4s_v5", "", false, "", ""},
	} {
		p := gpu.ProvisioningFor(tc.size, tc.mode)
		if p.GPUNode != tc.gpuNode || p.ConfigDriver != tc.gpuNode || p.Driver.Type != tc.driverType || p.Driver.Version != tc.version {
			t.Errorf("%s mode %q: %+v; want GPU node %v, driver %s %s", tc.size, tc.mode, p, tc.gpuNode, tc.driverType, tc.version)
		}
		if tc.gpuNode && p.Driver.ImageSuffix == "" {
			t.Errorf("%s: no image suffix", tc.size)
		}
	}
}
