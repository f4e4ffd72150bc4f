package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

const refreshSub = "00000000-0000-0000-0000-00000000c0de"

// pricesServer serves the recorded Retail Prices pages in
// pkg/catalog/testdata/retail-prices: the first page for the region's filter, the next
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
		raw, err := os.ReadFile(filepath.Join("..", "..", "pkg", "catalog", "testdata", "retail-prices", page))
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

func startRefreshEmulator(t *testing.T) *armemulator.Server {
	t.Helper()
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
	emu, err := armemulator.Start(context.Background(), armemulator.Options{
		SubscriptionIDs: []string{refreshSub},
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		SKUs: []*armcompute.ResourceSKU{
			resourceSKU("Standard_D2s_v5", "x64", "2", "8", "", []string{"1", "2", "3"}),
			resourceSKU("Standard_D4s_v5", "x64", "4", "16", "", []string{"1", "2", "3"}, zoneRestricted),
			resourceSKU("Standard_D8ps_v5", "Arm64", "8", "32", "", []string{"1", "2", "3"}),
			resourceSKU("Standard_E4s_v5", "x64", "4", "32", "", []string{"1", "2", "3"}, locationRestricted),
			resourceSKU("Standard_B1s", "x64", "1", "1", "", []string{"1", "2", "3"}),
			resourceSKU("Standard_NC6s_v3", "", "6", "112", "1", []string{"1", "2"}),
			resourceSKU("Standard_F4s_v2", "x64", "4", "8", "", []string{"1"}), // no price
			westOnly, disk,
		},
	})
	if err != nil {
		t.Fatalf("starting the ARM emulator: %v", err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	return emu
}

func ptrOf[T any](v T) *T { return &v }

// TestCatalogRefresh runs `karpfunc catalog refresh` against a local Retail
// Prices server (recorded-format pages, two of them) and the ARM emulator's
// Resource SKUs API through the real ARM client its flags configure, then
// loads the file it wrote.
func TestCatalogRefresh(t *testing.T) {
	prices := pricesServer(t, http.StatusOK)
	emu := startRefreshEmulator(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, emu.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "eastus.json")
	err := runCatalog([]string{"refresh", "--region", "eastus", "--subscription", refreshSub,
		"--prices-url", prices.URL + "/api/retail/prices", "--arm-endpoint", emu.URL(), "--arm-ca-file", caFile,
		"--arm-token", emu.Token(), "-o", out, "--timeout", "1m"})
	if err != nil {
		t.Fatalf("catalog refresh: %v", err)
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
	// What each type holds is pkg/catalog's TestRefresh.
}

func TestCatalogRefreshErrors(t *testing.T) {
	emu := startRefreshEmulator(t)
	ok := pricesServer(t, http.StatusOK)
	failing := pricesServer(t, http.StatusInternalServerError)
	base := refreshOptions{Region: "eastus", Subscription: refreshSub, PricesURL: ok.URL + "/api/retail/prices",
		ARMEndpoint: emu.URL(), ARMCACertPEM: emu.CACertPEM(), ARMToken: emu.Token()}
	for _, tc := range []struct {
		name   string
		mutate func(*refreshOptions)
		want   string
	}{
		{"no region", func(o *refreshOptions) { o.Region = "" }, "--region is required"},
		{"no subscription", func(o *refreshOptions) { o.Subscription = "" }, "--subscription"},
		{"prices API fails", func(o *refreshOptions) { o.PricesURL = failing.URL + "/api/retail/prices" }, "retail prices page 1"},
		{"ARM endpoint not https", func(o *refreshOptions) { o.ARMEndpoint = "http://127.0.0.1:1" }, "must be an https:// URL"},
		{"unknown subscription", func(o *refreshOptions) { o.Subscription = "11111111-1111-1111-1111-111111111111" }, "listing resource SKUs in eastus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.mutate(&o)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _, err := refreshCatalog(ctx, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	if err := runCatalog([]string{"refresh", "--region", "eastus"}); err == nil || !strings.Contains(err.Error(), "-o FILE is required") {
		t.Errorf("missing -o: error = %v", err)
	}
	if err := runCatalog([]string{"bogus"}); err == nil || !strings.Contains(err.Error(), `unknown subcommand "bogus"`) {
		t.Errorf("bad subcommand: error = %v", err)
	}
}
