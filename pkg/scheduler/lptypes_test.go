package scheduler_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestLPPartnerTheFleetAbsorbs: when the type cheapest per vCPU has a
// little less memory per vCPU than the pods (or a little less CPU per
// GiB), the LP pairs it with a fraction of a node of a richer type. That
// fraction fits in the room the fleet has anyway on its last node of the
// main type, so it must not be left out of the LP as a node no fleet can
// buy: otherwise the LP finds another partner, and another, until only the
// main type is left, its duals price one resource only, and claims pack to
// the types richest in that resource, well above the LP bound.
func TestLPPartnerTheFleetAbsorbs(t *testing.T) {
	type size struct {
		name       string
		cpu, mib   int
		pricePerHr float64
	}
	for _, tc := range []struct {
		name     string
		cpu, mem string // each pod's request
		types    []size
		want     string // the type nearly every claim should be
	}{
		{
			name: "memory a little short", cpu: "1", mem: "2Gi", want: "main",
			types: []size{{"main", 16, 31 << 10, 0.16}, {"m4", 4, 32 << 10, 0.08}, {"m8", 8, 64 << 10, 0.16}, {"m16", 16, 128 << 10, 0.32}, {"m32", 32, 256 << 10, 0.64}, {"m48", 48, 384 << 10, 0.96}},
		},
		{
			name: "CPU a little short", cpu: "1", mem: "2Gi", want: "main",
			types: []size{{"main", 16, 33000, 0.16}, {"c4", 4, 4 << 10, 0.045}, {"c8", 8, 8 << 10, 0.09}, {"c16", 16, 16 << 10, 0.18}, {"c32", 32, 32 << 10, 0.36}, {"c48", 48, 48 << 10, 0.54}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var its []map[string]any
			for _, s := range tc.types {
				its = append(its, map[string]any{"name": s.name, "architecture": "amd64", "overhead": map[string]string{},
					"capacity":  map[string]string{"cpu": fmt.Sprint(s.cpu), "memory": fmt.Sprintf("%dMi", s.mib), "pods": "110"},
					"offerings": []map[string]any{{"zone": "test-1", "capacityType": "on-demand", "price": s.pricePerHr}}})
			}
			raw, _ := json.Marshal(map[string]any{"region": "test", "zones": []string{"test-1"}, "instanceTypes": its})
			c, err := catalog.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			in := genericInput(c, pods(200, tc.cpu, tc.mem))
			r := scheduler.Solve(in)
			fleetPrice(t, in, r) // every pod placed once, within allocatable
			others := 0
			for _, nc := range r.NewNodeClaims {
				if it, _ := nc.Cheapest(); it.Name != tc.want {
					others++
				}
			}
			if others > 1 {
				t.Errorf("%d of %d claims are not %s, want at most one", others, len(r.NewNodeClaims), tc.want)
				for _, nc := range r.NewNodeClaims {
					it, o := nc.Cheapest()
					t.Logf("%s $%.2f: %d pods", it.Name, o.Price, len(nc.Pods))
				}
			}
		})
	}
}
