package provisioning

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/offerings"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// TestFitQuota: plans are charged in order against quota; a plan whose
// cheapest family has no room left moves to the next family that has,
// narrowed to it; a plan nothing fits is refused with the shortfall.
func TestFitQuota(t *testing.T) {
	sized := func(name string, cpus int64, onDemand, spot float64) *catalog.InstanceType {
		return &catalog.InstanceType{Name: name, Capacity: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI)},
			Offerings: []catalog.Offering{{Zone: "eastus-1", CapacityType: karpv1.CapacityTypeOnDemand, Price: onDemand, Available: true},
				{Zone: "eastus-1", CapacityType: karpv1.CapacityTypeSpot, Price: spot, Available: true}}}
	}
	ds, das, es := sized("Standard_D4s_v5", 4, 0.10, 0.02), sized("Standard_D4as_v5", 4, 0.11, 0.03), sized("Standard_E4s_v5", 4, 0.20, 0.05)
	newPlan := func() *scheduler.NodeClaimPlan {
		return &scheduler.NodeClaimPlan{InstanceTypes: []*catalog.InstanceType{ds, das, es}, Requirements: scheduling.NewRequirements(
			scheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, ds.Name, das.Name, es.Name),
			scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, "eastus-1"),
			scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand))}
	}
	usage := offerings.Usage{Region: "eastus",
		Families: map[string]offerings.QuotaCounter{
			"standarddsv5family":  {Name: "standardDSv5Family", Used: 8, Limit: 16},
			"standarddasv5family": {Name: "standardDASv5Family", Used: 0, Limit: 4},
			"standardesv5family":  {Name: "standardESv5Family", Used: 0, Limit: 0}},
		Regional: offerings.QuotaCounter{Name: offerings.UsageRegional, Limit: 100},
		Spot:     offerings.QuotaCounter{Name: offerings.UsageSpot, Used: 0, Limit: 4}}
	plans := []*scheduler.NodeClaimPlan{newPlan(), newPlan(), newPlan(), newPlan(), newPlan()}
	kept, refused := fitQuota(offerings.NewHeadroom(usage, nil), plans)

	want := []struct{ family, capacityType string }{
		{"standardDSv5Family", karpv1.CapacityTypeSpot},     // spot quota holds one 4-vCPU VM
		{"standardDSv5Family", karpv1.CapacityTypeOnDemand}, // then the cheapest on-demand family
		{"standardDSv5Family", karpv1.CapacityTypeOnDemand},
		{"standardDASv5Family", karpv1.CapacityTypeOnDemand}, // DSv5 is full: the next family
	}
	if len(kept) != len(want) {
		t.Fatalf("kept %d plans; want %d", len(kept), len(want))
	}
	for i, plan := range kept {
		it, offering := plan.Cheapest()
		if it == nil || offerings.QuotaFamily(it.Name) != want[i].family || offering.CapacityType != want[i].capacityType {
			t.Errorf("plan %d launches as %v %s; want %s %s", i, it, offering.CapacityType, want[i].family, want[i].capacityType)
		}
		for _, other := range plan.InstanceTypes {
			if offerings.QuotaFamily(other.Name) != want[i].family {
				t.Errorf("plan %d keeps %s, outside %s", i, other.Name, want[i].family)
			}
		}
		if ct := plan.Requirements.Get(karpv1.CapacityTypeLabelKey); ct.Len() != 1 || !ct.Has(want[i].capacityType) {
			t.Errorf("plan %d capacity types %v; want only %s", i, ct.Values(), want[i].capacityType)
		}
	}
	short, ok := refused[plans[4]]
	if len(refused) != 1 || !ok || short.Quota == "" || short.Left != 0 || short.Needed != 4 {
		t.Errorf("refused %v; want the last plan, with its cheapest offering's shortfall (0 left, 4 needed)", refused)
	}
}

// TestHeadroomReadFailure: with the usages API refusing, a pass gets no
// headroom (it goes on without quota awareness), the failure is logged
// once over many passes, the API is asked again only after the TTL, and
// quota awareness comes back with the first read that works.
func TestHeadroomReadFailure(t *testing.T) {
	arm, launcher := testenv.ARM(t)
	arm.Faults().Add(armemulator.Rule{Operation: armemulator.OpListUsages, Code: "AuthorizationFailed", StatusCode: 403, Count: 2})
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var logs bytes.Buffer
	p := New(Options{Quota: launcher, QuotaTTL: 10 * time.Second, Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	snap, cat := &snapshot.Cluster{}, &catalog.Catalog{}
	ctx := context.Background()
	for range 5 {
		if h := p.headroom(ctx, snap, cat); h != nil {
			t.Fatalf("headroom with the usages API refusing: %+v", h)
		}
		clk.Step(time.Second)
	}
	if asked := arm.Counters().Requests[armemulator.OpListUsages]; asked != 1 {
		t.Errorf("usages asked %d times within the TTL; want 1", asked)
	}
	clk.Step(10 * time.Second)
	if h := p.headroom(ctx, snap, cat); h != nil {
		t.Fatalf("headroom after the TTL, the API still refusing: %+v", h)
	}
	clk.Step(10 * time.Second)
	if h := p.headroom(ctx, snap, cat); h == nil {
		t.Fatalf("no headroom once the usages API answers")
	}
	if n := strings.Count(logs.String(), "provisioning goes on without quota awareness"); n != 1 {
		t.Errorf("the failure logged %d times; want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "provisioning is quota-aware") {
		t.Errorf("the recovery is not logged:\n%s", logs.String())
	}
}

// TestHeadroomThrottled: with the usages API throttling (429, past the
// SDK's own retries), a pass gets no headroom and goes on without quota
// awareness; the throttling is logged once, and awareness comes back with
// the first read that works.
func TestHeadroomThrottled(t *testing.T) {
	arm, launcher := testenv.ARM(t)
	arm.Faults().Add(armemulator.Rule{Operation: armemulator.OpListUsages, Code: "TooManyRequests", StatusCode: 429, Count: 100})
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var logs bytes.Buffer
	p := New(Options{Quota: launcher, QuotaTTL: 10 * time.Second, Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	snap, cat := &snapshot.Cluster{}, &catalog.Catalog{}
	ctx := context.Background()
	for range 3 {
		if h := p.headroom(ctx, snap, cat); h != nil {
			t.Fatalf("headroom with the usages API throttling: %+v", h)
		}
		clk.Step(10 * time.Second)
	}
	if n := strings.Count(logs.String(), "provisioning goes on without quota awareness"); n != 1 {
		t.Errorf("the throttling logged %d times over three reads; want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "429") {
		t.Errorf("the log does not say the API throttled (429):\n%s", logs.String())
	}
	arm.Faults().Reset()
	if h := p.headroom(ctx, snap, cat); h == nil {
		t.Fatalf("no headroom once the usages API answers")
	}
}
