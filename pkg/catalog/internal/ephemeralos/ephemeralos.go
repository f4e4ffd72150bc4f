// Package ephemeralos decides where an ephemeral OS disk goes on a VM size
// and how large it may be, from the size's local-disk capabilities. It is
// shared by the catalog (which labels sizes and picks the OS disk) and the
// catalog generator (which checks the public facts against the rule).
//
// Invariants: the result depends only on the capabilities; a size without
// EphemeralOSDiskSupported, or whose chosen local disk is empty, has no
// ephemeral OS disk (max 0, placement "").
package ephemeralos

import "github.com/karpfunc/karpfunc/pkg/catalog/internal/compact"

// Placements, as ARM's diffDiskSettings.placement names them.
const (
	NvmeDisk     = "NvmeDisk"
	CacheDisk    = "CacheDisk"
	ResourceDisk = "ResourceDisk"
)

const (
	gigabyte = 1_000_000_000
	mebibyte = 1 << 20
	gibibyte = 1 << 30
)

// Max is the Azure provider's choice of placement and largest ephemeral OS
// disk in GB of 10^9 bytes, rounded down: the NVMe disk when the size lists
// NvmeDisk among its placements, else the cache disk, else the resource
// disk (karpenter-provider-azure@352646f5
// pkg/providers/instancetype/instancetypes.go:564-597). The GB value is the
// one the provider writes in the karpenter.azure.com/sku-storage-ephemeralos-maxsize label.
func Max(d compact.LocalDisks) (sizeGB int64, placement string) {
	bytes, placement := local(d)
	return bytes / gigabyte, placement
}

// FitsGiB is the largest OS disk, in the GiB that ARM's diskSizeGB counts,
// that the placement Max chose holds. ARM compares the disk against the
// local disk in GiB: it refuses a 53 GB ephemeral OS disk on
// Standard_D2s_v3, whose cache disk is 53,687,091,200 bytes (53 GB, 50
// GiB), with "OS disk of Ephemeral VM with size greater than 50 GB is not
// allowed for VM size Standard_D2s_v3 when the DiffDiskPlacement is
// CacheDisk" (quoted in cloudfoundry/bosh-azure-cpi-release#674).
func FitsGiB(d compact.LocalDisks) int64 {
	bytes, _ := local(d)
	return bytes / gibibyte
}

// local is the size in bytes of the local disk the provider's rule picks.
func local(d compact.LocalDisks) (int64, string) {
	switch {
	case !d.EphemeralOSDiskSupported:
		return 0, ""
	case d.NvmePlacement && d.NvmeDiskMiB > 0:
		return d.NvmeDiskMiB * mebibyte, NvmeDisk
	case d.CachedDiskBytes > 0:
		return d.CachedDiskBytes, CacheDisk
	case d.ResourceDiskMiB > 0:
		return d.ResourceDiskMiB * mebibyte, ResourceDisk
	}
	return 0, ""
}
