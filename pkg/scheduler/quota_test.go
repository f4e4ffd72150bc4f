package scheduler_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// quotaCatalog has three families (the name's letter), a, the cheapest
// per vCPU, then b, then c, each in a 4- and an 8-vCPU size, on demand
// and spot (spot cheapest of all).
const quotaCatalog = `{"region":"test","zones":["test-1"],"instanceTypes":[
 {"name":"a4","architecture":"amd64","capacity":{"cpu":"4","memory":"16Gi","pods":"250"},"overhead":{},
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.20},{"zone":"test-1","capacityType":"spot","price":0.04}]},
 {"name":"a8","architecture":"amd64","capacity":{"cpu":"8","memory":"32Gi","pods":"250"},"overhead":{},
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.40},{"zone":"test-1","capacityType":"spot","price":0.08}]},
 {"name":"b4","architecture":"amd64","capacity":{"cpu":"4","memory":"16Gi","pods":"250"},"overhead":{},
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.24},{"zone":"test-1","capacityType":"spot","price":0.05}]},
 {"name":"b8","architecture":"amd64","capacity":{"cpu":"8","memory":"32Gi","pods":"250"},"overhead":{},
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.48},{"zone":"test-1","capacityType":"spot","price":0.10}]},
 {"name":"c4","architecture":"amd64","capacity":{"cpu":"4","memory":"16Gi","pods":"250"},"overhead":{},
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.28},{"zone":"test-1","capacityType":"spot","price":0.06}]},
 {"name":"c8","architecture":"amd64","capacity":{"cpu":"8","memory":"32Gi","pods":"250"},"overhead":{},
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.56},{"zone":"test-1","capacityType":"spot","price":0.12}]}]}`

// newTestQuota is a quota budget over quotaCatalog: families a, b and c,
// regional, spot; an on-demand VM counts against its family's quota (its
// name's letter) and the regional, a spot VM against the spot quota. A
// negative or missing limit leaves the quota out (unlimited).
func newTestQuota(families map[string]int64, regional, spot int64) *scheduler.Quota {
	indexOf := map[string]int{}
	var left []int64
	add := func(name string, limit int64) {
		if limit >= 0 {
			indexOf[name] = len(left)
			left = append(left, limit)
		}
	}
	for _, family := range []string{"a", "b", "c"} {
		if limit, ok := families[family]; ok {
			add(family, limit)
		}
	}
	add("regional", regional)
	add("spot", spot)
	return &scheduler.Quota{Left: left, Charged: func(it *catalog.InstanceType, capacityType string) []int {
		names := []string{it.Name[:1], "regional"}
		if capacityType == karpv1.CapacityTypeSpot {
			names = []string{"spot"}
		}
		var out []int
		for _, name := range names {
			if j, ok := indexOf[name]; ok {
				out = append(out, j)
			}
		}
		return out
	}}
}

// charged sums, per quota, the vCPUs of the largest instance type of each
// plan, charged as the plan launches (its cheapest offering's capacity
// type) against the spot quota, or against the regional and the quota of
// every family it may launch in: the most its launch can take.
func charged(r scheduler.Result) map[string]int64 {
	out := map[string]int64{}
	for _, plan := range r.NewNodeClaims {
		var vcpus int64
		for _, it := range plan.InstanceTypes {
			vcpus = max(vcpus, it.Capacity.Cpu().Value())
		}
		if _, offering := plan.Cheapest(); offering.CapacityType == karpv1.CapacityTypeSpot {
			out["spot"] += vcpus
			continue
		}
		families := map[string]bool{}
		for _, it := range plan.InstanceTypes {
			families[it.Name[:1]] = true
		}
		for family := range families {
			out[family] += vcpus
		}
		out["regional"] += vcpus
	}
	return out
}

// TestQuotaBudget: the claims a solve opens fit the quotas together: a
// group of pods larger than the cheapest family's quota is split across
// families, a spent spot quota falls to on-demand, and pods no quota can
// hold are left unschedulable with quota as the reason. Each case's pods
// overflow a quota when the solve is not given it.
func TestQuotaBudget(t *testing.T) {
	onDemand := req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand)
	both := req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeSpot)
	for _, tc := range []struct {
		name     string
		ct       corev1.NodeSelectorRequirement
		pods     int
		families map[string]int64
		regional int64 // negative: not listed
		spot     int64
		placed   int      // pods with a claim
		uses     []string // quotas the claims must take vCPUs of
	}{
		{name: "a group larger than the cheapest family's quota is split across families", ct: onDemand, pods: 20,
			families: map[string]int64{"a": 16, "b": 16, "c": 16}, regional: 100, spot: -1, placed: 20, uses: []string{"a", "b"}},
		{name: "the regional quota caps every family", ct: onDemand, pods: 20,
			families: map[string]int64{"a": 100}, regional: 12, spot: -1, placed: 12, uses: []string{"a"}},
		{name: "a spent spot quota falls to on-demand", ct: both, pods: 12,
			families: map[string]int64{"a": 100}, regional: 100, spot: 8, placed: 12, uses: []string{"spot", "a"}},
		{name: "families the usages do not list are not limited", ct: onDemand, pods: 20,
			families: map[string]int64{"a": 8}, regional: -1, spot: -1, placed: 20, uses: []string{"a", "b"}},
		{name: "no quota holds a VM", ct: onDemand, pods: 3,
			families: map[string]int64{"a": 0, "b": 2, "c": 0}, regional: 100, spot: -1, placed: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat, err := catalog.Parse([]byte(quotaCatalog))
			if err != nil {
				t.Fatal(err)
			}
			in := baseInput(t, pods(tc.pods, "1", "1Gi")...)
			in.Catalog, in.NodePools = cat, []*karpv1.NodePool{nodePool("general", "default", tc.ct)}
			limits := map[string]int64{"regional": tc.regional, "spot": tc.spot}
			for family, limit := range tc.families {
				limits[family] = limit
			}
			over := func(r scheduler.Result) []string {
				var out []string
				for quota, vcpus := range charged(r) {
					if limit, ok := limits[quota]; ok && limit >= 0 && vcpus > limit {
						out = append(out, fmt.Sprintf("%s: %d of %d vCPUs", quota, vcpus, limit))
					}
				}
				return out
			}
			if unlimited := scheduler.Solve(in); len(over(unlimited)) == 0 {
				t.Fatalf("without the quota the claims fit it anyway (%v): the case tests nothing", charged(unlimited))
			}

			in.Quota = newTestQuota(tc.families, tc.regional, tc.spot)
			r := scheduler.Solve(in)
			if excess := over(r); len(excess) > 0 {
				t.Errorf("the claims overrun quotas: %s; %s", strings.Join(excess, ", "), summary(r))
			}
			placed := 0
			for _, plan := range r.NewNodeClaims {
				placed += len(plan.Pods)
				cts := plan.Requirements.Get(karpv1.CapacityTypeLabelKey)
				families := map[string]bool{}
				for _, it := range plan.InstanceTypes {
					families[it.Name[:1]] = true
				}
				limited := 0
				for family := range families {
					if _, ok := tc.families[family]; ok {
						limited++
					}
				}
				if cts.Len() != 1 || (cts.Has(karpv1.CapacityTypeOnDemand) && limited > 0 && len(families) > 1) {
					t.Errorf("a claim is not pinned to one capacity type and family: %v, %s", cts.Values(), typeNames(plan))
				}
			}
			if placed != tc.placed {
				t.Errorf("%d pods placed, want %d; %s", placed, tc.placed, summary(r))
			}
			got := charged(r)
			for _, quota := range tc.uses {
				if got[quota] == 0 {
					t.Errorf("no claim takes %s quota: %v", quota, got)
				}
			}
			for _, u := range r.Unschedulable {
				if !strings.Contains(u.Reason, "quota") {
					t.Errorf("%s unschedulable for %q, which does not name quota", u.Pod.Name, u.Reason)
				}
			}
		})
	}
}

// TestQuotaBudgetPerSolve: each solve starts from the quota it is given:
// two solves over the same input with the same quota plan the same.
func TestQuotaBudgetPerSolve(t *testing.T) {
	cat, err := catalog.Parse([]byte(quotaCatalog))
	if err != nil {
		t.Fatal(err)
	}
	in := baseInput(t, pods(20, "1", "1Gi")...)
	in.Catalog = cat
	in.NodePools = []*karpv1.NodePool{nodePool("general", "default", req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand))}
	in.Quota = newTestQuota(map[string]int64{"a": 8, "b": 8}, 100, -1)
	first, second := summary(scheduler.Solve(in)), summary(scheduler.Solve(in))
	if first != second {
		t.Errorf("a second solve with the same quota plans otherwise:\n%s\n%s", first, second)
	}
}

// splitCatalog has one family, a, on demand only, in 2, 4 and 8 vCPUs at
// the same price per vCPU: a claim bought for a little more than half its
// size is cheaper split into the next size down and a small one.
const splitCatalog = `{"region":"test","zones":["test-1"],"instanceTypes":[
 {"name":"a2","architecture":"amd64","capacity":{"cpu":"2","memory":"8Gi","pods":"250"},"overhead":{},
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.10}]},
 {"name":"a4","architecture":"amd64","capacity":{"cpu":"4","memory":"16Gi","pods":"250"},"overhead":{},
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.20}]},
 {"name":"a8","architecture":"amd64","capacity":{"cpu":"8","memory":"32Gi","pods":"250"},"overhead":{},
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.40}]}]}`

// planPrice is the hourly price of the plans, each at its cheapest
// offering, and their vCPUs at that offering's size.
func planPrice(r scheduler.Result) (float64, int64) {
	var price float64
	var vcpus int64
	for _, plan := range r.NewNodeClaims {
		if it, offering := plan.Cheapest(); it != nil {
			price += offering.Price
			vcpus += it.Capacity.Cpu().Value()
		}
	}
	return price, vcpus
}

// TestQuotaSplitsTheLastClaim: a quota that holds the fleet the solve plans
// without quota leaves the fleet as cheap. The last claim of a fleet, bought
// for what was left over, is split into two smaller ones when they cost
// less, as long as quota holds the two together; quota need not hold a
// second claim as large as the one split.
func TestQuotaSplitsTheLastClaim(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pods     int
		family   int64
		regional int64
	}{
		{name: "the family quota holds the split, not a second claim of the size split", pods: 13, family: 16, regional: 100},
		{name: "the regional quota holds the split, not a second claim of the size split", pods: 13, family: 100, regional: 16},
		{name: "no quota to spare", pods: 13, family: 14, regional: 14},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat, err := catalog.Parse([]byte(splitCatalog))
			if err != nil {
				t.Fatal(err)
			}
			in := baseInput(t, pods(tc.pods, "1", "1Gi")...)
			in.Catalog = cat
			in.NodePools = []*karpv1.NodePool{nodePool("general", "default", req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand))}
			unlimited := scheduler.Solve(in)
			wantPrice, wantVCPUs := planPrice(unlimited)
			if wantVCPUs > min(tc.family, tc.regional) {
				t.Fatalf("the fleet planned without quota (%d vCPUs) does not fit it: the case tests nothing; %s", wantVCPUs, summary(unlimited))
			}

			in.Quota = newTestQuota(map[string]int64{"a": tc.family}, tc.regional, -1)
			r := scheduler.Solve(in)
			placed := 0
			for _, plan := range r.NewNodeClaims {
				placed += len(plan.Pods)
			}
			if placed != tc.pods {
				t.Fatalf("%d of %d pods placed; %s", placed, tc.pods, summary(r))
			}
			if price, vcpus := planPrice(r); price > wantPrice+1e-9 {
				t.Errorf("with quota the fleet costs %.2f $/h (%d vCPUs), without %.2f $/h (%d vCPUs), which quota holds:\nwith:\n%swithout:\n%s",
					price, vcpus, wantPrice, wantVCPUs, summary(r), summary(unlimited))
			}
			for quota, vcpus := range charged(r) {
				if limit := map[string]int64{"a": tc.family, "regional": tc.regional}[quota]; vcpus > limit {
					t.Errorf("the claims take %d vCPUs of the %s quota of %d; %s", vcpus, quota, limit, summary(r))
				}
			}
		})
	}
}

// BenchmarkScheduling5000Quota is BenchmarkScheduling5000 with a quota
// budget that holds the whole fleet: ten families (instance type index
// mod 10), the regional and the spot quota. Compared with
// BenchmarkScheduling5000 it is what charging quota costs a solve.
func BenchmarkScheduling5000Quota(b *testing.B) {
	np := nodePool("default", "default")
	np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("10000000"), corev1.ResourceMemory: resource.MustParse("10000000Gi")}
	cat := karpenterCatalog(b)
	family := map[*catalog.InstanceType]int{}
	for i, it := range cat.InstanceTypes {
		family[it] = i % 10
	}
	left := make([]int64, 12) // ten families, regional (10), spot (11)
	for j := range left {
		left[j] = 1_000_000
	}
	in := scheduler.Input{Pods: makeDiversePods(5000), NodePools: []*karpv1.NodePool{np},
		NodeClasses: []*v1beta1.AKSNodeClass{nodeClass("default", 250)}, Catalog: cat,
		Quota: &scheduler.Quota{Left: left, Charged: func(it *catalog.InstanceType, capacityType string) []int {
			if capacityType == karpv1.CapacityTypeSpot {
				return []int{11}
			}
			return []int{family[it], 10}
		}}}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var nodes int
	for range b.N {
		r := scheduler.Solve(in)
		if len(r.Unschedulable) > 0 {
			b.Fatalf("%d pods unschedulable, first: %s", len(r.Unschedulable), r.Unschedulable[0].Reason)
		}
		nodes = len(r.NewNodeClaims)
	}
	b.ReportMetric(float64(len(in.Pods))/(time.Since(start).Seconds()/float64(b.N)), "pods/s")
	b.ReportMetric(float64(nodes), "nodes")
}
