package armemulator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/karpfunc/karpfunc/pkg/azure"
)

// quotaSKUs: two 2-vCPU sizes of different families.
func quotaSKUs() []*armcompute.ResourceSKU {
	var skus []*armcompute.ResourceSKU
	for _, sku := range strictSKUs() {
		if deref(sku.Name) == "Standard_D2s_v5" {
			skus = append(skus, sku)
		}
	}
	skus[0].Family = ptr("standardDSv5Family")
	other := *skus[0]
	other.Name, other.Family = ptr("Standard_D2as_v5"), ptr("standardDASv5Family")
	return append(skus, &other)
}

func usages(t *testing.T, s *Server) map[string][2]int64 {
	t.Helper()
	client, err := armcompute.NewUsageClient(sub, token(s.Token()), armOptions(t, s))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]int64{}
	pager := client.NewListPager(loc, nil)
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range page.Value {
			if deref(u.Unit) != "Count" || deref(u.Name.LocalizedValue) == "" {
				t.Errorf("usage %s: unit %q, localized name %q", deref(u.Name.Value), deref(u.Unit), deref(u.Name.LocalizedValue))
			}
			out[deref(u.Name.Value)] = [2]int64{int64(deref(u.CurrentValue)), deref(u.Limit)}
		}
	}
	return out
}

func createVM(t *testing.T, s *Server, name, size string, spot bool) error {
	t.Helper()
	vms, nics := clients(t, s)
	ctx := context.Background()
	np, err := nics.BeginCreateOrUpdate(ctx, rg, name+"-nic", nicBody(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := np.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	body := vmBody(azure.NICResourceID(sub, rg, name+"-nic"), "")
	body.Properties.HardwareProfile.VMSize = ptr(armcompute.VirtualMachineSizeTypes(size))
	if spot {
		body.Properties.Priority = ptr(armcompute.VirtualMachinePriorityTypesSpot)
		body.Properties.EvictionPolicy = ptr(armcompute.VirtualMachineEvictionPolicyTypesDelete)
		body.Properties.BillingProfile = &armcompute.BillingProfile{MaxPrice: ptr(-1.0)}
	}
	_, err = vms.BeginCreateOrUpdate(ctx, rg, name, body, nil)
	return err
}

// TestQuota: creates count against their family's, the regional and the
// spot quota; the usages API reports use and limits; a create past a
// limit is refused with 409 OperationNotAllowed and ARM's message, naming
// the quota with its limit, usage and the cores needed.
func TestQuota(t *testing.T) {
	s := start(t, Options{OpDelay: 10 * time.Millisecond, SKUs: quotaSKUs(),
		Quota: Quota{Families: map[string]int64{"standardDSv5Family": 4}, Regional: 6, Spot: 2}})

	for i := range 2 {
		if err := createVM(t, s, fmt.Sprintf("ds-%d", i), "Standard_D2s_v5", false); err != nil {
			t.Fatalf("create %d within the family quota: %v", i, err)
		}
	}
	refused := func(err error, quota string, limit, usage int) {
		t.Helper()
		var re *azcore.ResponseError
		want := fmt.Sprintf("exceeding approved %s quota. Additional details - Deployment Model: Resource Manager, Location: %s, Current Limit: %d, Current Usage: %d, Additional Required: 2, (Minimum) New Limit Required: %d.",
			quota, loc, limit, usage, usage+2)
		if err == nil || !errors.As(err, &re) || re.StatusCode != http.StatusConflict || re.ErrorCode != "OperationNotAllowed" || !strings.Contains(err.Error(), want) {
			t.Fatalf("create past %s: %v; want 409 OperationNotAllowed with %q", quota, err, want)
		}
		if !azure.IsQuotaError(err) {
			t.Errorf("the launcher's classifier does not read the refusal as quota: %v", err)
		}
	}
	refused(createVM(t, s, "ds-2", "Standard_D2s_v5", false), "standardDSv5Family Cores", 4, 4)
	if err := createVM(t, s, "das-0", "Standard_D2as_v5", false); err != nil {
		t.Fatalf("another family, within the regional quota: %v", err)
	}
	refused(createVM(t, s, "das-1", "Standard_D2as_v5", false), "Total Regional Cores", 6, 6)
	if err := createVM(t, s, "spot-0", "Standard_D2as_v5", true); err != nil {
		t.Fatalf("spot, separate from the regional quota: %v", err)
	}
	refused(createVM(t, s, "spot-1", "Standard_D2as_v5", true), "LowPriorityCores", 2, 2)

	got := usages(t, s)
	want := map[string][2]int64{"cores": {6, 6}, "lowPriorityCores": {2, 2}, "standardDSv5Family": {4, 4}, "standardDASv5Family": {2, 100000}}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("usage %s = %v (current, limit); want %v", name, got[name], w)
		}
	}
	if c := s.Counters(); c.QuotaRefusals != 3 || c.VMCreates != 4 {
		t.Errorf("counters: %d quota refusals, %d creates; want 3, 4", c.QuotaRefusals, c.VMCreates)
	}

	// Raising the quota lets the next create through.
	s.SetQuota(Quota{Families: map[string]int64{"standardDSv5Family": 6}, Regional: 8, Spot: 2})
	if err := createVM(t, s, "ds-3", "Standard_D2s_v5", false); err != nil {
		t.Fatalf("create after raising the quota: %v", err)
	}
}

// TestUsagesProtocol: the usages route checks the api-version like ARM and
// can be faulted (403, 429) like any operation.
func TestUsagesProtocol(t *testing.T) {
	s := start(t, Options{SKUs: quotaSKUs()})
	req, _ := http.NewRequest(http.MethodGet, s.URL()+"/subscriptions/"+sub+"/providers/Microsoft.Compute/locations/"+loc+"/usages?api-version=2019-01-01", nil)
	req.Header.Set("Authorization", "Bearer "+s.Token())
	resp, err := httpClient(t, s).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("usages with an api-version the type does not know: HTTP %d; want 400", resp.StatusCode)
	}
	s.Faults().Add(Rule{Operation: OpListUsages, Code: "AuthorizationFailed", StatusCode: http.StatusForbidden})
	client, _ := armcompute.NewUsageClient(sub, token(s.Token()), armOptions(t, s))
	_, err = client.NewListPager(loc, nil).NextPage(context.Background())
	if armCode(err) != "AuthorizationFailed" {
		t.Errorf("faulted usages: %v; want AuthorizationFailed", err)
	}
}
