package catalog

import (
	"strconv"

	"github.com/karpfunc/karpfunc/pkg/catalog/internal/compact"
	"github.com/karpfunc/karpfunc/pkg/catalog/internal/ephemeralos"
)

// LabelSKUStorageEphemeralOSMaxSize is the largest ephemeral OS disk the
// size takes, in GB of 10^9 bytes; absent when it takes none (or its local
// disks are unknown), as the Azure provider writes it
// (karpenter-provider-azure@352646f5 pkg/providers/instancetype/instancetype.go:222-227).
const LabelSKUStorageEphemeralOSMaxSize = "karpenter.azure.com/sku-storage-ephemeralos-maxsize"

// Ephemeral OS disk placements, as ARM's diffDiskSettings.placement names them.
const (
	PlacementNvmeDisk     = ephemeralos.NvmeDisk
	PlacementCacheDisk    = ephemeralos.CacheDisk
	PlacementResourceDisk = ephemeralos.ResourceDisk
)

// LocalDisks are the Resource SKU capabilities an ephemeral OS disk is
// chosen from, named as the SKU API names them.
type LocalDisks struct {
	EphemeralOSDiskSupported bool  // EphemeralOSDiskSupported
	CachedDiskBytes          int64 // CachedDiskBytes
	ResourceDiskMiB          int64 // MaxResourceVolumeMB (MiB despite its name)
	NvmeDiskMiB              int64 // NvmeDiskSizeInMiB
	// NvmePlacement: SupportedEphemeralOSDiskPlacements lists NvmeDisk.
	NvmePlacement bool
}

func (d LocalDisks) compact() compact.LocalDisks {
	return compact.LocalDisks{
		EphemeralOSDiskSupported: d.EphemeralOSDiskSupported, CachedDiskBytes: d.CachedDiskBytes,
		ResourceDiskMiB: d.ResourceDiskMiB, NvmeDiskMiB: d.NvmeDiskMiB, NvmePlacement: d.NvmePlacement,
	}
}

func localDisksOf(c *compact.LocalDisks) *LocalDisks {
	if c == nil {
		return nil
	}
	return &LocalDisks{
		EphemeralOSDiskSupported: c.EphemeralOSDiskSupported, CachedDiskBytes: c.CachedDiskBytes,
		ResourceDiskMiB: c.ResourceDiskMiB, NvmeDiskMiB: c.NvmeDiskMiB, NvmePlacement: c.NvmePlacement,
	}
}

// EphemeralOSDiskMax is the Azure provider's placement and largest
// ephemeral OS disk (GB of 10^9 bytes, rounded down) for these disks: the
// NVMe disk when the size lists NvmeDisk among its placements, else the
// cache disk, else the resource disk; 0 and "" when the size takes none
// (karpenter-provider-azure@352646f5 pkg/providers/instancetype/instancetypes.go:564-597).
func (d LocalDisks) EphemeralOSDiskMax() (sizeGB int64, placement string) {
	return ephemeralos.Max(d.compact())
}

// EphemeralOSDiskPlacement is where an OS disk of osDiskSizeGB goes on this
// size: a placement for an ephemeral OS disk, or "" for a managed disk.
// Like the Azure provider it is ephemeral when the size takes an ephemeral
// disk at least that large (instancetypes.go:599-602 @352646f5), and unlike
// it the disk must also fit the local disk in GiB, the unit ARM's limit
// counts in (ephemeralos.FitsGiB): the provider's GB rule would send a 52 GB
// disk to Standard_D2s_v3's 50 GiB cache disk, which ARM refuses. A size
// whose local disks the catalog does not know gets a managed disk.
func (it *InstanceType) EphemeralOSDiskPlacement(osDiskSizeGB int32) string {
	if it.LocalDisks == nil {
		return ""
	}
	maxGB, placement := it.LocalDisks.EphemeralOSDiskMax()
	if placement == "" || int64(osDiskSizeGB) > maxGB || int64(osDiskSizeGB) > ephemeralos.FitsGiB(it.LocalDisks.compact()) {
		return ""
	}
	return placement
}

// addEphemeralOSLabel writes the max-size label when the size takes an
// ephemeral OS disk.
func addEphemeralOSLabel(labels map[string]string, disks *LocalDisks) {
	if disks == nil {
		return
	}
	if maxGB, _ := disks.EphemeralOSDiskMax(); maxGB > 0 {
		labels[LabelSKUStorageEphemeralOSMaxSize] = strconv.FormatInt(maxGB, 10)
	}
}
