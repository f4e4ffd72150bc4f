package scheduler_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/scheduler"
)

// gen1Catalog has an Arm64 size that boots only Gen1 (no AKS image exists
// for it), a Gen1-only x64 size and a Gen2 x64 size.
const gen1Catalog = `{"region":"test","zones":["test-1"],"instanceTypes":[
 {"name":"armgen1","architecture":"arm64","hyperVGenerations":["V1"],"capacity":{"cpu":"4","memory":"16Gi"},"overhead":{},
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.01}]},
 {"name":"oldx64","architecture":"amd64","hyperVGenerations":["V1"],"capacity":{"cpu":"4","memory":"16Gi"},"overhead":{},
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.10}]},
 {"name":"newx64","architecture":"amd64","hyperVGenerations":["V2"],"capacity":{"cpu":"4","memory":"16Gi"},"overhead":{},
  "offerings":[{"zone":"test-1","capacityType":"on-demand","price":0.20}]}]}`

func TestNoImageSizesAreNotLaunched(t *testing.T) {
	cat, err := catalog.Parse([]byte(gen1Catalog))
	if err != nil {
		t.Fatal(err)
	}
	in := func(np *karpv1.NodePool, family string) scheduler.Input {
		class := nodeClass("default", 0)
		class.Spec.ImageFamily = &family
		return scheduler.Input{Pods: pods(1, "1", "1Gi"), NodePools: []*karpv1.NodePool{np},
			NodeClasses: []*v1beta1.AKSNodeClass{class}, Catalog: cat}
	}

	// The cheapest size has no image: the next cheapest, which has one, is
	// chosen; a Gen1-only x64 size is fine (it boots the Gen1 image).
	r := scheduler.Solve(in(nodePool("general", "default"), "Ubuntu2204"))
	expectClaims(t, r, 1)
	if names := typeNames(r.NewNodeClaims[0]); strings.Contains(names, "armgen1") || !strings.Contains(names, "oldx64") {
		t.Fatalf("claim may launch %s; want oldx64 and newx64, never armgen1", names)
	}
	if len(r.InvalidNodePools) != 0 {
		t.Fatalf("invalid node pools %+v for a pool with usable sizes", r.InvalidNodePools)
	}

	// A NodePool that allows only the size without an image launches
	// nothing and says so, on the pod and on the NodePool.
	armOnly := nodePool("arm", "default", req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64"))
	r = scheduler.Solve(in(armOnly, "Ubuntu2404"))
	expectClaims(t, r, 0)
	expectUnschedulable(t, r, "NodePool arm", "AKSNodeClass default (imageFamily Ubuntu2404) has no AKS node image",
		"armgen1 (arm64, Hyper-V V1)", "pick another imageFamily")
	if len(r.InvalidNodePools) != 1 || r.InvalidNodePools[0].NodePool.Name != "arm" || r.InvalidNodePools[0].Reason != r.Unschedulable[0].Reason {
		t.Fatalf("invalid node pools = %+v; want NodePool arm with the pod's reason", r.InvalidNodePools)
	}

	// A pod that asks for the size without an image, in a pool that has
	// others, is told why that size is out.
	p := withAffinity(pod("wants-arm", "1", "1Gi"), []corev1.NodeSelectorRequirement{req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64")})
	input := in(nodePool("general", "default"), "Ubuntu2204")
	input.Pods = []*corev1.Pod{p}
	r = scheduler.Solve(input)
	expectUnschedulable(t, r, "has no AKS node image", "armgen1")
	if len(r.InvalidNodePools) != 0 {
		t.Fatalf("pool general is usable, but reported invalid: %+v", r.InvalidNodePools)
	}
}
