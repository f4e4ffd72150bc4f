// Command gen builds pkg/catalog's embedded data file from the public facts in
// ../shared/data/azure-catalog (see its README.md for provenance).
//
// It keeps only SKUs usable as AKS Linux nodes, following the Azure Karpenter
// provider's exclusions where the facts support them:
//   - Basic tier and _Promo sizes (retired / not offered to AKS);
//   - fewer than 2 vCPUs or less than 3.5 GiB of memory (AKS refuses them);
//   - the provider's explicit restricted list (A0, A1, A1_v2, B1s, B1ms, F1, F1s);
//   - constrained-vCPU sizes (Standard_M8-2ms): the provider drops them;
//   - confidential sizes (DC*, EC*): the provider does not support them yet;
//   - GPU sizes whose GPU is not in Karpenter's supported-GPU list, and GPU
//     sizes whose GPU count is unknown (capacity could not be stated);
//   - SKUs with unknown vCPUs, memory or architecture, or with no Linux price.
//
// Usage: go run ./internal/gen [-src dir] [-out file]
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/karpfunc/karpfunc/pkg/catalog/internal/compact"
)

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
	Source          map[string]string `json:"source"`
}

type price struct {
	OnDemand *float64 `json:"onDemand"`
	Spot     *float64 `json:"spot"`
}

type zoneRecord struct {
	Zones []string `json:"zones"`
}

// restricted is the Azure provider's list of sizes AKS does not support.
var restricted = map[string]bool{
	"Standard_A0": true, "Standard_A1": true, "Standard_A1_v2": true,
	"Standard_B1s": true, "Standard_B1ms": true, "Standard_F1": true, "Standard_F1s": true,
}

// constrainedVCPU matches sizes like Standard_M8-2ms and Standard_DS11-1_v2.
var constrainedVCPU = regexp.MustCompile(`^Standard_[A-Za-z]+[0-9]+-[0-9]+`)

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

func main() {
	src := flag.String("src", "", "directory with azure-vm-skus.json, azure-vm-prices.json, azure-zones.json (default: <repo root>/../shared/data/azure-catalog)")
	out := flag.String("out", "data/catalog.json.gz", "output file")
	flag.Parse()
	if err := run(*src, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(src, out string) error {
	if src == "" {
		root, err := repoRoot()
		if err != nil {
			return err
		}
		src = filepath.Join(root, "..", "shared", "data", "azure-catalog")
	}
	var skus []sku
	var prices map[string]map[string]price
	var zones map[string]map[string]zoneRecord
	for name, v := range map[string]any{"azure-vm-skus.json": &skus, "azure-vm-prices.json": &prices, "azure-zones.json": &zones} {
		raw, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return fmt.Errorf("reading %s (set -src to the azure-catalog directory): %w", name, err)
		}
		if err := json.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("decoding %s: %w", filepath.Join(src, name), err)
		}
	}

	file := compact.File{
		Source:  "built by pkg/catalog/internal/gen from shared/data/azure-catalog (see its README.md for sources and dates)",
		Regions: map[string]compact.Region{},
	}
	kept := map[string]bool{}
	dropped := map[string]int{}
	for _, s := range skus {
		c, reason := usable(s)
		if reason != "" {
			dropped[reason]++
			continue
		}
		kept[s.Name] = true
		file.SKUs = append(file.SKUs, c)
	}
	used := map[string]bool{}
	for region, byName := range prices {
		r := compact.Region{Zonal: zonalRegions[region], Prices: map[string][]float64{}}
		for name, p := range byName {
			if !kept[name] || p.OnDemand == nil || *p.OnDemand <= 0 {
				continue
			}
			v := []float64{round(*p.OnDemand)}
			if p.Spot != nil && *p.Spot > 0 {
				v = append(v, round(*p.Spot))
			}
			r.Prices[name] = v
			used[name] = true
		}
		if r.Zonal {
			for name, z := range zones[region] {
				if _, ok := r.Prices[name]; ok && len(z.Zones) > 0 {
					if r.Zones == nil {
						r.Zones = map[string][]string{}
					}
					r.Zones[name] = z.Zones
				}
			}
		}
		if len(r.Prices) > 0 {
			file.Regions[region] = r
		}
	}
	// A SKU priced nowhere cannot be offered; keep the file small.
	file.SKUs = filter(file.SKUs, func(s compact.SKU) bool { return used[s.Name] })
	sort.Slice(file.SKUs, func(i, j int) bool { return file.SKUs[i].Name < file.SKUs[j].Name })

	raw, err := json.Marshal(file)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(raw); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Printf("gen: wrote %s: %d SKUs, %d regions, %d bytes; dropped %v\n", out, len(file.SKUs), len(file.Regions), buf.Len(), dropped)
	return nil
}

// usable converts s, or says why AKS (or karpfunc) cannot use it.
func usable(s sku) (compact.SKU, string) {
	switch {
	case s.Tier != "Standard" || !strings.HasPrefix(s.Name, "Standard_"):
		return compact.SKU{}, "basic tier"
	case strings.HasSuffix(s.Name, "_Promo"):
		return compact.SKU{}, "promo"
	case s.VCPUs == nil || s.MemoryGiB == nil || s.Architecture == nil:
		return compact.SKU{}, "unknown vcpus/memory/architecture"
	case *s.VCPUs < 2:
		return compact.SKU{}, "fewer than 2 vCPUs"
	case *s.MemoryGiB < 3.5:
		return compact.SKU{}, "less than 3.5 GiB"
	case restricted[s.Name]:
		return compact.SKU{}, "restricted by AKS"
	case constrainedVCPU.MatchString(s.Name):
		return compact.SKU{}, "constrained vCPU"
	case strings.HasPrefix(s.Name, "Standard_DC") || strings.HasPrefix(s.Name, "Standard_EC"):
		return compact.SKU{}, "confidential"
	}
	arch := map[string]string{"x64": "amd64", "Arm64": "arm64"}[*s.Architecture]
	if arch == "" {
		return compact.SKU{}, "unknown architecture " + *s.Architecture
	}
	c := compact.SKU{
		Name: s.Name, Architecture: arch, VCPUs: *s.VCPUs,
		MemoryMiB:             int64(math.Round(*s.MemoryGiB * 1024)),
		AcceleratedNetworking: s.AccelNet, PremiumIO: s.PremiumIO,
	}
	manufacturer := deref(s.GPUManufacturer)
	isGPU := (s.GPUCount != nil && *s.GPUCount > 0) || manufacturer != "" || s.GPUName != nil
	if isGPU {
		switch {
		case s.GPUCount == nil || *s.GPUCount == 0:
			return compact.SKU{}, "gpu count unknown"
		case manufacturer == "" || s.Source["gpuManufacturer"] == "gpuName":
			// Only GPUs in Karpenter's supported-GPU list have drivers on AKS images.
			return compact.SKU{}, "unsupported gpu"
		}
		c.GPUCount, c.GPUName, c.GPUManufacturer = *s.GPUCount, deref(s.GPUName), manufacturer
	}
	return c, ""
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory; pass -src")
		}
		dir = parent
	}
}

func round(v float64) float64 { return math.Round(v*1e6) / 1e6 }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func filter[T any](in []T, keep func(T) bool) []T {
	out := in[:0]
	for _, v := range in {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}
