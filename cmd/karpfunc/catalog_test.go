package main

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// What a refresh keeps and drops, and what each kept type holds, is
// pkg/catalog's TestRefresh and TestRefreshErrors. These tests cover the
// command's own part: its flags, the ARM client they configure (endpoint,
// CA file, token, subscription) and where the file goes.

const refreshSub = "00000000-0000-0000-0000-00000000c0de"

// refreshSKU is the one size the tests' ARM lists; it is in no other
// source, so a catalog that holds it was read through the ARM client.
const refreshSKU = "Standard_D2s_v5"

// onePricePage is a Retail Prices API page with refreshSKU's Linux
// pay-as-you-go and Spot meters in eastus, and no next page.
const onePricePage = `{"BillingCurrency":"USD","CustomerEntityId":"Default","CustomerEntityType":"Retail","Items":[
{"currencyCode":"USD","retailPrice":0.096,"unitPrice":0.096,"armRegionName":"eastus","meterName":"D2s v5","productName":"Virtual Machines Dsv5 Series","skuName":"D2s v5","serviceName":"Virtual Machines","unitOfMeasure":"1 Hour","type":"Consumption","isPrimaryMeterRegion":true,"armSkuName":"Standard_D2s_v5","effectiveStartDate":"2023-05-01T00:00:00Z"},
{"currencyCode":"USD","retailPrice":0.020362,"unitPrice":0.020362,"armRegionName":"eastus","meterName":"D2s v5 Spot","productName":"Virtual Machines Dsv5 Series","skuName":"D2s v5 Spot","serviceName":"Virtual Machines","unitOfMeasure":"1 Hour","type":"Consumption","isPrimaryMeterRegion":true,"armSkuName":"Standard_D2s_v5","effectiveStartDate":"2023-05-01T00:00:00Z"}
],"NextPageLink":null,"Count":2}`

// pricesServer serves onePricePage at the Retail Prices API's path.
func pricesServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/retail/prices" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, onePricePage)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// startRefreshEmulator is an ARM that lists refreshSKU in eastus's three
// zones, for refreshSub only.
func startRefreshEmulator(t *testing.T) *armemulator.Server {
	t.Helper()
	str := func(value string) *string { return &value }
	capability := func(name, value string) *armcompute.ResourceSKUCapabilities {
		return &armcompute.ResourceSKUCapabilities{Name: str(name), Value: str(value)}
	}
	sku := &armcompute.ResourceSKU{
		Name: str(refreshSKU), Tier: str("Standard"), ResourceType: str("virtualMachines"),
		Locations:    []*string{str("eastus")},
		LocationInfo: []*armcompute.ResourceSKULocationInfo{{Location: str("eastus"), Zones: []*string{str("1"), str("2"), str("3")}}},
		Capabilities: []*armcompute.ResourceSKUCapabilities{capability("vCPUs", "2"), capability("MemoryGB", "8"),
			capability("PremiumIO", "True"), capability("AcceleratedNetworkingEnabled", "True"),
			capability("CpuArchitectureType", "x64"), capability("HyperVGenerations", "V1,V2")},
	}
	emu, err := armemulator.Start(context.Background(), armemulator.Options{
		SubscriptionIDs: []string{refreshSub},
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		SKUs:            []*armcompute.ResourceSKU{sku},
	})
	if err != nil {
		t.Fatalf("starting the ARM emulator: %v", err)
	}
	t.Cleanup(func() { _ = emu.Close() })
	return emu
}

// refreshFlags are the flags of a refresh that succeeds against emu and
// prices, writing to out; set replaces a flag's value, and "" drops the
// flag.
func refreshFlags(t *testing.T, emu *armemulator.Server, prices *httptest.Server, out string, set map[string]string) []string {
	t.Helper()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, emu.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := map[string]string{"--region": "eastus", "--subscription": refreshSub, "--prices-url": prices.URL + "/api/retail/prices",
		"--arm-endpoint": emu.URL(), "--arm-ca-file": caFile, "--arm-token": emu.Token(), "-o": out, "--timeout": "1m"}
	for name, value := range set {
		flags[name] = value
	}
	args := []string{"refresh"}
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		if flags[name] != "" {
			args = append(args, name, flags[name])
		}
	}
	return args
}

// clearAzureEnv unsets the variables the flags default from, so a flag
// left out is empty whatever the machine's environment holds.
func clearAzureEnv(t *testing.T) {
	for _, name := range []string{azure.EnvSubscriptionID, azure.EnvEndpoint, azure.EnvCAFile, azure.EnvToken} {
		t.Setenv(name, "")
	}
}

// instanceTypes is the names of the instance types in a catalog file's
// bytes.
func instanceTypes(t *testing.T, raw []byte) []string {
	t.Helper()
	cat, err := catalog.Parse(raw)
	if err != nil {
		t.Fatalf("parsing the refreshed catalog: %v", err)
	}
	var names []string
	for _, it := range cat.InstanceTypes {
		names = append(names, it.Name)
	}
	return names
}

// TestCatalogRefresh runs `karpfunc catalog refresh` with its flags
// pointing at the ARM emulator (endpoint, CA file, token) and a Retail
// Prices server: the file -o names, or stdout for -o -, holds the size
// only that ARM listed.
func TestCatalogRefresh(t *testing.T) {
	clearAzureEnv(t)
	emu := startRefreshEmulator(t)
	prices := pricesServer(t)

	t.Run("to a file", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "eastus.json")
		if err := runCatalog(refreshFlags(t, emu, prices, out, nil)); err != nil {
			t.Fatalf("catalog refresh: %v", err)
		}
		raw, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if names := instanceTypes(t, raw); !slices.Equal(names, []string{refreshSKU}) {
			t.Errorf("instance types = %v, want [%s]", names, refreshSKU)
		}
	})

	t.Run("to stdout", func(t *testing.T) {
		stdout, err := os.CreateTemp(t.TempDir(), "stdout")
		if err != nil {
			t.Fatal(err)
		}
		saved := os.Stdout
		os.Stdout = stdout
		err = runCatalog(refreshFlags(t, emu, prices, "-", nil))
		os.Stdout = saved
		if err != nil {
			t.Fatalf("catalog refresh: %v", err)
		}
		raw, err := os.ReadFile(stdout.Name())
		if err != nil {
			t.Fatal(err)
		}
		if names := instanceTypes(t, raw); !slices.Equal(names, []string{refreshSKU}) {
			t.Errorf("instance types on stdout = %v, want [%s]", names, refreshSKU)
		}
	})
}

// TestCatalogRefreshErrors: each flag the command needs, and each way its
// ARM client can be misconfigured, is refused with an error that names it.
func TestCatalogRefreshErrors(t *testing.T) {
	clearAzureEnv(t)
	emu := startRefreshEmulator(t)
	prices := pricesServer(t)
	// A PEM certificate, but not the one that signed emu's: the TLS
	// handshake fails.
	otherCA := filepath.Join(t.TempDir(), "other.pem")
	if err := os.WriteFile(otherCA, startRefreshEmulator(t).CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		set  map[string]string
		want string
	}{
		{"no -o", map[string]string{"-o": ""}, "-o FILE is required"},
		{"no region", map[string]string{"--region": ""}, "--region is required"},
		{"no subscription", map[string]string{"--subscription": ""}, "--subscription (or $" + azure.EnvSubscriptionID + ") is required"},
		{"unreadable CA file", map[string]string{"--arm-ca-file": filepath.Join(t.TempDir(), "missing.pem")}, "reading --arm-ca-file"},
		{"ARM endpoint not https", map[string]string{"--arm-endpoint": "http://127.0.0.1:1"}, "must be an https:// URL"},
		{"CA that does not sign the endpoint", map[string]string{"--arm-ca-file": otherCA}, "listing resource SKUs in eastus"},
		{"subscription ARM does not know", map[string]string{"--subscription": "11111111-1111-1111-1111-111111111111"}, "listing resource SKUs in eastus"},
		{"bad duration", map[string]string{"--timeout": "soon"}, "invalid value \"soon\" for flag -timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := refreshFlags(t, emu, prices, filepath.Join(t.TempDir(), "eastus.json"), tc.set)
			err := runCatalog(args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", nil, "missing subcommand"},
		{"unknown subcommand", []string{"bogus"}, `unknown subcommand "bogus"`},
		{"extra argument", append(refreshFlags(t, emu, prices, filepath.Join(t.TempDir(), "eastus.json"), nil), "extra"), `unexpected argument "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := runCatalog(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}
