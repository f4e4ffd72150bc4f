// Package datagen builds pkg/catalog's embedded data file from the public
// facts in ../shared/data/azure-catalog (see its README.md for provenance).
// It is a package rather than part of the gen command so that a test in
// package catalog can rebuild the file in-process and notice when the
// committed one is stale.
//
// It keeps only SKUs usable as AKS Linux nodes (exclude.Reason decides, the
// same rule `karpfunc catalog refresh` uses), that have a Linux on-demand
// price in at least one region.
package datagen

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/karpfunc/karpfunc/pkg/catalog/internal/compact"
	"github.com/karpfunc/karpfunc/pkg/catalog/internal/ephemeralos"
	"github.com/karpfunc/karpfunc/pkg/catalog/internal/exclude"
)

// sku is one record of azure-vm-skus.json; null fields are nil.
type sku struct {
	Name            string            `json:"name"`
	Tier            string            `json:"tier"`
	VCPUs           *int64            `json:"vcpus"`
	MemoryGiB       *float64          `json:"memoryGiB"`
	GPUCount        *int64            `json:"gpuCount"`
	GPUName         *string           `json:"gpuName"`
	GPUManufacturer *string           `json:"gpuManufacturer"`
	Architecture    *string           `json:"architecture"`
	PremiumIO       *bool             `json:"premiumIO"`
	AccelNet        *bool             `json:"acceleratedNetworking"`
	HyperVGens      []string          `json:"hyperVGenerations"`
	EphemeralOS     *bool             `json:"ephemeralOSDiskSupported"`
	EphemeralMaxGB  *int64            `json:"ephemeralOSDiskMaxGB"`
	ResourceDiskMiB *int64            `json:"maxResourceVolumeMB"`
	CachedDiskGiB   *int64            `json:"cachedDiskGiB"`
	Source          map[string]string `json:"source"`
}

type price struct {
	OnDemand *float64 `json:"onDemand"`
	Spot     *float64 `json:"spot"`
}

type zoneRecord struct {
	Zones []string `json:"zones"`
}

// zonalRegions have availability zones. The first group is the Azure
// Karpenter provider's list; the second are regions Azure opened with three
// zones after that list was written.
var zonalRegions = map[string]bool{
	"brazilsouth": true, "canadacentral": true, "centralus": true, "eastus": true, "eastus2": true,
	"southcentralus": true, "usgovvirginia": true, "westus2": true, "westus3": true,
	"francecentral": true, "italynorth": true, "germanywestcentral": true, "norwayeast": true,
	"northeurope": true, "uksouth": true, "westeurope": true, "swedencentral": true,
	"switzerlandnorth": true, "polandcentral": true, "qatarcentral": true, "uaenorth": true,
	"israelcentral": true, "southafricanorth": true, "australiaeast": true, "centralindia": true,
	"japaneast": true, "koreacentral": true, "southeastasia": true, "eastasia": true, "chinanorth3": true,

	"spaincentral": true, "mexicocentral": true, "newzealandnorth": true, "austriaeast": true,
	"chilecentral": true, "indonesiacentral": true, "malaysiawest": true, "belgiumcentral": true,
	"denmarkeast": true,
}

// Stats say what Build kept and why it dropped the rest.
type Stats struct {
	SKUs, Regions int
	Dropped       map[string]int
}

// DefaultSource is where the facts live on a developer's or CI machine:
// ../shared/data/azure-catalog next to the repository root (the directory
// with go.mod above the working directory).
func DefaultSource() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared", "data", "azure-catalog"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory; name the azure-catalog directory explicitly")
		}
		dir = parent
	}
}

// Build reads azure-vm-skus.json, azure-vm-prices.json and azure-zones.json
// from src and returns the gzipped compact catalog. The output depends only
// on the input (sorted SKUs, maps marshalled with sorted keys, no gzip
// timestamp), so the committed file can be compared byte for byte.
func Build(src string) ([]byte, Stats, error) {
	stats := Stats{Dropped: map[string]int{}}
	var skus []sku
	var prices map[string]map[string]price
	var zones map[string]map[string]zoneRecord
	for _, in := range []struct {
		name string
		into any
	}{{"azure-vm-skus.json", &skus}, {"azure-vm-prices.json", &prices}, {"azure-zones.json", &zones}} {
		raw, err := os.ReadFile(filepath.Join(src, in.name))
		if err != nil {
			return nil, stats, fmt.Errorf("reading %s (name the azure-catalog directory): %w", in.name, err)
		}
		if err := json.Unmarshal(raw, in.into); err != nil {
			return nil, stats, fmt.Errorf("decoding %s: %w", filepath.Join(src, in.name), err)
		}
	}

	file := compact.File{
		Source:  "built by pkg/catalog/internal/gen from shared/data/azure-catalog (see its README.md for sources and dates)",
		Regions: map[string]compact.Region{},
	}
	var err error
	if file.SKUs, err = keptSKUs(skus, stats.Dropped); err != nil {
		return nil, stats, err
	}
	kept := map[string]bool{}
	for _, keptSKU := range file.SKUs {
		kept[keptSKU.Name] = true
	}
	used := map[string]bool{}
	for region, byName := range prices {
		built := buildRegion(region, byName, zones[region], kept)
		for name := range built.Prices {
			used[name] = true
		}
		if len(built.Prices) > 0 {
			file.Regions[region] = built
		}
	}
	// A SKU priced nowhere cannot be offered; keep the file small.
	file.SKUs = slices.DeleteFunc(file.SKUs, func(s compact.SKU) bool { return !used[s.Name] })
	slices.SortFunc(file.SKUs, func(a, b compact.SKU) int { return strings.Compare(a.Name, b.Name) })
	stats.SKUs = len(file.SKUs)
	stats.Regions = len(file.Regions)
	out, err := gzipJSON(file)
	return out, stats, err
}

// keptSKUs converts the records the exclusion rule accepts and whose
// generations are known, counting the others in dropped by reason.
func keptSKUs(skus []sku, dropped map[string]int) ([]compact.SKU, error) {
	var kept []compact.SKU
	for _, record := range skus {
		if why := exclude.Reason(facts(record)); why != "" {
			dropped[why]++
			continue
		}
		if _, err := HyperVGenerations(record.HyperVGens); err != nil {
			// Without its generations no node image can be picked.
			dropped["unknown hyper-v generations"]++
			continue
		}
		out := toCompact(record)
		disks, err := localDisks(record)
		if err != nil {
			return nil, err
		}
		out.LocalDisks = disks
		kept = append(kept, out)
	}
	return kept, nil
}

// buildRegion is one region's prices for the kept SKUs with an on-demand
// price (and spot where there is one), and in a zonal region the zones of
// the priced SKUs.
func buildRegion(region string, byName map[string]price, zones map[string]zoneRecord, kept map[string]bool) compact.Region {
	built := compact.Region{Zonal: zonalRegions[region], Prices: map[string][]float64{}}
	for name, priced := range byName {
		if !kept[name] || priced.OnDemand == nil || *priced.OnDemand <= 0 {
			continue
		}
		hourly := []float64{round(*priced.OnDemand)}
		if priced.Spot != nil && *priced.Spot > 0 {
			hourly = append(hourly, round(*priced.Spot))
		}
		built.Prices[name] = hourly
	}
	if !built.Zonal {
		return built
	}
	for name, record := range zones {
		if _, ok := built.Prices[name]; ok && len(record.Zones) > 0 {
			if built.Zones == nil {
				built.Zones = map[string][]string{}
			}
			built.Zones[name] = record.Zones
		}
	}
	return built
}

// gzipJSON is file marshalled and gzipped at best compression.
func gzipJSON(file compact.File) ([]byte, error) {
	raw, err := json.Marshal(file)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// facts are what the exclusion rule needs from a source record.
func facts(s sku) exclude.Facts {
	return exclude.Facts{Name: s.Name, Tier: s.Tier, VCPUs: s.VCPUs, MemoryGiB: s.MemoryGiB, Architecture: s.Architecture, GPU: gpuOf(s)}
}

// gpuOf classifies s's GPUs from the sources. Any GPU fact marks a GPU size,
// because the sources fill the fields unevenly. A maker counts only when it
// comes from Karpenter's supported-GPU list: the data set's "gpuName"
// field is guessed from the model, and those GPUs are not in that list, so AKS
// images have no driver for them.
func gpuOf(s sku) exclude.GPU {
	manufacturer := deref(s.GPUManufacturer)
	switch {
	case (s.GPUCount == nil || *s.GPUCount == 0) && manufacturer == "" && s.GPUName == nil:
		return exclude.NoGPU
	case s.GPUCount == nil || *s.GPUCount == 0:
		return exclude.GPUCountUnknown
	case manufacturer == "" || s.Source["gpuManufacturer"] == "gpuName":
		return exclude.UnsupportedGPU
	}
	return exclude.SupportedGPU
}

// toCompact converts a record exclude.Reason accepted, so its vCPUs, memory
// and architecture are known.
func toCompact(s sku) compact.SKU {
	arch, _ := exclude.KubeArch(deref(s.Architecture))
	out := compact.SKU{
		Name: s.Name, Architecture: arch, VCPUs: *s.VCPUs,
		MemoryMiB:             int64(math.Round(*s.MemoryGiB * 1024)),
		AcceleratedNetworking: s.AccelNet, PremiumIO: s.PremiumIO,
	}
	out.HyperVGenerations, _ = HyperVGenerations(s.HyperVGens) // Build checked them
	if gpuOf(s) == exclude.SupportedGPU {
		out.GPUCount = *s.GPUCount
		out.GPUName = deref(s.GPUName)
		out.GPUManufacturer = deref(s.GPUManufacturer)
	}
	return out
}

// localDisks are a record's local-disk facts, nil when the source gives no
// ephemeral OS disk support (the public facts give it for few sizes, all
// from the Azure provider's Resource SKU test fixtures). The facts give the
// cache disk in GiB and the resource disk in MiB, but not the NVMe disk:
// its ephemeralOSDiskMaxGB was computed by the provider's rule, so a
// maximum that neither the cache nor the resource disk explains is the NVMe
// disk's, and it is stored as the smallest NvmeDiskSizeInMiB that gives that
// maximum. A record the rule cannot reproduce is an error.
func localDisks(s sku) (*compact.LocalDisks, error) {
	if s.EphemeralOS == nil {
		return nil, nil
	}
	d := compact.LocalDisks{EphemeralOSDiskSupported: *s.EphemeralOS}
	if s.CachedDiskGiB != nil {
		d.CachedDiskBytes = *s.CachedDiskGiB << 30
	}
	if s.ResourceDiskMiB != nil {
		d.ResourceDiskMiB = *s.ResourceDiskMiB
	}
	want := int64(0)
	if s.EphemeralMaxGB != nil {
		want = *s.EphemeralMaxGB
	}
	if got, _ := ephemeralos.Max(d); got != want && d.EphemeralOSDiskSupported {
		d.NvmePlacement = true
		d.NvmeDiskMiB = (want*1_000_000_000 + (1<<20 - 1)) >> 20
	}
	if got, _ := ephemeralos.Max(d); got != want {
		return nil, fmt.Errorf("%s: ephemeralOSDiskMaxGB %d does not follow from its local disks (%+v gives %d)", s.Name, want, d, got)
	}
	return &d, nil
}

// HyperVGenerations checks and sorts a size's Hyper-V generations as Azure
// writes them ("V1", "V2"); an empty or unknown list is an error.
func HyperVGenerations(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, errors.New("no Hyper-V generation listed")
	}
	out := slices.Clone(in)
	for _, gen := range out {
		if gen != "V1" && gen != "V2" {
			return nil, fmt.Errorf("unknown Hyper-V generation %q (want V1 or V2)", gen)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func round(v float64) float64 { return math.Round(v*1e6) / 1e6 }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
