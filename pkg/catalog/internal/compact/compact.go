// Package compact is the on-disk shape of the embedded catalog: written by the
// generator, read by package catalog. It is deliberately smaller than the
// public catalog file format: labels, reservations and offerings are derived
// at load time, so each SKU is stored once and each region only carries
// prices and zone exceptions.
package compact

// File is the whole embedded catalog.
type File struct {
	// Source says where the facts came from, for people reading the data.
	Source string `json:"source"`
	// SKUs usable as AKS Linux nodes in at least one region, sorted by name.
	SKUs []SKU `json:"skus"`
	// Regions by ARM location name.
	Regions map[string]Region `json:"regions"`
}

// SKU holds the facts about one VM size that do not depend on the region.
type SKU struct {
	Name         string `json:"n"`
	Architecture string `json:"a"` // amd64 | arm64
	VCPUs        int64  `json:"c"`
	MemoryMiB    int64  `json:"m"`
	GPUCount     int64  `json:"g,omitempty"`
	// GPUName is the accelerator model (e.g. A100-80GB) when known.
	GPUName string `json:"gn,omitempty"`
	// GPUManufacturer is nvidia or amd for GPU sizes.
	GPUManufacturer string `json:"gm,omitempty"`
	// AcceleratedNetworking and PremiumIO are nil when no source gives them.
	AcceleratedNetworking *bool `json:"an,omitempty"`
	PremiumIO             *bool `json:"pio,omitempty"`
	// HyperVGenerations are the VM generations the size boots, as Azure
	// writes them ("V1", "V2"), sorted; they pick the node image.
	HyperVGenerations []string `json:"hv"`
	// LocalDisks are the size's local-disk facts; nil when no source gives
	// them (the size then always gets a managed OS disk).
	LocalDisks *LocalDisks `json:"ld,omitempty"`
}

// LocalDisks are the Resource SKU capabilities an ephemeral OS disk is
// chosen from, named as the SKU API names them.
type LocalDisks struct {
	EphemeralOSDiskSupported bool  `json:"eos"`
	CachedDiskBytes          int64 `json:"cb,omitempty"` // CachedDiskBytes
	ResourceDiskMiB          int64 `json:"rm,omitempty"` // MaxResourceVolumeMB (MiB)
	NvmeDiskMiB              int64 `json:"nm,omitempty"` // NvmeDiskSizeInMiB
	// NvmePlacement: SupportedEphemeralOSDiskPlacements lists NvmeDisk.
	NvmePlacement bool `json:"np,omitempty"`
}

// Region holds what varies by region.
type Region struct {
	// Zonal is true when the region has availability zones; its SKUs are
	// offered in zones 1..3 unless Zones says otherwise.
	Zonal bool `json:"zonal"`
	// Zones overrides the zone list (numbers as strings) for a few SKUs whose
	// zones were observed.
	Zones map[string][]string `json:"zones,omitempty"`
	// Prices are Linux USD/hour: [onDemand] or [onDemand, spot].
	Prices map[string][]float64 `json:"prices"`
}
