package azure_test

import (
	"context"
	"testing"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/offerings"
)

// TestReadUsage: the launcher reads the regional, spot and family quotas
// through the SDK's usage client; a refusal is an ARMError the caller
// can read.
func TestReadUsage(t *testing.T) {
	arm, launcher := testenv.ARM(t)
	arm.SetQuota(armemulator.Quota{Families: map[string]int64{"standardDSv5Family": 16}, Regional: 64, Spot: 32})
	usage, err := launcher.ReadUsage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if usage.Regional != (offerings.QuotaCounter{Name: "cores", Limit: 64}) || usage.Spot != (offerings.QuotaCounter{Name: "lowPriorityCores", Limit: 32}) {
		t.Errorf("regional %+v, spot %+v; want cores 0/64, lowPriorityCores 0/32", usage.Regional, usage.Spot)
	}
	if got := usage.Families["standarddsv5family"]; got.Limit != 16 || got.Name != "standardDSv5Family" {
		t.Errorf("family standardDSv5Family = %+v; want limit 16 under its own name", got)
	}
	arm.Faults().Add(armemulator.Rule{Operation: armemulator.OpListUsages, Code: "AuthorizationFailed", StatusCode: 403, Count: 1})
	_, err = launcher.ReadUsage(context.Background())
	if ae, ok := azure.AsARMError(err); !ok || ae.StatusCode != 403 || ae.Code != "AuthorizationFailed" {
		t.Errorf("refused usages read: %v; want the 403 AuthorizationFailed as an ARMError", err)
	}
}
