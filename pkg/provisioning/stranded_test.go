package provisioning_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/provisioning"
)

// TestNoPodStrandedBehindItsOwnClaim: a pod's first NodeClaim cannot take it
// any more — its Node was tainted NoExecute by another controller, or the
// claim is being deleted — and the pod is pending again. The next pass must
// place it on a new NodeClaim at once. Before NodeClaim names had a
// generation, the new claim's name (derived from the same pod) was the old
// claim's: Create found it taken, returned nothing, and the pod stayed
// pending with "0 on existing capacity, created [], 0 unschedulable" on
// every pass.
func TestNoPodStrandedBehindItsOwnClaim(t *testing.T) {
	w := newWorld(t, limitsCatalog)
	kube, cat := w.kube, w.cat
	ctx := context.Background()
	prov := provisioning.New(provisioning.Options{Kube: kube, Catalog: cat, ClusterName: "test",
		Logger: slog.New(slog.DiscardHandler)})

	for i, c := range []struct {
		name string
		// spoil makes the pod's first claim useless to it.
		spoil func(t *testing.T, nc *karpv1.NodeClaim)
	}{
		{name: "its Node got a NoExecute taint the pod does not tolerate", spoil: func(t *testing.T, nc *karpv1.NodeClaim) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nc.Name + "-node", Labels: map[string]string{
				karpv1.NodePoolLabelKey: nc.Labels[karpv1.NodePoolLabelKey], corev1.LabelTopologyZone: "eastus-1",
				"pool": nc.Labels[karpv1.NodePoolLabelKey]}},
				Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID,
					Taints: []corev1.Taint{{Key: "example.com/quarantine", Effect: corev1.TaintEffectNoExecute}}}}
			if err := kube.Create(ctx, node); err != nil {
				t.Fatal(err)
			}
			node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}
			node.Status.Allocatable = node.Status.Capacity
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			if err := kube.Status().Update(ctx, node); err != nil {
				t.Fatal(err)
			}
			nc.Status.NodeName = node.Name
			if err := kube.Status().Update(ctx, nc); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "the claim is being deleted (its finalizer still held)", spoil: func(t *testing.T, nc *karpv1.NodeClaim) {
			if err := kube.Delete(ctx, nc); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := fmt.Sprintf("strand-%d", i)
			np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: pool}}
			np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: provisioning.NodeClassGroup, Kind: provisioning.NodeClassKind, Name: "default"}
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{pool}}}
			if err := kube.Create(ctx, np); err != nil {
				t.Fatal(err)
			}
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pool + "-web", Namespace: "default"},
				Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": pool},
					Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
			if err := kube.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			unschedulable(t, ctx, kube, p)

			// Earlier subtests' pods stay pending; look at this one's.
			outcome := func(res provisioning.Result) provisioning.PodOutcome {
				for _, o := range res.Pods {
					if o.Pod.Name == p.Name {
						return o
					}
				}
				t.Fatalf("the pass gave pod %s no outcome: %s", p.Name, res.Pods)
				return provisioning.PodOutcome{}
			}
			first, err := prov.Provision(ctx)
			if err != nil || len(first.Created) != 1 || outcome(first).Outcome != provisioning.OnNew {
				t.Fatalf("first pass: %s, created %v, %v; want one new NodeClaim for the pod", first.Pods, first.Created, err)
			}
			nc := &karpv1.NodeClaim{}
			if err := kube.Get(ctx, client.ObjectKey{Name: first.Created[0]}, nc); err != nil {
				t.Fatal(err)
			}
			c.spoil(t, nc)

			second, err := prov.Provision(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(second.Created) != 1 || second.Created[0] == nc.Name || outcome(second).Outcome != provisioning.OnNew {
				t.Fatalf("second pass: %s, created %v; want the pod on a new NodeClaim other than %s", second.Pods, second.Created, nc.Name)
			}
			// A redelivery of that pass finds the claim it made, as before.
			third, err := prov.Provision(ctx)
			if o := outcome(third); err != nil || len(third.Created) != 0 || o.Outcome != provisioning.OnInFlight || o.Target != second.Created[0] {
				t.Fatalf("third pass: %s, created %v, %v; want the pod on the in-flight claim %s and nothing created", third.Pods, third.Created, err, second.Created[0])
			}
		})
	}
}
