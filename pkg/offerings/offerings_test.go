package offerings

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

func TestQuotaFamily(t *testing.T) {
	for _, c := range []struct{ size, want string }{
		{"Standard_D4s_v5", "standardDSv5Family"},
		{"Standard_D8as_v5", "standardDASv5Family"},
		{"Standard_D16lds_v5", "standardDLDSv5Family"},
		{"Standard_E4_v3", "standardEv3Family"},
		{"Standard_A2", "standardAFamily"},
		{"Standard_", ""},
		{"garbage", ""},
	} {
		if got := QuotaFamily(c.size); got != c.want {
			t.Errorf("QuotaFamily(%q) = %q, want %q", c.size, got, c.want)
		}
	}
}

func TestForLaunchError(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	it := &catalog.InstanceType{Name: "Standard_D4s_v5"}
	spot := catalog.Offering{Zone: "eastus-1", CapacityType: "spot", Available: true}
	od := catalog.Offering{Zone: "eastus-2", CapacityType: "on-demand", Available: true}
	arm := func(status int, code, msg string) error {
		return errors.Join(errors.New("creating VM"), azure.NewARMError(status, code, msg))
	}
	for _, c := range []struct {
		name string
		err  error
		off  catalog.Offering
		want []Entry // Reason ignored when empty
		ok   bool
	}{
		{"zonal allocation: this size in this zone, 3m", arm(200, "ZonalAllocationFailed", "x"), spot,
			[]Entry{{CapacityType: "spot", InstanceType: it.Name, Zone: "eastus-1", Until: now.Add(DefaultTTL)}}, true},
		{"regional allocation: this size in every zone, 1h", arm(409, "AllocationFailed", "x"), od,
			[]Entry{{CapacityType: "on-demand", InstanceType: it.Name, Until: now.Add(AllocationFailureTTL)}}, true},
		{"SkuNotAvailable on-demand: 23h", arm(409, "SkuNotAvailable", "x"), od,
			[]Entry{{CapacityType: "on-demand", InstanceType: it.Name, Until: now.Add(SKUNotAvailableOnDemandTTL)}}, true},
		{"SkuNotAvailable spot: 1h", arm(409, "SkuNotAvailable", "x"), spot,
			[]Entry{{CapacityType: "spot", InstanceType: it.Name, Until: now.Add(SKUNotAvailableSpotTTL)}}, true},
		{"low-priority quota: all spot", arm(409, "OperationNotAllowed", "Operation results in exceeding approved LowPriorityCores quota"), spot,
			[]Entry{{CapacityType: "spot", Until: now.Add(SubscriptionQuotaTTL)}}, true},
		{"family quota: the family named in the message", arm(409, "OperationNotAllowed", "exceeding approved standardDSv5Family Cores quota"), od,
			[]Entry{{CapacityType: "on-demand", Family: "standardDSv5Family", Until: now.Add(SubscriptionQuotaTTL)}}, true},
		{"regional quota: all on-demand", arm(409, "OperationNotAllowed", "exceeding approved Total Regional Cores quota"), od,
			[]Entry{{CapacityType: "on-demand", Until: now.Add(RegionalQuotaTTL)}}, true},
		{"QuotaExceeded code without a family: the size's family", arm(409, "QuotaExceeded", "no"), od,
			[]Entry{{CapacityType: "on-demand", Family: "standardDSv5Family", Until: now.Add(SubscriptionQuotaTTL)}}, true},
		{"throttling marks nothing", arm(http.StatusTooManyRequests, "TooManyRequests", "slow down"), od, nil, false},
		{"5xx marks nothing", arm(500, "InternalServerError", "oops"), od, nil, false},
		{"OperationNotAllowed without quota marks nothing", arm(409, "OperationNotAllowed", "VM is being deleted"), od, nil, false},
		{"non-ARM error marks nothing", errors.New("dial tcp: refused"), od, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ForLaunchError(c.err, it, c.off, now)
			if ok != c.ok || len(got) != len(c.want) {
				t.Fatalf("got %+v, %t; want %+v, %t", got, ok, c.want, c.ok)
			}
			for i := range got {
				g, w := got[i], c.want[i]
				g.Reason = ""
				if g != w {
					t.Errorf("entry %d = %+v, want %+v", i, got[i], w)
				}
				if got[i].Reason == "" {
					t.Errorf("entry %d has no reason", i)
				}
			}
		})
	}
}

func TestSetApply(t *testing.T) {
	now := time.Now()
	mk := func() *catalog.Catalog {
		return &catalog.Catalog{InstanceTypes: []*catalog.InstanceType{
			{Name: "Standard_D2s_v5", Offerings: []catalog.Offering{{Zone: "z-1", CapacityType: "spot", Available: true}, {Zone: "z-2", CapacityType: "spot", Available: true}, {Zone: "z-1", CapacityType: "on-demand", Available: true}}},
			{Name: "Standard_E2s_v5", Offerings: []catalog.Offering{{Zone: "z-1", CapacityType: "spot", Available: true}}},
		}}
	}
	for _, c := range []struct {
		name    string
		entries []Entry
		want    map[string][]bool // instance type -> Available per offering
	}{
		{"empty set changes nothing", nil, map[string][]bool{"Standard_D2s_v5": {true, true, true}, "Standard_E2s_v5": {true}}},
		{"one zone of one size", []Entry{{CapacityType: "spot", InstanceType: "Standard_D2s_v5", Zone: "z-1", Until: now.Add(time.Hour)}},
			map[string][]bool{"Standard_D2s_v5": {false, true, true}, "Standard_E2s_v5": {true}}},
		{"all spot", []Entry{{CapacityType: "spot", Until: now.Add(time.Hour)}},
			map[string][]bool{"Standard_D2s_v5": {false, false, true}, "Standard_E2s_v5": {false}}},
		{"a quota family", []Entry{{CapacityType: "spot", Family: "standardESv5Family", Until: now.Add(time.Hour)}},
			map[string][]bool{"Standard_D2s_v5": {true, true, true}, "Standard_E2s_v5": {false}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			orig := mk()
			got := (&Set{}).With(c.entries...).Apply(orig)
			for _, it := range got.InstanceTypes {
				for i, o := range it.Offerings {
					if o.Available != c.want[it.Name][i] {
						t.Errorf("%s offering %d (%s %s): available %t, want %t", it.Name, i, o.Zone, o.CapacityType, o.Available, c.want[it.Name][i])
					}
				}
			}
			for _, it := range orig.InstanceTypes {
				for _, o := range it.Offerings {
					if !o.Available {
						t.Fatalf("Apply changed the shared catalog: %s %+v", it.Name, o)
					}
				}
			}
		})
	}
}
