package catalog

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/catalog/internal/exclude"
)

// Refreshing a catalog file from Azure: the Retail Prices API gives Linux
// hourly prices, the Resource SKUs API gives vCPUs, memory, architecture,
// GPUs, capabilities and zones. This file turns their answers into the
// catalog file format; fetching them is azuresource.go's (the caller
// supplies the ARM client that lists the Resource SKUs).

// RetailPricesPage is one page of https://prices.azure.com/api/retail/prices.
type RetailPricesPage struct {
	BillingCurrency    string            `json:"BillingCurrency"`
	CustomerEntityID   string            `json:"CustomerEntityId"`
	CustomerEntityType string            `json:"CustomerEntityType"`
	Items              []RetailPriceItem `json:"Items"`
	NextPageLink       *string           `json:"NextPageLink"`
	Count              int               `json:"Count"`
}

// RetailPriceItem is one meter of the Retail Prices API.
type RetailPriceItem struct {
	CurrencyCode         string  `json:"currencyCode"`
	TierMinimumUnits     float64 `json:"tierMinimumUnits"`
	RetailPrice          float64 `json:"retailPrice"`
	UnitPrice            float64 `json:"unitPrice"`
	ARMRegionName        string  `json:"armRegionName"`
	Location             string  `json:"location"`
	EffectiveStartDate   string  `json:"effectiveStartDate"`
	MeterID              string  `json:"meterId"`
	MeterName            string  `json:"meterName"`
	ProductID            string  `json:"productId"`
	SkuID                string  `json:"skuId"`
	ProductName          string  `json:"productName"`
	SkuName              string  `json:"skuName"`
	ServiceName          string  `json:"serviceName"`
	ServiceID            string  `json:"serviceId"`
	ServiceFamily        string  `json:"serviceFamily"`
	UnitOfMeasure        string  `json:"unitOfMeasure"`
	Type                 string  `json:"type"`
	IsPrimaryMeterRegion bool    `json:"isPrimaryMeterRegion"`
	ARMSkuName           string  `json:"armSkuName"`
}

// RetailPricesFilter is the OData filter for a region's VM consumption
// meters.
func RetailPricesFilter(region string) string {
	return fmt.Sprintf("serviceName eq 'Virtual Machines' and armRegionName eq '%s' and priceType eq 'Consumption'", region)
}

// Price is a SKU's Linux hourly price; Spot is 0 when there is no spot meter.
type Price struct {
	OnDemand, Spot float64
}

// LinuxPrices picks, per ARM SKU name, the Linux on-demand and spot hourly
// prices in region from Retail Prices items: consumption meters in USD per
// hour; Windows, Cloud Services and Low Priority meters are skipped; a
// meter is spot when its meterName or skuName says "Spot". When a SKU has
// several meters of one kind, the latest effectiveStartDate wins (then the
// lower price), so a price change replaces the old price.
func LinuxPrices(region string, items []RetailPriceItem) map[string]Price {
	type pick struct {
		date  string
		price float64
	}
	onDemand := map[string]pick{}
	spot := map[string]pick{}
	for _, item := range items {
		if !linuxHourlyUSD(region, item) {
			continue
		}
		picks := onDemand
		if strings.Contains(item.MeterName, "Spot") || strings.Contains(item.SkuName, "Spot") {
			picks = spot
		}
		current, ok := picks[item.ARMSkuName]
		if !ok || item.EffectiveStartDate > current.date || (item.EffectiveStartDate == current.date && item.RetailPrice < current.price) {
			picks[item.ARMSkuName] = pick{item.EffectiveStartDate, item.RetailPrice}
		}
	}
	out := make(map[string]Price, len(onDemand))
	for name, picked := range onDemand {
		out[name] = Price{OnDemand: picked.price, Spot: spot[name].price}
	}
	return out
}

// linuxHourlyUSD reports whether a Retail Prices item is a priced Linux VM
// consumption meter in region, in USD per hour, and not Low Priority.
func linuxHourlyUSD(region string, item RetailPriceItem) bool {
	if item.ARMRegionName != region || item.ARMSkuName == "" || item.Type != "Consumption" ||
		item.ServiceName != "Virtual Machines" || item.UnitOfMeasure != "1 Hour" ||
		(item.CurrencyCode != "" && item.CurrencyCode != "USD") || item.RetailPrice <= 0 {
		return false
	}
	return !strings.Contains(item.ProductName, "Windows") && !strings.Contains(item.ProductName, "Cloud Services") &&
		!strings.Contains(item.MeterName, "Low Priority") && !strings.Contains(item.SkuName, "Low Priority")
}

// SKUFacts are what the Resource SKUs API says about a VM size in a region.
type SKUFacts struct {
	Name         string
	Tier         string
	VCPUs        int64
	MemoryGiB    float64
	Architecture string // as the API writes it: x64 or Arm64
	// HyperVGenerations is the HyperVGenerations capability split on
	// commas ("V1", "V2"); empty when the API omits it, which means Gen1
	// only, as the Azure provider reads it.
	HyperVGenerations []string
	GPUs              int64
	// PremiumIO and AcceleratedNetworking are nil when the API omits them.
	PremiumIO, AcceleratedNetworking *bool
	// LocalDisks are nil when the API lists none of their capabilities.
	LocalDisks *LocalDisks
	// EncryptionAtHostSupported is nil when the API omits it.
	EncryptionAtHostSupported *bool
	// Zones are the zone numbers ("1", "2", "3") the size is offered in
	// for this subscription; empty for a region without zones.
	Zones []string
	// Restricted says why the subscription cannot use the size in the
	// region at all (a Location restriction); empty when it can.
	Restricted string
}

// Unusable says why a size cannot be an AKS Linux node for karpfunc; "" when
// it can. Apart from a restriction on the subscription, it is the rule the
// embedded catalog's generator applies (exclude.Reason). The Resource SKUs
// API gives a GPU count but neither maker nor model, and those decide the
// driver, so a GPU size is kept only when the embedded catalog knows its GPU.
func (f SKUFacts) Unusable() string {
	if f.Restricted != "" {
		return "restricted for the subscription: " + f.Restricted
	}
	gpu := exclude.NoGPU
	if f.GPUs > 0 {
		gpu = exclude.UnsupportedGPU
		if _, ok := embeddedGPU(f.Name); ok {
			gpu = exclude.SupportedGPU
		}
	}
	// The API's zero values stand for what it did not say: a missing
	// capability reads as 0 vCPUs or 0 GiB, which the rule excludes by size.
	return exclude.Reason(exclude.Facts{
		Name: f.Name, Tier: f.Tier, VCPUs: &f.VCPUs, MemoryGiB: &f.MemoryGiB, Architecture: &f.Architecture, GPU: gpu,
	})
}

type gpuFacts struct {
	count              int64
	name, manufacturer string
}

func embeddedGPU(name string) (gpuFacts, bool) {
	compactFile, err := loadEmbedded()
	if err != nil {
		return gpuFacts{}, false
	}
	for _, sku := range compactFile.SKUs {
		if sku.Name == name && sku.GPUManufacturer != "" {
			return gpuFacts{count: sku.GPUCount, name: sku.GPUName, manufacturer: sku.GPUManufacturer}, true
		}
	}
	return gpuFacts{}, false
}

// RefreshReport counts what BuildFile kept and dropped, by reason.
type RefreshReport struct {
	Kept    int
	Dropped map[string]int
}

// BuildFile writes the catalog file (the format Load reads) for region
// from the SKU facts and prices. A size needs both a usable SKU record and
// an on-demand Linux price; spot is offered where a spot price exists.
// Zonal regions (some SKU lists zones) offer each size in its zones;
// others have one offering per capacity type with zone "". The result is
// checked by parsing it back.
func BuildFile(region string, skus []SKUFacts, prices map[string]Price) ([]byte, RefreshReport, error) {
	report := RefreshReport{Dropped: map[string]int{}}
	if region == "" {
		return nil, report, fmt.Errorf("catalog refresh: region is required")
	}
	zonal := slices.ContainsFunc(skus, func(s SKUFacts) bool { return len(s.Zones) > 0 })
	zoneSet := map[string]bool{}
	var types []fileInstanceType
	seen := map[string]bool{}
	for _, sku := range skus {
		if seen[sku.Name] {
			continue
		}
		seen[sku.Name] = true
		built, zones, dropped := buildInstanceType(region, sku, prices, zonal)
		for _, zone := range zones {
			zoneSet[zone] = true
		}
		if dropped != "" {
			report.Dropped[dropped]++
			continue
		}
		types = append(types, built)
	}
	if len(types) == 0 {
		return nil, report, fmt.Errorf("catalog refresh: no usable VM size in %s has a Linux price (%d SKUs, %d priced; dropped %v)", region, len(skus), len(prices), report.Dropped)
	}
	slices.SortFunc(types, func(a, b fileInstanceType) int { return strings.Compare(a.Name, b.Name) })
	report.Kept = len(types)
	zones := slices.Sorted(maps.Keys(zoneSet))
	if zones == nil {
		zones = []string{}
	}
	raw, err := json.MarshalIndent(refreshFile{Region: region, Zones: zones, InstanceTypes: types}, "", " ")
	if err != nil {
		return nil, report, fmt.Errorf("catalog refresh: encoding: %w", err)
	}
	if _, err := Parse(raw); err != nil {
		return nil, report, fmt.Errorf("catalog refresh: the built catalog does not parse back: %w", err)
	}
	return append(raw, '\n'), report, nil
}

// buildInstanceType turns one SKU into a catalog file entry, or says why it
// is dropped. It also returns the SKU's zones in a zonal region: the
// catalog lists them even when the size is then dropped for its
// generations.
func buildInstanceType(region string, sku SKUFacts, prices map[string]Price, zonal bool) (fileInstanceType, []string, string) {
	if why := sku.Unusable(); why != "" {
		return fileInstanceType{}, nil, why
	}
	price, ok := prices[sku.Name]
	if !ok || price.OnDemand <= 0 {
		return fileInstanceType{}, nil, "no Linux on-demand price"
	}
	var zonalZones []string
	if zonal {
		if len(sku.Zones) == 0 {
			return fileInstanceType{}, nil, "no zone offered"
		}
		for _, zone := range slices.Sorted(slices.Values(sku.Zones)) {
			zonalZones = append(zonalZones, region+"-"+zone)
		}
	}
	generations := fileGenerations(sku.HyperVGenerations)
	if len(generations) == 0 {
		return fileInstanceType{}, zonalZones, "unknown hyper-v generations"
	}
	memMiB := int64(math.Round(sku.MemoryGiB * 1024))
	nodeMemory := NodeMemory(memMiB)
	arch, _ := exclude.KubeArch(sku.Architecture) // Unusable accepted it
	built := fileInstanceType{
		Name:              sku.Name,
		Architecture:      arch,
		HyperVGenerations: generations,
		Capacity:          map[string]string{"cpu": strconv.FormatInt(sku.VCPUs, 10), "memory": nodeMemory.String()},
		// The SKU's memory, not the node's: the label NAP writes.
		Labels: map[string]string{LabelSKUMemory: strconv.FormatInt(memMiB, 10)},
	}
	if sku.PremiumIO != nil {
		built.Labels[LabelSKUStoragePremiumCapable] = strconv.FormatBool(*sku.PremiumIO)
	}
	if sku.AcceleratedNetworking != nil {
		built.Labels[LabelSKUAcceleratedNetworking] = strconv.FormatBool(*sku.AcceleratedNetworking)
	}
	if sku.GPUs > 0 {
		addGPU(&built, sku)
	}
	built.LocalDisks, built.EncryptionAtHostSupported = sku.LocalDisks, sku.EncryptionAtHostSupported
	offeredZones := zonalZones
	if !zonal {
		offeredZones = []string{""}
	}
	for _, zone := range offeredZones {
		built.Offerings = append(built.Offerings, fileOffering{Zone: zone, CapacityType: karpv1.CapacityTypeOnDemand, Price: ptrTo(price.OnDemand)})
		if price.Spot > 0 {
			built.Offerings = append(built.Offerings, fileOffering{Zone: zone, CapacityType: karpv1.CapacityTypeSpot, Price: ptrTo(price.Spot)})
		}
	}
	return built, zonalZones, ""
}

// fileGenerations is the HyperVGenerations capability as the catalog file
// writes it: V1 when the API omits it (Gen1 only), else the known
// generations sorted; empty when none is known.
func fileGenerations(capability []string) []string {
	if len(capability) == 0 {
		return []string{"V1"}
	}
	var generations []string
	for _, generation := range capability {
		if generation = strings.TrimSpace(generation); generation == "V1" || generation == "V2" {
			generations = append(generations, generation)
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(generations)))
}

// addGPU adds a GPU size's GPU capacity and labels, from the embedded
// catalog's knowledge of its GPU.
func addGPU(built *fileInstanceType, sku SKUFacts) {
	gpu, _ := embeddedGPU(sku.Name)
	resourceName := ResourceNvidiaGPU
	if gpu.manufacturer == "amd" {
		resourceName = ResourceAMDGPU
	}
	built.Capacity[string(resourceName)] = strconv.FormatInt(sku.GPUs, 10)
	built.Labels[LabelSKUGPUManufacturer] = gpu.manufacturer
	if gpu.name != "" {
		if size, ok := ParseSizeName(sku.Name); !ok || size.Accelerator == "" {
			built.Labels[LabelSKUGPUName] = gpu.name
		}
	}
}

// refreshFile is file with omitempty where the format allows it.
type refreshFile struct {
	Region        string             `json:"region"`
	Zones         []string           `json:"zones"`
	InstanceTypes []fileInstanceType `json:"instanceTypes"`
}

func ptrTo[T any](v T) *T { return &v }
