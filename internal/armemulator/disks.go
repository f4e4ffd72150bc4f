package armemulator

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
)

// The OS disk as its own resource (Microsoft.Compute/disks), as Azure keeps
// it. Rules, with their sources:
//
//   - A VM created from an image creates its managed OS disk under
//     storageProfile.osDisk.name; without a name Azure picks
//     "<vm>_OsDisk_1_<32 hex>" (the form seen in Azure/azure-cli#15765).
//   - If a disk of that name already exists in the resource group the VM
//     create is refused: ConflictingUserInput, "Disk <name> already exists
//     in resource group <RG>. Only CreateOption.Attach is supported.",
//     target the disk's ID, on the PUT itself (autorest's "Failure sending
//     request", hashicorp/terraform-provider-azurerm#15513). The reports do
//     not show the HTTP status; 409 Conflict is assumed (unconfirmed).
//   - osDisk.deleteOption Delete: "the OS disk is deleted when VM is
//     deleted"; Detach (the default for a managed disk): "the os disk is
//     retained after VM is deleted" (Learn, VirtualMachineOSDisk.DeleteOption,
//     azure-dotnet Azure.ResourceManager.Compute.Models). The disk goes when
//     the VM's delete completes; a retained disk is Unattached, managedBy
//     cleared.
//   - A disk attached to a VM cannot be deleted (OperationNotAllowed;
//     message form unconfirmed). Deleting an unattached disk is modelled
//     as immediate.

type diskState struct {
	disk  armcompute.Disk
	vmKey string // the VM it is attached to; "" when unattached
}

// osDiskName is the name the VM's OS disk gets.
func osDiskName(vm *armcompute.VirtualMachine, vmName string) string {
	if sp := vm.Properties.StorageProfile; sp != nil && sp.OSDisk != nil && deref(sp.OSDisk.Name) != "" {
		return *sp.OSDisk.Name
	}
	return vmName + "_OsDisk_1_" + strings.ReplaceAll(newUUID(), "-", "")
}

// checkOSDiskLocked refuses a VM whose OS disk name is taken in its
// resource group.
func (s *Server) checkOSDiskLocked(sub, rg, name string) refusal {
	diskRecord, ok := s.disks[resourceKey(sub, rg, name)]
	if !ok {
		return refusal{}
	}
	return refusal{status: http.StatusConflict, code: "ConflictingUserInput", target: deref(diskRecord.disk.ID),
		message: fmt.Sprintf("Disk %s already exists in resource group %s. Only CreateOption.Attach is supported.", name, strings.ToUpper(rg))}
}

// createOSDiskLocked creates v's OS disk, attached to it, and points the
// VM's osDisk.managedDisk at it (as Azure fills it in).
func (s *Server) createOSDiskLocked(v *vmState, vmKey, name string) {
	props := v.vm.Properties
	if props.StorageProfile == nil {
		props.StorageProfile = &armcompute.StorageProfile{}
	}
	if props.StorageProfile.OSDisk == nil {
		props.StorageProfile.OSDisk = &armcompute.OSDisk{CreateOption: ptr(armcompute.DiskCreateOptionTypesFromImage)}
	}
	od := props.StorageProfile.OSDisk
	od.Name = ptr(name)
	if od.DeleteOption == nil {
		od.DeleteOption = ptr(armcompute.DiskDeleteOptionTypesDetach)
	}
	id := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/disks/%s", v.sub, v.rg, name)
	if od.ManagedDisk == nil {
		od.ManagedDisk = &armcompute.ManagedDiskParameters{}
	}
	od.ManagedDisk.ID = ptr(id)
	disk := armcompute.Disk{
		ID: ptr(id), Name: ptr(name), Type: ptr("Microsoft.Compute/disks"), Location: v.vm.Location,
		ManagedBy: v.vm.ID, Zones: v.vm.Zones,
		Properties: &armcompute.DiskProperties{
			CreationData:      &armcompute.CreationData{CreateOption: ptr(armcompute.DiskCreateOptionFromImage)},
			DiskSizeGB:        od.DiskSizeGB,
			OSType:            ptr(armcompute.OperatingSystemTypesLinux),
			DiskState:         ptr(armcompute.DiskStateAttached),
			ProvisioningState: ptr("Succeeded"),
			TimeCreated:       ptr(s.clock.Now().UTC()),
		},
	}
	s.disks[resourceKey(v.sub, v.rg, name)] = &diskState{disk: disk, vmKey: vmKey}
}

// releaseOSDiskLocked deletes or detaches the OS disk of a VM that is gone,
// as its deleteOption says.
func (s *Server) releaseOSDiskLocked(v *vmState, vmKey string) {
	sp := v.vm.Properties.StorageProfile
	if sp == nil || sp.OSDisk == nil {
		return
	}
	key := resourceKey(v.sub, v.rg, deref(sp.OSDisk.Name))
	diskRecord, ok := s.disks[key]
	if !ok || diskRecord.vmKey != vmKey {
		return
	}
	if deref(sp.OSDisk.DeleteOption) == armcompute.DiskDeleteOptionTypesDelete {
		delete(s.disks, key)
		s.counters.DiskDeletes++
		return
	}
	diskRecord.vmKey = ""
	diskRecord.disk.ManagedBy = nil
	diskRecord.disk.Properties.DiskState = ptr(armcompute.DiskStateUnattached)
}

func deepCopyDisk(d *armcompute.Disk) *armcompute.Disk {
	out := *d
	props := *d.Properties
	out.Properties = &props
	return &out
}

func (s *Server) getDisk(w http.ResponseWriter, r *http.Request, sub, rg, name string) {
	if _, done := s.inject(w, r, Request{Operation: OpGetDisk, SubscriptionID: sub, ResourceGroup: rg, Name: name}); done {
		return
	}
	s.mu.Lock()
	s.settleLocked()
	diskRecord, ok := s.disks[resourceKey(sub, rg, name)]
	var out *armcompute.Disk
	if ok {
		out = deepCopyDisk(&diskRecord.disk)
	}
	s.mu.Unlock()
	if !ok {
		notFound(w, "Microsoft.Compute/disks", name, rg)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listDisks(w http.ResponseWriter, r *http.Request, sub, rg string) {
	if _, done := s.inject(w, r, Request{Operation: OpListDisks, SubscriptionID: sub, ResourceGroup: rg}); done {
		return
	}
	s.mu.Lock()
	s.settleLocked()
	res := armcompute.DiskList{Value: []*armcompute.Disk{}}
	prefix := strings.ToLower(sub + "/" + rg + "/")
	for key, diskRecord := range s.disks {
		if strings.HasPrefix(key, prefix) {
			res.Value = append(res.Value, deepCopyDisk(&diskRecord.disk))
		}
	}
	s.mu.Unlock()
	sort.Slice(res.Value, func(i, j int) bool { return deref(res.Value[i].Name) < deref(res.Value[j].Name) })
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) deleteDisk(w http.ResponseWriter, r *http.Request, sub, rg, name string) {
	if _, done := s.inject(w, r, Request{Operation: OpDeleteDisk, SubscriptionID: sub, ResourceGroup: rg, Name: name}); done {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	key := resourceKey(sub, rg, name)
	diskRecord, ok := s.disks[key]
	switch {
	case !ok:
		w.WriteHeader(http.StatusNoContent) // ARM: deleting what is not there succeeds
	case diskRecord.vmKey != "":
		writeError(w, http.StatusConflict, "OperationNotAllowed",
			fmt.Sprintf("Disk %s is attached to VM %s.", name, deref(diskRecord.disk.ManagedBy)))
	default:
		delete(s.disks, key)
		s.counters.DiskDeletes++
		w.WriteHeader(http.StatusOK)
	}
}

// Disks returns a snapshot of the managed disks, sorted by name.
func (s *Server) Disks() []*armcompute.Disk {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	out := make([]*armcompute.Disk, 0, len(s.disks))
	for _, diskRecord := range s.disks {
		out = append(out, deepCopyDisk(&diskRecord.disk))
	}
	sort.Slice(out, func(i, j int) bool { return deref(out[i].Name) < deref(out[j].Name) })
	return out
}
