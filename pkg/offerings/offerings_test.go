package offerings

import (
	"testing"
	"time"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
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

func TestEntriesFor(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got := EntriesFor([]cloudprovider.Unavailable{{CapacityType: "spot", Family: "standardDSv5Family", Reason: "FamilyQuota", TTL: time.Hour}}, now)
	want := []Entry{{CapacityType: "spot", Family: "standardDSv5Family", Reason: "FamilyQuota", Until: now.Add(time.Hour)}}
	if len(got) != 1 || got[0] != want[0] {
		t.Fatalf("EntriesFor = %+v, want %+v", got, want)
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
