package armemulator

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpfunc/karpfunc/pkg/azure"
)

// TestOSDiskLifecycle: a VM's OS disk is a Microsoft.Compute/disks resource
// of its own, read through the real DisksClient. It exists (attached) once
// the VM is created; it goes when the VM's delete completes if its
// deleteOption is Delete, and stays (unattached) otherwise; and while a
// disk of that name exists, a VM create that would make it is refused with
// ARM's ConflictingUserInput.
func TestOSDiskLifecycle(t *testing.T) {
	tests := []struct {
		name         string
		deleteOption *armcompute.DiskDeleteOptionTypes
		kept         bool
	}{
		{"deleteOption Delete: deleted with the VM", ptr(armcompute.DiskDeleteOptionTypesDelete), false},
		{"deleteOption Detach: kept", ptr(armcompute.DiskDeleteOptionTypesDetach), true},
		{"no deleteOption (Detach by default): kept", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			s := start(t, Options{VMDeleteDelay: time.Minute, Clock: clk})
			vms, nics := clients(t, s)
			disks, err := armcompute.NewDisksClient(sub, token(s.Token()), armOptions(t, s))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			withDisk := func(nic, disk string) armcompute.VirtualMachine {
				body := vmBody(azure.NICResourceID(sub, rg, nic), "")
				body.Properties.StorageProfile = &armcompute.StorageProfile{OSDisk: &armcompute.OSDisk{
					Name: ptr(disk), CreateOption: ptr(armcompute.DiskCreateOptionTypesFromImage), DeleteOption: tt.deleteOption}}
				return body
			}
			for _, nic := range []string{"nic-1", "nic-2"} {
				if _, err := nics.BeginCreateOrUpdate(ctx, rg, nic, nicBody(), nil); err != nil {
					t.Fatal(err)
				}
			}
			clk.Step(time.Second) // NICs provisioned
			if _, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-1", withDisk("nic-1", "vm-1-osdisk"), nil); err != nil {
				t.Fatal(err)
			}
			got, err := disks.Get(ctx, rg, "vm-1-osdisk", nil)
			if err != nil {
				t.Fatalf("the OS disk after the VM create: %v", err)
			}
			if deref(got.ManagedBy) != azure.VMResourceID(sub, rg, "vm-1") || deref(got.Properties.DiskState) != armcompute.DiskStateAttached {
				t.Errorf("OS disk managedBy %q, state %q; want attached to vm-1", deref(got.ManagedBy), deref(got.Properties.DiskState))
			}
			vm, err := vms.Get(ctx, rg, "vm-1", nil)
			if err != nil || deref(vm.Properties.StorageProfile.OSDisk.ManagedDisk.ID) != deref(got.ID) {
				t.Errorf("VM's osDisk.managedDisk.id: %v; want the disk's ID %s", err, deref(got.ID))
			}

			// A second VM whose OS disk name is taken is refused.
			_, err = vms.BeginCreateOrUpdate(ctx, rg, "vm-2", withDisk("nic-2", "vm-1-osdisk"), nil)
			var re *azcore.ResponseError
			if !errors.As(err, &re) || re.ErrorCode != "ConflictingUserInput" || re.StatusCode != http.StatusConflict {
				t.Fatalf("VM create with a taken OS disk name: %v; want 409 ConflictingUserInput", err)
			}

			// The VM's delete is under way: the disk is still there.
			if _, err := vms.BeginDelete(ctx, rg, "vm-1", nil); err != nil {
				t.Fatal(err)
			}
			if _, err := disks.Get(ctx, rg, "vm-1-osdisk", nil); err != nil {
				t.Fatalf("the OS disk while its VM is being deleted: %v; want it still there", err)
			}
			clk.Step(time.Minute) // the delete completes
			got, err = disks.Get(ctx, rg, "vm-1-osdisk", nil)
			if !tt.kept {
				if !errors.As(err, &re) || re.StatusCode != http.StatusNotFound {
					t.Fatalf("the OS disk after its VM was deleted: %v; want 404", err)
				}
				if _, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-2", withDisk("nic-2", "vm-1-osdisk"), nil); err != nil {
					t.Fatalf("VM create once the disk name is free: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("a kept OS disk after its VM was deleted: %v", err)
			}
			if got.ManagedBy != nil || deref(got.Properties.DiskState) != armcompute.DiskStateUnattached {
				t.Errorf("kept OS disk: managedBy %q, state %q; want unattached", deref(got.ManagedBy), deref(got.Properties.DiskState))
			}
			if _, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-2", withDisk("nic-2", "vm-1-osdisk"), nil); armCode(err) != "ConflictingUserInput" {
				t.Fatalf("VM create meeting a kept disk's name: %v; want ConflictingUserInput", err)
			}
			// Once the kept disk is deleted, the name is free.
			dp, err := disks.BeginDelete(ctx, rg, "vm-1-osdisk", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dp.PollUntilDone(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if list := s.Disks(); len(list) != 0 {
				t.Fatalf("%d disks after deleting the kept one", len(list))
			}
		})
	}
}
