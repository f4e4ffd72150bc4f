package scheduler_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// TestPackLargest: 20 lean pods (1 vCPU, 1 GiB) and 4 rich ones (1 vCPU,
// 7 GiB) on the eastus D family, on-demand. Packing for price spreads them
// over claims of different shapes; packing as Karpenter does puts them all
// on one claim whose types, cheapest first, each hold all 24 pods.
func TestPackLargest(t *testing.T) {
	c, err := catalog.Default("eastus")
	if err != nil {
		t.Fatal(err)
	}
	solve := func(packLargest bool) scheduler.Result {
		in := baseInput(t, append(named("lean", 20, "1", "1Gi"), named("rich", 4, "1", "7Gi")...)...)
		in.Catalog = c
		in.NodePools[0] = nodePool("general", "default",
			req("karpenter.azure.com/sku-family", corev1.NodeSelectorOpIn, "D"),
			req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
			req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand))
		in.PackLargest = packLargest
		return scheduler.Solve(in)
	}
	spread := solve(false)
	if len(spread.Unschedulable) > 0 || len(spread.NewNodeClaims) < 2 {
		t.Fatalf("packing for price: %s; want the 24 pods over at least two claims (else this test shows nothing)", summary(spread))
	}
	one := solve(true)
	if len(one.Unschedulable) > 0 || len(one.NewNodeClaims) != 1 {
		t.Fatalf("PackLargest: %s; want one claim", summary(one))
	}
	plan := one.NewNodeClaims[0]
	if len(plan.Pods) != 24 || len(plan.InstanceTypes) < 2 {
		t.Fatalf("the claim holds %d pods in %d types, want 24 pods and a choice of types", len(plan.Pods), len(plan.InstanceTypes))
	}
	need := plan.Requests
	prev := 0.0
	for _, it := range plan.InstanceTypes {
		alloc := it.Allocatable()
		if alloc.Cpu().Cmp(*need.Cpu()) < 0 || alloc.Memory().Cmp(*need.Memory()) < 0 {
			t.Errorf("%s (%s CPU, %s) does not hold the claim's %s CPU, %s", it.Name, alloc.Cpu(), alloc.Memory(), need.Cpu(), need.Memory())
		}
		price := -1.0
		for _, o := range it.Offerings {
			if o.CapacityType == karpv1.CapacityTypeOnDemand && (price < 0 || o.Price < price) {
				price = o.Price
			}
		}
		if price < prev {
			t.Errorf("%s at $%.4f/h comes after a dearer type: want cheapest first", it.Name, price)
		}
		prev = price
	}
}
