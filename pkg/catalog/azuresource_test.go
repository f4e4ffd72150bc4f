package catalog_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// pricesServer serves the recorded Retail Prices pages in
// testdata/retail-prices: the first page for the region's filter, the next
// for $skip=100, with the recorded NextPageLink pointed at this server.
func pricesServer(t *testing.T, status int) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/retail/prices" {
			http.NotFound(w, r)
			return
		}
		if status != http.StatusOK {
			http.Error(w, `{"Error":{"Code":"InternalError","Message":"try again"}}`, status)
			return
		}
		want := "serviceName eq 'Virtual Machines' and armRegionName eq 'eastus' and priceType eq 'Consumption'"
		if got := r.URL.Query().Get("$filter"); got != want {
			// The real API answers an unknown region with an empty page.
			_, _ = io.WriteString(w, `{"BillingCurrency":"USD","CustomerEntityId":"Default","CustomerEntityType":"Retail","Items":[],"NextPageLink":null,"Count":0}`)
			return
		}
		page := "eastus-page1.json"
		if r.URL.Query().Get("$skip") == "100" {
			page = "eastus-page2.json"
		}
		raw, err := os.ReadFile(filepath.Join("testdata", "retail-prices", page))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, strings.ReplaceAll(string(raw), "https://prices.azure.com:443", srv.URL))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func resourceSKU(name, arch string, vcpus, memGB, gpus string, zones []string, restrictions ...*armcompute.ResourceSKURestrictions) *armcompute.ResourceSKU {
	s := func(v string) *string { return &v }
	zs := make([]*string, len(zones))
	for i := range zones {
		zs[i] = &zones[i]
	}
	caps := []*armcompute.ResourceSKUCapabilities{{Name: s("vCPUs"), Value: s(vcpus)}, {Name: s("MemoryGB"), Value: s(memGB)},
		{Name: s("PremiumIO"), Value: s("True")}, {Name: s("AcceleratedNetworkingEnabled"), Value: s("True")}}
	if arch != "" {
		// Sizes that state their architecture state their Hyper-V
		// generations too; the GPU size below states neither.
		gens := map[string]string{"x64": "V1,V2", "Arm64": "V2"}[arch]
		caps = append(caps, &armcompute.ResourceSKUCapabilities{Name: s("CpuArchitectureType"), Value: s(arch)},
			&armcompute.ResourceSKUCapabilities{Name: s("HyperVGenerations"), Value: s(gens)})
	}
	if gpus != "" {
		caps = append(caps, &armcompute.ResourceSKUCapabilities{Name: s("GPUs"), Value: s(gpus)})
	}
	return &armcompute.ResourceSKU{
		Name: s(name), Tier: s("Standard"), ResourceType: s("virtualMachines"),
		Locations:    []*string{s("eastus")},
		LocationInfo: []*armcompute.ResourceSKULocationInfo{{Location: s("eastus"), Zones: zs}},
		Capabilities: caps, Restrictions: restrictions,
	}
}

// refreshSKUs are Resource SKU records: sizes with and without
// restrictions, one too small for AKS, one without a price, one in
// another region and a disk.
func refreshSKUs() []*armcompute.ResourceSKU {
	s := func(v string) *string { return &v }
	zoneRestricted := &armcompute.ResourceSKURestrictions{
		Type: ptrOf(armcompute.ResourceSKURestrictionsTypeZone), Values: []*string{s("eastus")},
		RestrictionInfo: &armcompute.ResourceSKURestrictionInfo{Locations: []*string{s("eastus")}, Zones: []*string{s("3")}},
		ReasonCode:      ptrOf(armcompute.ResourceSKURestrictionsReasonCodeNotAvailableForSubscription),
	}
	locationRestricted := &armcompute.ResourceSKURestrictions{
		Type: ptrOf(armcompute.ResourceSKURestrictionsTypeLocation), Values: []*string{s("eastus")},
		RestrictionInfo: &armcompute.ResourceSKURestrictionInfo{Locations: []*string{s("eastus")}},
		ReasonCode:      ptrOf(armcompute.ResourceSKURestrictionsReasonCodeNotAvailableForSubscription),
	}
	westOnly := resourceSKU("Standard_D2s_v5_west", "x64", "2", "8", "", []string{"1"})
	westOnly.Locations = []*string{s("westus")}
	westOnly.LocationInfo[0].Location = s("westus")
	disk := &armcompute.ResourceSKU{Name: s("Premium_LRS"), ResourceType: s("disks"), Locations: []*string{s("eastus")}}
	return []*armcompute.ResourceSKU{
		resourceSKU("Standard_D2s_v5", "x64", "2", "8", "", []string{"1", "2", "3"}),
		resourceSKU("Standard_D4s_v5", "x64", "4", "16", "", []string{"1", "2", "3"}, zoneRestricted),
		resourceSKU("Standard_D8ps_v5", "Arm64", "8", "32", "", []string{"1", "2", "3"}),
		resourceSKU("Standard_E4s_v5", "x64", "4", "32", "", []string{"1", "2", "3"}, locationRestricted),
		resourceSKU("Standard_B1s", "x64", "1", "1", "", []string{"1", "2", "3"}),
		resourceSKU("Standard_NC6s_v3", "", "6", "112", "1", []string{"1", "2"}),
		resourceSKU("Standard_F4s_v2", "x64", "4", "8", "", []string{"1"}), // no price
		westOnly, disk,
	}
}

func ptrOf[T any](v T) *T { return &v }

// TestRefresh refreshes a catalog from a local Retail Prices server
// (recorded-format pages, two of them) and Resource SKU records as ARM
// lists them, then loads the file it wrote.
func TestRefresh(t *testing.T) {
	prices := pricesServer(t, http.StatusOK)
	raw, _, err := catalog.Refresh(context.Background(), catalog.RefreshSource{Region: "eastus", PricesURL: prices.URL + "/api/retail/prices",
		ListSKUs: func(context.Context) ([]*armcompute.ResourceSKU, error) { return refreshSKUs(), nil }})
	if err != nil {
		t.Fatalf("catalog refresh: %v", err)
	}
	out := filepath.Join(t.TempDir(), "eastus.json")
	if err := os.WriteFile(out, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Load(out)
	if err != nil {
		t.Fatalf("loading the refreshed catalog: %v", err)
	}
	var names []string
	for _, it := range c.InstanceTypes {
		names = append(names, it.Name)
	}
	// E4s_v5 is restricted for the subscription, B1s too small for AKS,
	// F4s_v2 has no price, the west SKU is elsewhere, the disk is no VM.
	if want := []string{"Standard_D2s_v5", "Standard_D4s_v5", "Standard_D8ps_v5", "Standard_NC6s_v3"}; !slices.Equal(names, want) {
		t.Fatalf("instance types = %v, want %v", names, want)
	}
	if want := []string{"eastus-1", "eastus-2", "eastus-3"}; !slices.Equal(c.Zones, want) {
		t.Errorf("zones = %v, want %v", c.Zones, want)
	}
	type offer struct {
		zone, ct string
		price    float64
	}
	for _, tc := range []struct {
		name   string
		arch   string
		gens   []string
		labels map[string]string
		offers []offer
	}{
		{name: "Standard_D2s_v5", arch: "amd64", gens: []string{"V1", "V2"}, labels: map[string]string{catalog.LabelSKUMemory: "8192", catalog.LabelSKUCPU: "2", catalog.LabelSKUFamily: "D"},
			offers: []offer{{"eastus-1", "on-demand", 0.096}, {"eastus-1", "spot", 0.020362}, {"eastus-2", "on-demand", 0.096}, {"eastus-2", "spot", 0.020362}, {"eastus-3", "on-demand", 0.096}, {"eastus-3", "spot", 0.020362}}},
		// The latest on-demand meter wins; zone 3 is restricted.
		{name: "Standard_D4s_v5", arch: "amd64", gens: []string{"V1", "V2"}, labels: map[string]string{catalog.LabelSKUMemory: "16384", catalog.LabelSKUStoragePremiumCapable: "true"},
			offers: []offer{{"eastus-1", "on-demand", 0.192}, {"eastus-1", "spot", 0.040723}, {"eastus-2", "on-demand", 0.192}, {"eastus-2", "spot", 0.040723}}},
		{name: "Standard_D8ps_v5", arch: "arm64", gens: []string{"V2"}, labels: map[string]string{corev1.LabelArchStable: "arm64"},
			offers: []offer{{"eastus-1", "on-demand", 0.308}, {"eastus-1", "spot", 0.065111}, {"eastus-2", "on-demand", 0.308}, {"eastus-2", "spot", 0.065111}, {"eastus-3", "on-demand", 0.308}, {"eastus-3", "spot", 0.065111}}},
		// No HyperVGenerations capability: Gen1 only, as ARM reads it.
		{name: "Standard_NC6s_v3", arch: "amd64", gens: []string{"V1"}, labels: map[string]string{catalog.LabelSKUGPUManufacturer: "nvidia", catalog.LabelSKUGPUName: "V100", catalog.LabelSKUGPUCount: "1"},
			offers: []offer{{"eastus-1", "on-demand", 3.06}, {"eastus-1", "spot", 0.3213}, {"eastus-2", "on-demand", 3.06}, {"eastus-2", "spot", 0.3213}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it, _ := c.Get(tc.name)
			if it.Architecture != tc.arch {
				t.Errorf("architecture = %s, want %s", it.Architecture, tc.arch)
			}
			if !slices.Equal(it.HyperVGenerations, tc.gens) {
				t.Errorf("Hyper-V generations = %v, want %v", it.HyperVGenerations, tc.gens)
			}
			for k, v := range tc.labels {
				if it.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, it.Labels[k], v)
				}
			}
			var got []offer
			for _, o := range it.Offerings {
				if !o.Available {
					t.Errorf("offering %s/%s not available", o.Zone, o.CapacityType)
				}
				got = append(got, offer{o.Zone, o.CapacityType, o.Price})
			}
			if !slices.Equal(got, tc.offers) {
				t.Errorf("offerings = %v, want %v", got, tc.offers)
			}
			if a := it.Allocatable(); a.Cpu().Sign() <= 0 || a.Memory().Cmp(*it.Capacity.Memory()) >= 0 {
				t.Errorf("allocatable %v should be positive and below capacity %v (AKS reservations)", a, it.Capacity)
			}
		})
	}
	// The embedded catalog built from public facts agrees on what both know.
	def, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Standard_D2s_v5", "Standard_D8ps_v5"} {
		a, _ := c.Get(name)
		b, _ := def.Get(name)
		aa, ba := a.Allocatable(), b.Allocatable()
		if !aa.Cpu().Equal(*ba.Cpu()) || !a.Capacity.Memory().Equal(*b.Capacity.Memory()) {
			t.Errorf("%s: refreshed capacity %v / allocatable %v, embedded %v / %v", name, a.Capacity, a.Allocatable(), b.Capacity, b.Allocatable())
		}
	}
}

func TestRefreshErrors(t *testing.T) {
	ok := pricesServer(t, http.StatusOK)
	failing := pricesServer(t, http.StatusInternalServerError)
	base := catalog.RefreshSource{Region: "eastus", PricesURL: ok.URL + "/api/retail/prices",
		ListSKUs: func(context.Context) ([]*armcompute.ResourceSKU, error) { return refreshSKUs(), nil }}
	for _, tc := range []struct {
		name   string
		mutate func(*catalog.RefreshSource)
		want   string
	}{
		{"no region", func(o *catalog.RefreshSource) { o.Region = "" }, "a region is required"},
		{"no SKU source", func(o *catalog.RefreshSource) { o.ListSKUs = nil }, "no Resource SKUs source"},
		{"prices API fails", func(o *catalog.RefreshSource) { o.PricesURL = failing.URL + "/api/retail/prices" }, "retail prices page 1"},
		{"prices URL not http", func(o *catalog.RefreshSource) { o.PricesURL = "ftp://x" }, "not an http(s) URL"},
		{"region without prices", func(o *catalog.RefreshSource) { o.Region = "westeurope" }, "no Linux consumption price for westeurope"},
		{"SKUs fail", func(o *catalog.RefreshSource) {
			o.ListSKUs = func(context.Context) ([]*armcompute.ResourceSKU, error) {
				return nil, errors.New("AuthorizationFailed")
			}
		}, "listing resource SKUs in eastus: AuthorizationFailed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := base
			tc.mutate(&src)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _, err := catalog.Refresh(ctx, src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}
