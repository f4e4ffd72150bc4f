package catalog_test

import (
	"strings"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

func TestLinuxPrices(t *testing.T) {
	item := func(sku, meter, product, skuName string, price float64, mutate ...func(*catalog.RetailPriceItem)) catalog.RetailPriceItem {
		it := catalog.RetailPriceItem{CurrencyCode: "USD", RetailPrice: price, UnitPrice: price, ARMRegionName: "eastus", Location: "US East",
			EffectiveStartDate: "2024-01-01T00:00:00Z", MeterName: meter, ProductName: product, SkuName: skuName,
			ServiceName: "Virtual Machines", UnitOfMeasure: "1 Hour", Type: "Consumption", ARMSkuName: sku}
		for _, m := range mutate {
			m(&it)
		}
		return it
	}
	for _, tc := range []struct {
		name  string
		items []catalog.RetailPriceItem
		want  map[string]catalog.Price
	}{
		{"on-demand and spot", []catalog.RetailPriceItem{
			item("Standard_D2s_v5", "D2s v5", "Virtual Machines Dsv5 Series", "D2s v5", 0.096),
			item("Standard_D2s_v5", "D2s v5 Spot", "Virtual Machines Dsv5 Series", "D2s v5 Spot", 0.02),
		}, map[string]catalog.Price{"Standard_D2s_v5": {OnDemand: 0.096, Spot: 0.02}}},
		{"windows, low priority, other regions, reservations and dev/test are ignored", []catalog.RetailPriceItem{
			item("Standard_D2s_v5", "D2s v5", "Virtual Machines Dsv5 Series Windows", "D2s v5", 0.188),
			item("Standard_D2s_v5", "D2s v5 Low Priority", "Virtual Machines Dsv5 Series", "D2s v5 Low Priority", 0.019),
			item("Standard_D2s_v5", "D2s v5", "Virtual Machines Dsv5 Series", "D2s v5", 0.104, func(i *catalog.RetailPriceItem) { i.ARMRegionName = "westus" }),
			item("Standard_D2s_v5", "D2s v5", "Virtual Machines Dsv5 Series", "D2s v5", 441, func(i *catalog.RetailPriceItem) { i.Type = "Reservation"; i.UnitOfMeasure = "1 Year" }),
			item("Standard_D2s_v5", "D2s v5", "Virtual Machines Dsv5 Series", "D2s v5", 0.05, func(i *catalog.RetailPriceItem) { i.Type = "DevTestConsumption" }),
			item("Standard_D2s_v5", "D2s v5", "Virtual Machines Dsv5 Series", "D2s v5", 0.096),
		}, map[string]catalog.Price{"Standard_D2s_v5": {OnDemand: 0.096}}},
		{"the latest meter wins", []catalog.RetailPriceItem{
			item("Standard_D4s_v5", "D4s v5", "Virtual Machines Dsv5 Series", "D4s v5", 0.2, func(i *catalog.RetailPriceItem) { i.EffectiveStartDate = "2021-01-01T00:00:00Z" }),
			item("Standard_D4s_v5", "D4s v5", "Virtual Machines Dsv5 Series", "D4s v5", 0.192),
		}, map[string]catalog.Price{"Standard_D4s_v5": {OnDemand: 0.192}}},
		{"spot without on-demand is no price", []catalog.RetailPriceItem{
			item("Standard_D4s_v5", "D4s v5 Spot", "Virtual Machines Dsv5 Series", "D4s v5 Spot", 0.04),
		}, map[string]catalog.Price{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := catalog.LinuxPrices("eastus", tc.items)
			if len(got) != len(tc.want) {
				t.Fatalf("prices = %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %+v, want %+v", k, got[k], v)
				}
			}
		})
	}
}

func TestBuildFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		region string
		skus   []catalog.SKUFacts
		prices map[string]catalog.Price
		want   string
	}{
		{"no region", "", nil, nil, "region is required"},
		{"nothing usable", "eastus", []catalog.SKUFacts{{Name: "Standard_B1s", Tier: "Standard", VCPUs: 1, MemoryGiB: 1, Architecture: "x64"}},
			map[string]catalog.Price{"Standard_B1s": {OnDemand: 0.01}}, "no usable VM size in eastus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := catalog.BuildFile(tc.region, tc.skus, tc.prices)
			if err == nil || !contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
		})
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestUnusable checks what refresh adds to the shared exclusion rule (whose
// own table test is in internal/exclude): the subscription's restrictions,
// and GPU support looked up in the embedded catalog.
func TestUnusable(t *testing.T) {
	d4 := catalog.SKUFacts{Name: "Standard_D4s_v5", Tier: "Standard", VCPUs: 4, MemoryGiB: 16, Architecture: "x64"}
	with := func(f catalog.SKUFacts, change func(*catalog.SKUFacts)) catalog.SKUFacts { change(&f); return f }
	for _, tc := range []struct {
		name  string
		facts catalog.SKUFacts
		want  string
	}{
		{"usable", d4, ""},
		{"restricted for the subscription", with(d4, func(f *catalog.SKUFacts) { f.Restricted = "NotAvailableForSubscription" }),
			"restricted for the subscription: NotAvailableForSubscription"},
		{"GPU the embedded catalog knows", catalog.SKUFacts{Name: "Standard_NC24ads_A100_v4", Tier: "Standard", VCPUs: 24, MemoryGiB: 220, Architecture: "x64", GPUs: 1}, ""},
		{"GPU the embedded catalog does not know", with(d4, func(f *catalog.SKUFacts) { f.Name, f.GPUs = "Standard_NG8ads_V620_v1", 1 }), "gpu not in the supported list"},
		{"capabilities the API left out read as 0", with(d4, func(f *catalog.SKUFacts) { f.VCPUs, f.MemoryGiB = 0, 0 }), "fewer than 2 vCPUs"},
		{"the shared rule applies", with(d4, func(f *catalog.SKUFacts) { f.Name = "Standard_M8-2ms" }), "constrained vCPU"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.facts.Unusable(); got != tc.want {
				t.Errorf("Unusable() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestBuildFileWritesGenerations: refresh writes each size's Hyper-V
// generations from the SKU API; a size that does not list the capability
// boots Gen1 only, as ARM reads it.
func TestBuildFileWritesGenerations(t *testing.T) {
	d4 := catalog.SKUFacts{Name: "Standard_D4s_v5", Tier: "Standard", VCPUs: 4, MemoryGiB: 16, Architecture: "x64", HyperVGenerations: []string{"V2", "V1"}}
	d2 := catalog.SKUFacts{Name: "Standard_D2_v3", Tier: "Standard", VCPUs: 2, MemoryGiB: 8, Architecture: "x64"}
	bad := catalog.SKUFacts{Name: "Standard_X4", Tier: "Standard", VCPUs: 4, MemoryGiB: 16, Architecture: "x64", HyperVGenerations: []string{"V9"}}
	raw, report, err := catalog.BuildFile("westus", []catalog.SKUFacts{d4, d2, bad}, map[string]catalog.Price{
		"Standard_D4s_v5": {OnDemand: 0.2}, "Standard_D2_v3": {OnDemand: 0.1}, "Standard_X4": {OnDemand: 0.3}})
	if err != nil {
		t.Fatal(err)
	}
	if report.Dropped["unknown hyper-v generations"] != 1 {
		t.Errorf("dropped = %v, want Standard_X4 for its unknown generation", report.Dropped)
	}
	c, err := catalog.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"Standard_D4s_v5": "V1,V2", "Standard_D2_v3": "V1"} {
		it, ok := c.Get(name)
		if !ok {
			t.Fatalf("%s missing from %s", name, raw)
		}
		if got := strings.Join(it.HyperVGenerations, ","); got != want {
			t.Errorf("%s generations = %s, want %s", name, got, want)
		}
	}
}
