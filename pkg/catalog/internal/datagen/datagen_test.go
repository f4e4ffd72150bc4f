package datagen

import (
	"testing"

	"github.com/karpfunc/karpfunc/pkg/catalog/internal/exclude"
)

func TestGPUOf(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		name string
		sku  sku
		want exclude.GPU
	}{
		{"no GPU facts", sku{}, exclude.NoGPU},
		{"a GPU count of 0 is no GPU", sku{GPUCount: n(0)}, exclude.NoGPU},
		{"supported maker from Karpenter's list", sku{GPUCount: n(1), GPUManufacturer: s("nvidia"), Source: map[string]string{"gpuManufacturer": "karpenter-supported-gpus"}}, exclude.SupportedGPU},
		{"maker guessed from the model", sku{GPUCount: n(1), GPUName: s("A10"), GPUManufacturer: s("nvidia"), Source: map[string]string{"gpuManufacturer": "gpuName"}}, exclude.UnsupportedGPU},
		{"count without a maker", sku{GPUCount: n(2)}, exclude.UnsupportedGPU},
		{"maker without a count", sku{GPUManufacturer: s("amd")}, exclude.GPUCountUnknown},
		{"model with a count of 0", sku{GPUCount: n(0), GPUName: s("V620")}, exclude.GPUCountUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := gpuOf(tc.sku); got != tc.want {
				t.Errorf("gpuOf = %v, want %v", got, tc.want)
			}
		})
	}
}
