package provisioning_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/provisioning"
)

// A provisioning pass keeps a static NodePool at spec.replicas on a real
// API server: it creates the missing claims, a second pass creates none,
// limits.nodes caps the count, fewer replicas delete the surplus, and
// claims still being deleted are neither replaced early nor deleted again.
func TestStaticPass(t *testing.T) {
	w := newWorld(t, limitsCatalog)
	kube, ctx := w.kube, context.Background()
	replicas := int64(3)
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "fixed"}}
	np.Spec.Replicas = &replicas
	np.Spec.Limits = karpv1.Limits{"nodes": resource.MustParse("4")}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: provisioning.NodeClassGroup, Kind: provisioning.NodeClassKind, Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
	if err := kube.Create(ctx, np); err != nil {
		t.Fatal(err)
	}
	prov := provisioning.New(provisioning.Options{Kube: kube, Catalog: w.cat, ClusterName: "test", Logger: slog.New(slog.DiscardHandler)})
	claims := func() (live, deleting []string) {
		var list karpv1.NodeClaimList
		if err := kube.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		for _, nc := range list.Items {
			if nc.DeletionTimestamp != nil {
				deleting = append(deleting, nc.Name)
			} else {
				live = append(live, nc.Name)
			}
		}
		return live, deleting
	}
	setReplicas := func(n int) {
		patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
		if err := kube.Patch(ctx, np, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		name             string
		replicas         int // -1: unchanged
		created, deleted int
		live, deleting   int
	}{
		{name: "empty pool: three created", replicas: -1, created: 3, live: 3},
		{name: "again: nothing", replicas: -1, live: 3},
		{name: "five asked, limits.nodes 4: one created", replicas: 5, created: 1, live: 4},
		{name: "one asked: three deleted", replicas: 1, deleted: 3, live: 1, deleting: 3},
		{name: "deleting claims hold the limit, are not deleted again", replicas: 4, created: 0, live: 1, deleting: 3},
	} {
		if step.replicas >= 0 {
			setReplicas(step.replicas)
		}
		res, err := prov.Provision(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		created, deleted := 0, 0
		for _, s := range res.Static {
			created += len(s.Created)
			deleted += len(s.Deleted)
		}
		live, deleting := claims()
		if created != step.created || deleted != step.deleted || len(live) != step.live || len(deleting) != step.deleting {
			t.Fatalf("%s: created %d, deleted %d, live %v, deleting %v; want %d, %d, %d live, %d deleting (static %+v)",
				step.name, created, deleted, live, deleting, step.created, step.deleted, step.live, step.deleting, res.Static)
		}
		for _, name := range live {
			var nc karpv1.NodeClaim
			if err := kube.Get(ctx, client.ObjectKey{Name: name}, &nc); err != nil {
				t.Fatal(err)
			}
			if nc.Labels[karpv1.NodePoolLabelKey] != "fixed" || !slices.ContainsFunc(nc.Spec.Requirements, func(r karpv1.NodeSelectorRequirementWithMinValues) bool {
				return r.Key == corev1.LabelInstanceTypeStable && len(r.Values) > 0
			}) {
				t.Errorf("%s: NodeClaim %s lacks the pool label or instance types: %+v", step.name, name, nc.Spec.Requirements)
			}
		}
	}
}
