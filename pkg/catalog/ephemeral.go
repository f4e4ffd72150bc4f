package catalog

import (
	"strconv"
	"strings"

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
	EphemeralOSDiskSupported bool  `json:"ephemeralOSDiskSupported"`  // EphemeralOSDiskSupported
	CachedDiskBytes          int64 `json:"cachedDiskBytes,omitempty"` // CachedDiskBytes
	ResourceDiskMiB          int64 `json:"resourceDiskMiB,omitempty"` // MaxResourceVolumeMB (MiB despite its name)
	NvmeDiskMiB              int64 `json:"nvmeDiskMiB,omitempty"`     // NvmeDiskSizeInMiB
	// NvmePlacement: SupportedEphemeralOSDiskPlacements lists NvmeDisk.
	NvmePlacement bool `json:"nvmePlacement,omitempty"`
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

// setLocalDiskCapability records a local-disk capability of the Resource
// SKUs API; other names are ignored.
func (f *SKUFacts) setLocalDiskCapability(name, value string) {
	number, _ := strconv.ParseInt(value, 10, 64)
	disks := f.LocalDisks
	if disks == nil {
		disks = &LocalDisks{}
	}
	switch name {
	case "EphemeralOSDiskSupported":
		disks.EphemeralOSDiskSupported = strings.EqualFold(value, "true")
	case "CachedDiskBytes":
		disks.CachedDiskBytes = number
	case "MaxResourceVolumeMB":
		disks.ResourceDiskMiB = number
	case "NvmeDiskSizeInMiB":
		disks.NvmeDiskMiB = number
	case "SupportedEphemeralOSDiskPlacements":
		for _, placement := range strings.Split(value, ",") {
			disks.NvmePlacement = disks.NvmePlacement || strings.EqualFold(strings.TrimSpace(placement), PlacementNvmeDisk)
		}
	default:
		return
	}
	f.LocalDisks = disks
}

// checkLocalDisks checks a catalog file's localDisks: sizes are not
// negative.
func checkLocalDisks(d *LocalDisks, invalid invalidField) (*LocalDisks, error) {
	if d == nil {
		return nil, nil
	}
	for field, value := range map[string]int64{"cachedDiskBytes": d.CachedDiskBytes, "resourceDiskMiB": d.ResourceDiskMiB, "nvmeDiskMiB": d.NvmeDiskMiB} {
		if value < 0 {
			return nil, invalid("localDisks."+field, "is %d; a disk size is 0 (no such disk) or positive", value)
		}
	}
	out := *d
	return &out, nil
}

// MaySupportEncryptionAtHost is false only for a size whose
// EncryptionAtHostSupported capability the catalog knows to be False. The
// Azure provider offers a class with encryptionAtHost only the sizes with
// the capability (karpenter-provider-azure@352646f5
// pkg/providers/instancetype/instancetypes.go:369-397); a size whose
// capability is unknown (the embedded catalog's public facts do not give
// it) is kept, and ARM has the last word.
func (it *InstanceType) MaySupportEncryptionAtHost() bool {
	return it.EncryptionAtHostSupported == nil || *it.EncryptionAtHostSupported
}
