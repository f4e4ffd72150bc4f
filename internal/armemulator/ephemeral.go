package armemulator

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
)

// localDisks are a size's local-disk capabilities as the SKU list gives
// them; known is false when the size is not listed or lists no
// EphemeralOSDiskSupported capability, and then nothing is checked.
type localDisks struct {
	known, supported bool
	cacheBytes       int64 // CachedDiskBytes
	resourceMiB      int64 // MaxResourceVolumeMB (MiB)
	nvmeMiB          int64 // NvmeDiskSizeInMiB
	placements       []string
}

// checkEphemeralOSDiskLocked checks an ephemeral (diffDiskSettings Local)
// OS disk against the size's local disks, as ARM does:
//
//   - No placement means CacheDisk when the size has a cache disk, else
//     ResourceDisk (DiffDiskSettings.placement in azure-rest-api-specs,
//     Azure/azure-rest-api-specs#27857).
//   - A placement whose disk the size lacks (no cache disk, no resource
//     disk, NvmeDisk not among SupportedEphemeralOSDiskPlacements or no NVMe
//     disk) is refused with NotSupported "The Diff Disk Placement of type
//     'CacheDisk' is not supported for VM size Standard_D48d_v4. Please
//     request with different DiffDiskPlacement or use a different VM Sku
//     which supports the current DiffDiskPlacement in the request." (quoted
//     in microsoft/lisa#2289). A size whose EphemeralOSDiskSupported is
//     False gets the same refusal: no source quotes ARM's message for it.
//   - A disk larger than the local disk is refused with NotSupported "OS
//     disk of Ephemeral VM with size greater than 50 GB is not allowed for
//     VM size Standard_D2s_v3 when the DiffDiskPlacement is CacheDisk.
//     Please refer to https://aka.ms/Ephemeral for more details." (quoted in
//     cloudfoundry/bosh-azure-cpi-release#674). The limit in that message
//     is Standard_D2s_v3's cache disk in GiB (CachedDiskBytes 53687091200 =
//     50 GiB), so disk sizes compare in GiB.
//
// The HTTP status (400) is not confirmed by a source; the codes and
// messages are.
func (s *Server) checkEphemeralOSDiskLocked(vm *armcompute.VirtualMachine, size, location string) refusal {
	sp := vm.Properties.StorageProfile
	if sp == nil || sp.OSDisk == nil || sp.OSDisk.DiffDiskSettings == nil ||
		deref(sp.OSDisk.DiffDiskSettings.Option) != armcompute.DiffDiskOptionsLocal {
		return refusal{}
	}
	disks := s.localDisksLocked(size, location)
	if !disks.known {
		return refusal{}
	}
	placement := armcompute.DiffDiskPlacementResourceDisk
	if disks.cacheBytes > 0 {
		placement = armcompute.DiffDiskPlacementCacheDisk
	}
	if p := sp.OSDisk.DiffDiskSettings.Placement; p != nil {
		placement = *p
	}
	limitGiB := disks.gibFor(placement)
	if !disks.supported || limitGiB <= 0 {
		return refusal{status: http.StatusBadRequest, code: "NotSupported", target: "storageProfile.osDisk.diffDiskSettings.placement", message: fmt.Sprintf(
			"The Diff Disk Placement of type '%s' is not supported for VM size %s. Please request with different DiffDiskPlacement "+
				"or use a different VM Sku which supports the current DiffDiskPlacement in the request.", placement, size)}
	}
	if sp.OSDisk.DiskSizeGB == nil || int64(*sp.OSDisk.DiskSizeGB) <= limitGiB {
		return refusal{}
	}
	return refusal{status: http.StatusBadRequest, code: "NotSupported", target: "storageProfile.osDisk.diffDiskSettings", message: fmt.Sprintf(
		"OS disk of Ephemeral VM with size greater than %d GB is not allowed for VM size %s when the DiffDiskPlacement is %s. "+
			"Please refer to https://aka.ms/Ephemeral for more details.", limitGiB, size, placement)}
}

// gibFor is the size in GiB of the local disk a placement uses; 0 when
// the size has no such disk.
func (d localDisks) gibFor(placement armcompute.DiffDiskPlacement) int64 {
	switch placement {
	case armcompute.DiffDiskPlacementCacheDisk:
		return d.cacheBytes >> 30
	case armcompute.DiffDiskPlacementResourceDisk:
		return d.resourceMiB >> 10
	case armcompute.DiffDiskPlacementNvmeDisk:
		for _, p := range d.placements {
			if strings.EqualFold(p, string(armcompute.DiffDiskPlacementNvmeDisk)) {
				return d.nvmeMiB >> 10
			}
		}
	}
	return 0
}

// localDisksLocked reads a size's local-disk capabilities from the SKU list.
func (s *Server) localDisksLocked(size, location string) localDisks {
	for _, rs := range s.opts.SKUs {
		if rs == nil || !strings.EqualFold(deref(rs.Name), size) || !containsFold(rs.Locations, location) {
			continue
		}
		var d localDisks
		for _, c := range rs.Capabilities {
			if c == nil {
				continue
			}
			value := deref(c.Value)
			number, _ := strconv.ParseInt(value, 10, 64)
			switch deref(c.Name) {
			case "EphemeralOSDiskSupported":
				d.known, d.supported = true, strings.EqualFold(value, "True")
			case "CachedDiskBytes":
				d.cacheBytes = number
			case "MaxResourceVolumeMB":
				d.resourceMiB = number
			case "NvmeDiskSizeInMiB":
				d.nvmeMiB = number
			case "SupportedEphemeralOSDiskPlacements":
				d.placements = strings.Split(value, ",")
			}
		}
		return d
	}
	return localDisks{}
}
