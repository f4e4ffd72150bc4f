package armemulator

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
)

// checkEphemeralOSDiskLocked refuses an ephemeral (diffDiskSettings Local)
// OS disk larger than the local disk it is placed on, as ARM does:
// NotSupported, "OS disk of Ephemeral VM with size greater than 50 GB is not
// allowed for VM size Standard_D2s_v3 when the DiffDiskPlacement is
// CacheDisk. Please refer to https://aka.ms/Ephemeral for more details."
// (quoted in cloudfoundry/bosh-azure-cpi-release#674). The limit in that
// message is Standard_D2s_v3's cache disk in GiB (CachedDiskBytes
// 53687091200 = 50 GiB), so disk sizes compare in GiB: the cache disk
// (CachedDiskBytes), the resource disk (MaxResourceVolumeMB) or the NVMe
// disk (NvmeDiskSizeInMiB) by placement, CacheDisk when none is given
// (learn.microsoft.com/azure/virtual-machines/ephemeral-os-disks). A size
// not in the SKU list, or without the capability, is not checked.
// The HTTP status (400) is not confirmed by a source; the code and message
// are.
func (s *Server) checkEphemeralOSDiskLocked(vm *armcompute.VirtualMachine, size, location string) refusal {
	sp := vm.Properties.StorageProfile
	if sp == nil || sp.OSDisk == nil || sp.OSDisk.DiffDiskSettings == nil ||
		deref(sp.OSDisk.DiffDiskSettings.Option) != armcompute.DiffDiskOptionsLocal || sp.OSDisk.DiskSizeGB == nil {
		return refusal{}
	}
	placement := armcompute.DiffDiskPlacementCacheDisk
	if p := sp.OSDisk.DiffDiskSettings.Placement; p != nil {
		placement = *p
	}
	limitGiB, known := s.localDiskGiBLocked(size, location, placement)
	if !known || int64(*sp.OSDisk.DiskSizeGB) <= limitGiB {
		return refusal{}
	}
	return refusal{status: http.StatusBadRequest, code: "NotSupported", target: "storageProfile.osDisk.diffDiskSettings", message: fmt.Sprintf(
		"OS disk of Ephemeral VM with size greater than %d GB is not allowed for VM size %s when the DiffDiskPlacement is %s. "+
			"Please refer to https://aka.ms/Ephemeral for more details.", limitGiB, size, placement)}
}

// localDiskGiBLocked is the size in GiB of the local disk an ephemeral OS
// disk of that placement uses, from the SKU list's capabilities.
func (s *Server) localDiskGiBLocked(size, location string, placement armcompute.DiffDiskPlacement) (int64, bool) {
	capability, divisor := "", int64(0)
	switch placement {
	case armcompute.DiffDiskPlacementCacheDisk:
		capability, divisor = "CachedDiskBytes", 1<<30
	case armcompute.DiffDiskPlacementResourceDisk:
		capability, divisor = "MaxResourceVolumeMB", 1<<10
	case armcompute.DiffDiskPlacementNvmeDisk:
		capability, divisor = "NvmeDiskSizeInMiB", 1<<10
	default:
		return 0, false
	}
	for _, rs := range s.opts.SKUs {
		if rs == nil || !strings.EqualFold(deref(rs.Name), size) || !containsFold(rs.Locations, location) {
			continue
		}
		for _, c := range rs.Capabilities {
			if c == nil || deref(c.Name) != capability {
				continue
			}
			v, err := strconv.ParseInt(deref(c.Value), 10, 64)
			if err != nil {
				return 0, false
			}
			return v / divisor, true
		}
	}
	return 0, false
}
