package scheduler_test

import (
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestSmallCheapTypeTakesThePodsItHolds: when the type cheapest per vCPU
// is a small size (a 2-vCPU burstable priced below every larger size, as
// in several regions) that holds most pods but not all, the pods it holds
// go on nodes of it, and only the pods too big for it (and what fits in
// the room they leave) on larger types. Packing every pod to the types
// that hold the largest pod, as when every small pod joins a larger claim
// some big pod keeps open, costs far more than the bound that knows which
// pods fit which type.
func TestSmallCheapTypeTakesThePodsItHolds(t *testing.T) {
	type size struct {
		name       string
		cpu, gib   int
		pricePerHr float64
	}
	types := []size{
		{"small2", 2, 4, 0.02},                     // $0.010/vCPU, too small for the 6 GiB pods
		{"d4", 4, 16, 0.08}, {"d16", 16, 64, 0.32}, // $0.020/vCPU
		{"e4", 4, 32, 0.10}, {"e16", 16, 128, 0.40}, // $0.025/vCPU, 8 GiB per vCPU
	}
	var its []map[string]any
	for _, s := range types {
		its = append(its, map[string]any{"name": s.name, "architecture": "amd64",
			"capacity":  map[string]string{"cpu": fmt.Sprint(s.cpu), "memory": fmt.Sprintf("%dGi", s.gib)},
			"offerings": []map[string]any{{"zone": "test-1", "capacityType": "on-demand", "price": s.pricePerHr}}})
	}
	raw, err := json.Marshal(map[string]any{"region": "test", "zones": []string{"test-1"}, "instanceTypes": its})
	if err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var ps []*corev1.Pod
	for i := range 240 {
		if i%6 == 0 {
			ps = append(ps, pod(fmt.Sprintf("big%03d", i), "500m", "6Gi"))
		} else {
			ps = append(ps, pod(fmt.Sprintf("small%03d", i), "500m", "512Mi"))
		}
	}
	in := genericInput(c, ps)
	r := scheduler.Solve(in)
	price := fleetPrice(t, in, r)
	bound := fitBound(c, ps)
	if ratio := price / bound; ratio > 1.10 {
		t.Errorf("fleet $%.3f/h is %.3f × the bound that knows which pods fit which type ($%.3f/h), want ≤ 1.10", price, ratio, bound)
		count := map[string]int{}
		for _, nc := range r.NewNodeClaims {
			it, _ := nc.Cheapest()
			count[it.Name]++
		}
		t.Logf("claims by type: %v", count)
	}
}
