package localenv

import (
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/offerings"
)

// ResourceSKUs turns a catalog into the Resource SKU records ARM would list
// for its region, so the emulator offers exactly the catalog's sizes, in
// their zones, with the capabilities ARM checks a VM against (vCPUs,
// memory, Hyper-V generations, CPU architecture, local disks) and the quota family
// (the SKU API's family field, which the emulator's quota counts by). The
// catalog does not keep Azure's family name, so it is derived from the
// size name by the rule the usages API's names follow (offerings.QuotaFamily).
func ResourceSKUs(cat *catalog.Catalog) []*armcompute.ResourceSKU {
	out := make([]*armcompute.ResourceSKU, 0, len(cat.InstanceTypes))
	for _, it := range cat.InstanceTypes {
		zones := map[string]bool{}
		for _, offering := range it.Offerings {
			if zoneNumber := strings.TrimPrefix(offering.Zone, cat.Region+"-"); offering.Zone != "" && zoneNumber != offering.Zone {
				zones[zoneNumber] = true
			}
		}
		info := &armcompute.ResourceSKULocationInfo{Location: to(cat.Region)}
		for _, zone := range []string{"1", "2", "3", "4", "5"} {
			if zones[zone] {
				info.Zones = append(info.Zones, to(zone))
			}
		}
		arch := "x64"
		if it.Architecture == "arm64" {
			arch = "Arm64"
		}
		mem := it.Capacity.Memory()
		capability := func(name, value string) *armcompute.ResourceSKUCapabilities {
			return &armcompute.ResourceSKUCapabilities{Name: to(name), Value: to(value)}
		}
		capabilities := []*armcompute.ResourceSKUCapabilities{
			capability("vCPUs", strconv.FormatInt(it.Capacity.Cpu().Value(), 10)),
			capability("MemoryGB", strconv.FormatFloat(float64(mem.Value())/(1<<30), 'f', -1, 64)),
			capability("HyperVGenerations", strings.Join(it.HyperVGenerations, ",")),
			capability("CpuArchitectureType", arch),
		}
		// The local disks, where the catalog knows them, under the
		// capability names ARM lists; the emulator judges an ephemeral OS
		// disk from these.
		if d := it.LocalDisks; d != nil {
			supported := "False"
			if d.EphemeralOSDiskSupported {
				supported = "True"
			}
			capabilities = append(capabilities, capability("EphemeralOSDiskSupported", supported),
				capability("CachedDiskBytes", strconv.FormatInt(d.CachedDiskBytes, 10)),
				capability("MaxResourceVolumeMB", strconv.FormatInt(d.ResourceDiskMiB, 10)))
			if d.NvmePlacement {
				capabilities = append(capabilities, capability("NvmeDiskSizeInMiB", strconv.FormatInt(d.NvmeDiskMiB, 10)),
					capability("SupportedEphemeralOSDiskPlacements", "NvmeDisk"))
			}
		}
		if it.EncryptionAtHostSupported != nil {
			capabilities = append(capabilities, capability("EncryptionAtHostSupported", map[bool]string{true: "True", false: "False"}[*it.EncryptionAtHostSupported]))
		}
		out = append(out, &armcompute.ResourceSKU{
			Name: to(it.Name), ResourceType: to("virtualMachines"), Tier: to("Standard"), Family: to(offerings.QuotaFamily(it.Name)),
			Locations: []*string{to(cat.Region)}, LocationInfo: []*armcompute.ResourceSKULocationInfo{info},
			Capabilities: capabilities,
		})
	}
	return out
}

func to[T any](v T) *T { return &v }
