package provisioning_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/pkg/offerings"
	"github.com/karpfunc/karpfunc/pkg/provisioning"
)

// quotaCatalog: two quota families, standardDSv5Family (cheaper) and
// standardDASv5Family, each in a 4- and an 8-vCPU size, on demand.
const quotaCatalog = `{"region":"eastus","zones":["eastus-1"],"instanceTypes":[
 {"name":"Standard_D4s_v5","architecture":"amd64","capacity":{"cpu":"4","memory":"16Gi","pods":"250"},"overhead":{},
  "offerings":[{"zone":"eastus-1","capacityType":"on-demand","price":0.20}]},
 {"name":"Standard_D8s_v5","architecture":"amd64","capacity":{"cpu":"8","memory":"32Gi","pods":"250"},"overhead":{},
  "offerings":[{"zone":"eastus-1","capacityType":"on-demand","price":0.40}]},
 {"name":"Standard_D4as_v5","architecture":"amd64","capacity":{"cpu":"4","memory":"16Gi","pods":"250"},"overhead":{},
  "offerings":[{"zone":"eastus-1","capacityType":"on-demand","price":0.22}]},
 {"name":"Standard_D8as_v5","architecture":"amd64","capacity":{"cpu":"8","memory":"32Gi","pods":"250"},"overhead":{},
  "offerings":[{"zone":"eastus-1","capacityType":"on-demand","price":0.44}]}]}`

// TestPassPlansWithinQuota: one pass plans NodeClaims that fit quota
// together. Sixteen 1-vCPU pods want two 8-vCPU nodes of the cheaper
// family, whose quota holds one: the pass opens the second node in the
// next family at the size its quota still holds (4 vCPUs), in the same
// pass, and leaves only the pods no quota holds, saying so; none waits
// for a later pass while quota has room for it.
func TestPassPlansWithinQuota(t *testing.T) {
	w := newWorld(t, quotaCatalog)
	ctx := context.Background()
	quota := map[string]int64{"standardDSv5Family": 8, "standardDASv5Family": 4}
	w.arm.SetQuota(armemulator.Quota{Families: quota, Regional: 100})
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: provisioning.NodeClassGroup, Kind: provisioning.NodeClassKind, Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}}}
	if err := w.kube.Create(ctx, np); err != nil {
		t.Fatal(err)
	}
	for i := range 16 {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("burst-%02d", i), Namespace: "default"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
		if err := w.kube.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		unschedulable(t, ctx, w.kube, pod)
	}
	p := provisioning.New(provisioning.Options{Kube: w.kube, Catalog: w.cat, ClusterName: "test", Quota: w.launcher,
		Logger: slog.New(slog.DiscardHandler)})
	res, err := p.Provision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	accounting := provisioning.Accounting(res.Pods)
	if onNew, deferred := accounting.Count(provisioning.OnNew), accounting.Count(provisioning.Deferred); onNew != 12 || deferred != 0 {
		t.Errorf("%d pods on new NodeClaims, %d deferred; want 12 placed (8 + 4 vCPUs of quota), none deferred: %s", onNew, deferred, accounting)
	}
	for _, outcome := range res.Pods {
		if outcome.Outcome == provisioning.Unschedulable && !strings.Contains(outcome.Reason, "quota") {
			t.Errorf("%s unschedulable for %q, which does not name quota", outcome.Pod.Name, outcome.Reason)
		}
	}
	claims := &karpv1.NodeClaimList{}
	if err := w.kube.List(ctx, claims); err != nil {
		t.Fatal(err)
	}
	held := map[string]int64{}
	for _, nc := range claims.Items {
		var vcpus int64
		families := map[string]bool{}
		for _, r := range nc.Spec.Requirements {
			if r.Key != corev1.LabelInstanceTypeStable {
				continue
			}
			for _, name := range r.Values {
				if it, ok := w.cat.Get(name); ok {
					vcpus = max(vcpus, it.Capacity.Cpu().Value())
					families[offerings.QuotaFamily(name)] = true
				}
			}
		}
		if len(families) != 1 {
			t.Errorf("NodeClaim %s may launch in families %v; want one", nc.Name, families)
		}
		for family := range families {
			held[family] += vcpus
		}
	}
	for family, limit := range quota {
		if held[family] != limit {
			t.Errorf("the NodeClaims may take %d vCPUs of %s; want all %d the quota holds (held: %v)", held[family], family, limit, held)
		}
	}
}
