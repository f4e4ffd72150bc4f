package catalog

import (
	"encoding/json"
	"fmt"
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
	onDemand, spot := map[string]pick{}, map[string]pick{}
	for _, it := range items {
		if it.ARMRegionName != region || it.ARMSkuName == "" || it.Type != "Consumption" ||
			it.ServiceName != "Virtual Machines" || it.UnitOfMeasure != "1 Hour" ||
			(it.CurrencyCode != "" && it.CurrencyCode != "USD") || it.RetailPrice <= 0 {
			continue
		}
		if strings.Contains(it.ProductName, "Windows") || strings.Contains(it.ProductName, "Cloud Services") ||
			strings.Contains(it.MeterName, "Low Priority") || strings.Contains(it.SkuName, "Low Priority") {
			continue
		}
		m := onDemand
		if strings.Contains(it.MeterName, "Spot") || strings.Contains(it.SkuName, "Spot") {
			m = spot
		}
		cur, ok := m[it.ARMSkuName]
		if !ok || it.EffectiveStartDate > cur.date || (it.EffectiveStartDate == cur.date && it.RetailPrice < cur.price) {
			m[it.ARMSkuName] = pick{it.EffectiveStartDate, it.RetailPrice}
		}
	}
	out := make(map[string]Price, len(onDemand))
	for name, p := range onDemand {
		out[name] = Price{OnDemand: p.price, Spot: spot[name].price}
	}
	return out
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
	f, err := loadEmbedded()
	if err != nil {
		return gpuFacts{}, false
	}
	for _, s := range f.SKUs {
		if s.Name == name && s.GPUManufacturer != "" {
			return gpuFacts{count: s.GPUCount, name: s.GPUName, manufacturer: s.GPUManufacturer}, true
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
	for _, s := range skus {
		if seen[s.Name] {
			continue
		}
		seen[s.Name] = true
		if why := s.Unusable(); why != "" {
			report.Dropped[why]++
			continue
		}
		p, ok := prices[s.Name]
		if !ok || p.OnDemand <= 0 {
			report.Dropped["no Linux on-demand price"]++
			continue
		}
		zones := []string{""}
		if zonal {
			if len(s.Zones) == 0 {
				report.Dropped["no zone offered"]++
				continue
			}
			zones = nil
			for _, z := range slices.Sorted(slices.Values(s.Zones)) {
				zones = append(zones, region+"-"+z)
				zoneSet[region+"-"+z] = true
			}
		}
		memMiB := int64(math.Round(s.MemoryGiB * 1024))
		nodeMemory := NodeMemory(memMiB)
		arch, _ := exclude.KubeArch(s.Architecture) // Unusable accepted it
		gens := []string{"V1"}
		if len(s.HyperVGenerations) > 0 {
			gens = nil
			for _, g := range s.HyperVGenerations {
				if g = strings.TrimSpace(g); g == "V1" || g == "V2" {
					gens = append(gens, g)
				}
			}
			if len(gens) == 0 {
				report.Dropped["unknown hyper-v generations"]++
				continue
			}
			gens = slices.Compact(slices.Sorted(slices.Values(gens)))
		}
		it := fileInstanceType{
			Name:              s.Name,
			Architecture:      arch,
			HyperVGenerations: gens,
			Capacity:          map[string]string{"cpu": strconv.FormatInt(s.VCPUs, 10), "memory": nodeMemory.String()},
			// The SKU's memory, not the node's: the label NAP writes.
			Labels: map[string]string{LabelSKUMemory: strconv.FormatInt(memMiB, 10)},
		}
		if s.PremiumIO != nil {
			it.Labels[LabelSKUStoragePremiumCapable] = strconv.FormatBool(*s.PremiumIO)
		}
		if s.AcceleratedNetworking != nil {
			it.Labels[LabelSKUAcceleratedNetworking] = strconv.FormatBool(*s.AcceleratedNetworking)
		}
		if s.GPUs > 0 {
			g, _ := embeddedGPU(s.Name)
			resName := ResourceNvidiaGPU
			if g.manufacturer == "amd" {
				resName = ResourceAMDGPU
			}
			it.Capacity[string(resName)] = strconv.FormatInt(s.GPUs, 10)
			it.Labels[LabelSKUGPUManufacturer] = g.manufacturer
			if g.name != "" {
				if sn, ok := ParseSizeName(s.Name); !ok || sn.Accelerator == "" {
					it.Labels[LabelSKUGPUName] = g.name
				}
			}
		}
		for _, z := range zones {
			it.Offerings = append(it.Offerings, fileOffering{Zone: z, CapacityType: karpv1.CapacityTypeOnDemand, Price: ptrTo(p.OnDemand)})
			if p.Spot > 0 {
				it.Offerings = append(it.Offerings, fileOffering{Zone: z, CapacityType: karpv1.CapacityTypeSpot, Price: ptrTo(p.Spot)})
			}
		}
		types = append(types, it)
	}
	if len(types) == 0 {
		return nil, report, fmt.Errorf("catalog refresh: no usable VM size in %s has a Linux price (%d SKUs, %d priced; dropped %v)", region, len(skus), len(prices), report.Dropped)
	}
	slices.SortFunc(types, func(a, b fileInstanceType) int { return strings.Compare(a.Name, b.Name) })
	report.Kept = len(types)
	f := refreshFile{Region: region, Zones: slices.Sorted(func(yield func(string) bool) {
		for z := range zoneSet {
			if !yield(z) {
				return
			}
		}
	}), InstanceTypes: types}
	if f.Zones == nil {
		f.Zones = []string{}
	}
	raw, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return nil, report, fmt.Errorf("catalog refresh: encoding: %w", err)
	}
	if _, err := Parse(raw); err != nil {
		return nil, report, fmt.Errorf("catalog refresh: the built catalog does not parse back: %w", err)
	}
	return append(raw, '\n'), report, nil
}

// refreshFile is file with omitempty where the format allows it.
type refreshFile struct {
	Region        string             `json:"region"`
	Zones         []string           `json:"zones"`
	InstanceTypes []fileInstanceType `json:"instanceTypes"`
}

func ptrTo[T any](v T) *T { return &v }
