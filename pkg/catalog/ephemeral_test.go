package catalog_test

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// TestEphemeralOSDisk: the embedded catalog's sizes get the Azure
// provider's ephemeral OS disk placement and max-size label (the public
// facts give the local disks of a few sizes; the rest get a managed disk),
// and an OS disk larger than the local disk in GiB stays managed.
func TestEphemeralOSDisk(t *testing.T) {
	cat, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		size      string
		osDiskGB  int32
		wantLabel string // "" = absent
		want      string // "" = managed disk
	}{
		{"Standard_D2s_v3", 50, "53", catalog.PlacementCacheDisk},
		// 53 GB by the provider's rule, but the cache disk is 50 GiB and
		// ARM refuses more than that.
		{"Standard_D2s_v3", 51, "53", ""},
		{"Standard_D2s_v3", 128, "53", ""},
		{"Standard_F16s_v2", 128, "274", catalog.PlacementCacheDisk},
		{"Standard_F16s_v2", 257, "274", ""},
		{"Standard_E4d_v5", 128, "161", catalog.PlacementResourceDisk},
		{"Standard_D128ds_v6", 2048, "7559", catalog.PlacementNvmeDisk},
		{"Standard_D16plds_v5", 128, "429", catalog.PlacementCacheDisk},
		{"Standard_D2_v3", 30, "", ""},   // EphemeralOSDiskSupported False
		{"Standard_D4s_v5", 30, "", ""},  // local disks unknown
		{"Standard_D2as_v6", 30, "", ""}, // no local disk
		{"Standard_D64s_v3", 1600, "1717", catalog.PlacementCacheDisk},
	} {
		it, ok := cat.Get(tc.size)
		if !ok {
			t.Fatalf("%s not in the eastus catalog", tc.size)
		}
		label, has := it.Labels[catalog.LabelSKUStorageEphemeralOSMaxSize]
		if label != tc.wantLabel || has != (tc.wantLabel != "") {
			t.Errorf("%s: label %s = %q (present %v), want %q", tc.size, catalog.LabelSKUStorageEphemeralOSMaxSize, label, has, tc.wantLabel)
		}
		if got := it.EphemeralOSDiskPlacement(tc.osDiskGB); got != tc.want {
			t.Errorf("%s with a %d GB OS disk: placement %q, want %q", tc.size, tc.osDiskGB, got, tc.want)
		}
	}
}

// TestEphemeralOSDiskMax: the provider's priority NvmeDisk > CacheDisk >
// ResourceDisk and its rounding down to GB of 10^9 bytes.
func TestEphemeralOSDiskMax(t *testing.T) {
	for _, tc := range []struct {
		name      string
		disks     catalog.LocalDisks
		wantGB    int64
		wantPlace string
	}{
		{"not supported", catalog.LocalDisks{CachedDiskBytes: 1 << 40}, 0, ""},
		{"NVMe listed beats cache", catalog.LocalDisks{EphemeralOSDiskSupported: true, NvmePlacement: true, NvmeDiskMiB: 1 << 20, CachedDiskBytes: 1 << 30}, 1099, catalog.PlacementNvmeDisk},
		{"NVMe not listed", catalog.LocalDisks{EphemeralOSDiskSupported: true, NvmeDiskMiB: 1 << 20, CachedDiskBytes: 1 << 30}, 1, catalog.PlacementCacheDisk},
		{"cache beats resource", catalog.LocalDisks{EphemeralOSDiskSupported: true, CachedDiskBytes: 53687091200, ResourceDiskMiB: 1 << 20}, 53, catalog.PlacementCacheDisk},
		{"resource only", catalog.LocalDisks{EphemeralOSDiskSupported: true, ResourceDiskMiB: 153600}, 161, catalog.PlacementResourceDisk},
		{"no local disk", catalog.LocalDisks{EphemeralOSDiskSupported: true}, 0, ""},
	} {
		gb, placement := tc.disks.EphemeralOSDiskMax()
		if gb != tc.wantGB || placement != tc.wantPlace {
			t.Errorf("%s: (%d, %q), want (%d, %q)", tc.name, gb, placement, tc.wantGB, tc.wantPlace)
		}
	}
}

// TestLocalDisksFromARM: a refreshed catalog reads the local-disk and
// encryption-at-host capabilities of the Resource SKUs API.
func TestLocalDisksFromARM(t *testing.T) {
	capability := func(name, value string) *armcompute.ResourceSKUCapabilities {
		return &armcompute.ResourceSKUCapabilities{Name: &name, Value: &value}
	}
	name, kind, region := "Standard_D128ds_v6", "virtualMachines", "eastus"
	facts, ok := catalog.SKUFactsFromARM(&armcompute.ResourceSKU{Name: &name, ResourceType: &kind, Locations: []*string{&region},
		Capabilities: []*armcompute.ResourceSKUCapabilities{
			capability("EphemeralOSDiskSupported", "True"), capability("NvmeDiskSizeInMiB", "7208825"),
			capability("SupportedEphemeralOSDiskPlacements", "ResourceDisk,NvmeDisk"), capability("EncryptionAtHostSupported", "False"),
		}}, region)
	if !ok {
		t.Fatal("SKU not read")
	}
	want := catalog.LocalDisks{EphemeralOSDiskSupported: true, NvmeDiskMiB: 7208825, NvmePlacement: true}
	if facts.LocalDisks == nil || *facts.LocalDisks != want {
		t.Errorf("LocalDisks = %+v, want %+v", facts.LocalDisks, want)
	}
	if facts.EncryptionAtHostSupported == nil || *facts.EncryptionAtHostSupported {
		t.Errorf("EncryptionAtHostSupported = %v, want false", facts.EncryptionAtHostSupported)
	}
}

// TestLocalDisksInFile: a catalog file's localDisks give the label and the
// placement; a negative size is refused by field.
func TestLocalDisksInFile(t *testing.T) {
	const file = `{"region":"test","zones":["test-1"],"instanceTypes":[{"name":"Standard_D2s_v3","architecture":"amd64",
	 "capacity":{"cpu":"2","memory":"8Gi"},"localDisks":{"ephemeralOSDiskSupported":true,"cachedDiskBytes":%s,"resourceDiskMiB":16384},
	 "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.1}]}]}`
	cat, err := catalog.Parse([]byte(strings.Replace(file, "%s", "53687091200", 1)))
	if err != nil {
		t.Fatal(err)
	}
	it := cat.InstanceTypes[0]
	if got := it.Labels[catalog.LabelSKUStorageEphemeralOSMaxSize]; got != "53" {
		t.Errorf("label = %q, want 53", got)
	}
	if got := it.EphemeralOSDiskPlacement(30); got != catalog.PlacementCacheDisk {
		t.Errorf("placement = %q, want CacheDisk", got)
	}
	if _, err := catalog.Parse([]byte(strings.Replace(file, "%s", "-1", 1))); err == nil || !strings.Contains(err.Error(), "localDisks.cachedDiskBytes") {
		t.Errorf("negative cache disk: error %v, want one naming localDisks.cachedDiskBytes", err)
	}
}
