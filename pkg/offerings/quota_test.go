package offerings

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpfunc/karpfunc/pkg/catalog"
)

func sized(name string, cpus int64) *catalog.InstanceType {
	return &catalog.InstanceType{Name: name, Capacity: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI)},
		Offerings: []catalog.Offering{{Zone: "z-1", CapacityType: "spot", Available: true}, {Zone: "z-1", CapacityType: "on-demand", Available: true}}}
}

func TestHeadroom(t *testing.T) {
	d8, d4, e8 := sized("Standard_D8s_v5", 8), sized("Standard_D4s_v5", 4), sized("Standard_E8s_v5", 8)
	usage := Usage{Region: "eastus",
		Families: map[string]QuotaCounter{"standarddsv5family": {Name: "standardDSv5Family", Used: 4, Limit: 16}},
		Regional: QuotaCounter{Name: UsageRegional, Used: 4, Limit: 30},
		Spot:     QuotaCounter{Name: UsageSpot, Used: 0, Limit: 8}}
	cases := []struct {
		name     string
		inFlight []InFlight
		it       *catalog.InstanceType
		ct       string
		quota    string // "" when it fits
	}{
		{"family has room", nil, d8, "on-demand", ""},
		{"an in-flight launch takes the family's room", []InFlight{{d8, "on-demand"}}, d8, "on-demand", "standardDSv5Family"},
		{"a smaller size still fits", []InFlight{{d8, "on-demand"}}, d4, "on-demand", ""},
		{"unlisted family: the region limits", []InFlight{{d8, "on-demand"}, {d8, "on-demand"}, {d8, "on-demand"}}, e8, "on-demand", "cores"},
		{"spot counts only against spot", []InFlight{{d8, "on-demand"}}, e8, "spot", ""},
		{"spot quota full", []InFlight{{e8, "spot"}}, d4, "spot", "lowPriorityCores"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := NewHeadroom(usage, c.inFlight)
			short, ok := h.Fits(c.it, c.ct)
			if ok != (c.quota == "") || short.Quota != c.quota {
				t.Fatalf("Fits = %+v, %t; want quota %q refusing", short, ok, c.quota)
			}
			if !ok && !strings.Contains(short.Error(), "ask for a quota increase of") {
				t.Errorf("shortfall text %q does not say what to ask for", short.Error())
			}
		})
	}
}

func TestHeadroomEntriesAndExhausted(t *testing.T) {
	cat := &catalog.Catalog{InstanceTypes: []*catalog.InstanceType{sized("Standard_D8s_v5", 8), sized("Standard_D2s_v5", 2), sized("Standard_D8as_v5", 8)}}
	h := NewHeadroom(Usage{Region: "eastus", Families: map[string]QuotaCounter{
		"standarddsv5family": {Name: "standardDSv5Family", Used: 12, Limit: 16}}, Spot: QuotaCounter{Name: UsageSpot, Limit: 4}}, nil)
	got := map[string]bool{}
	for _, e := range h.Entries(cat, time.Now().Add(time.Minute)) {
		got[e.CapacityType+"/"+e.InstanceType] = true
		if !IsQuotaReason(e.Reason) {
			t.Errorf("entry %v: reason not a quota reason", e)
		}
	}
	want := map[string]bool{"on-demand/Standard_D8s_v5": true, "spot/Standard_D8s_v5": true, "spot/Standard_D8as_v5": true}
	if len(got) != len(want) {
		t.Errorf("entries %v; want %v", got, want)
	}
	for key := range want {
		if !got[key] {
			t.Errorf("entries %v lack %s", got, key)
		}
	}
	exhausted := h.Exhausted(cat)
	if len(exhausted) != 2 || exhausted[0].Quota != "lowPriorityCores" || exhausted[1].Quota != "standardDSv5Family" ||
		exhausted[1].Left != 4 || exhausted[1].Needed != 8 || exhausted[1].Used != 12 {
		t.Errorf("Exhausted = %+v; want lowPriorityCores and standardDSv5Family (12 used, 4 left, 8 needed)", exhausted)
	}
}
