package azure_test

import (
	"errors"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/pkg/azure"
)

// TestEphemeralOSDisk: a request with an ephemeral placement reaches ARM
// as the Azure provider writes it (diffDiskSettings Local + placement,
// ReadOnly caching, the requested size, no storage account type); without
// one the OS disk is a StandardSSD managed disk; an unknown placement is
// refused before any ARM call.
func TestEphemeralOSDisk(t *testing.T) {
	emu := startEmulator(t, armemulator.Options{})
	l := newLauncher(t, emu, "c")
	for _, tc := range []struct{ name, placement string }{{"eph", "CacheDisk"}, {"managed", ""}} {
		req := request(tc.name)
		req.OSDiskSizeGB = 40
		req.EphemeralOSDiskPlacement = tc.placement
		if _, err := l.Create(ctx(t), req); err != nil {
			t.Fatalf("%s: Create: %v", tc.name, err)
		}
	}
	seen := 0
	for _, vm := range emu.VMs() {
		od := vm.Properties.StorageProfile.OSDisk
		if od.DiskSizeGB == nil || *od.DiskSizeGB != 40 {
			t.Errorf("%s: diskSizeGB = %v, want 40", *vm.Name, od.DiskSizeGB)
		}
		switch *vm.Name {
		case "eph":
			seen++
			if od.DiffDiskSettings == nil || od.DiffDiskSettings.Option == nil || *od.DiffDiskSettings.Option != armcompute.DiffDiskOptionsLocal ||
				od.DiffDiskSettings.Placement == nil || *od.DiffDiskSettings.Placement != armcompute.DiffDiskPlacementCacheDisk {
				t.Errorf("eph: diffDiskSettings = %+v, want Local CacheDisk", od.DiffDiskSettings)
			}
			if od.Caching == nil || *od.Caching != armcompute.CachingTypesReadOnly {
				t.Errorf("eph: caching = %v, want ReadOnly", od.Caching)
			}
			if od.ManagedDisk != nil && od.ManagedDisk.StorageAccountType != nil {
				t.Errorf("eph: storage account type %s set on an ephemeral disk", *od.ManagedDisk.StorageAccountType)
			}
		case "managed":
			seen++
			if od.DiffDiskSettings != nil {
				t.Errorf("managed: diffDiskSettings = %+v, want none", od.DiffDiskSettings)
			}
			if od.ManagedDisk == nil || od.ManagedDisk.StorageAccountType == nil || *od.ManagedDisk.StorageAccountType != armcompute.StorageAccountTypesStandardSSDLRS {
				t.Errorf("managed: managedDisk = %+v, want StandardSSD_LRS", od.ManagedDisk)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("found %d of the 2 VMs", seen)
	}
	bad := request("bad")
	bad.EphemeralOSDiskPlacement = "TempDisk"
	var invalid *azure.InvalidRequestError
	if _, err := l.Create(ctx(t), bad); !errors.As(err, &invalid) {
		t.Errorf("placement TempDisk: Create error = %v, want an InvalidRequestError", err)
	}
}
