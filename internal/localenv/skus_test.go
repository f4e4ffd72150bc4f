package localenv

import (
	"testing"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// TestResourceSKUsLocalDisks: the emulator's SKU list carries the local
// disks the catalog knows, under ARM's capability names, so the emulator
// judges an ephemeral OS disk from them; sizes the catalog knows nothing
// about list none.
func TestResourceSKUsLocalDisks(t *testing.T) {
	cat, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]map[string]string{}
	for _, sku := range ResourceSKUs(cat) {
		caps := map[string]string{}
		for _, c := range sku.Capabilities {
			caps[*c.Name] = *c.Value
		}
		byName[*sku.Name] = caps
	}
	for _, tc := range []struct {
		size string
		want map[string]string // "" = absent
	}{
		{"Standard_D2s_v3", map[string]string{"EphemeralOSDiskSupported": "True", "CachedDiskBytes": "53687091200", "MaxResourceVolumeMB": "16384", "NvmeDiskSizeInMiB": ""}},
		{"Standard_D128ds_v6", map[string]string{"EphemeralOSDiskSupported": "True", "NvmeDiskSizeInMiB": "7208825", "SupportedEphemeralOSDiskPlacements": "NvmeDisk"}},
		{"Standard_D2_v3", map[string]string{"EphemeralOSDiskSupported": "False"}},
		{"Standard_D4s_v5", map[string]string{"EphemeralOSDiskSupported": "", "CachedDiskBytes": ""}},
	} {
		caps, ok := byName[tc.size]
		if !ok {
			t.Fatalf("%s not in the SKU list", tc.size)
		}
		for name, want := range tc.want {
			if got := caps[name]; got != want {
				t.Errorf("%s: capability %s = %q, want %q", tc.size, name, got, want)
			}
		}
	}
}
