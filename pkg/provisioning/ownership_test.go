package provisioning_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/testfixtures"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/ownership"
	"github.com/karpfunc/karpfunc/pkg/provisioning"
)

const ownershipCatalog = `{"region":"eastus","zones":["eastus-1"],"instanceTypes":[
 {"name":"Standard_D4s_v5","architecture":"amd64","capacity":{"cpu":"4","memory":"16Gi","pods":"110"},"overhead":{},
  "offerings":[{"zone":"eastus-1","capacityType":"on-demand","price":0.20,"available":true}]}]}`

// TestProvisionLeavesOthersNodeClaims: a NodeClaim another controller made
// (no karpfunc mark) and has not launched yet counts as capacity for a
// pending pod, but karpfunc never launches it; karpfunc's own claims carry
// the mark.
func TestProvisionLeavesOthersNodeClaims(t *testing.T) {
	w := newWorld(t, ownershipCatalog)
	kube, launcher, cat := w.kube, w.launcher, w.cat
	ctx := context.Background()
	ref := &karpv1.NodeClassReference{Group: provisioning.NodeClassGroup, Kind: provisioning.NodeClassKind, Name: "default"}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "np"}}
	np.Spec.Template.Spec.NodeClassRef = ref
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}}}
	if err := kube.Create(ctx, np); err != nil {
		t.Fatal(err)
	}
	foreign := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nap-claim", Labels: map[string]string{karpv1.NodePoolLabelKey: "np"},
		Finalizers: []string{karpv1.TerminationFinalizer}},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: ref,
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"Standard_D4s_v5"}}},
			Resources:    karpv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}
	if err := kube.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	pod := func(name, cpu string) {
		p := testfixtures.Pod(testfixtures.PodOptions{Name: name, CPU: cpu})
		if err := kube.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		unschedulable(t, ctx, kube, p)
	}
	p := provisioning.New(provisioning.Options{Kube: kube, Catalog: cat, ClusterName: "test", Logger: slog.New(slog.DiscardHandler)})

	// A small pod fits on the foreign in-flight claim.
	pod("small", "500m")
	res, err := p.Provision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Pods.Targets(provisioning.OnInFlight); len(res.Created) != 0 || !slices.Equal(got, []string{"nap-claim"}) || len(res.Launching) != 0 || asksLaunchOf(res, foreign) {
		t.Errorf("Provision = created %v, in flight on %v, launching %v, outcome %s; want the pod counted on nap-claim, nothing created or launched", res.Created, got, res.Launching, res.Outcome)
	}
	// A pod that does not fit gets a claim of karpfunc's own, launched and
	// marked; the foreign one is still not launched.
	pod("big", "3800m") // with small, more than the foreign claim holds
	if res, err = p.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	// The pass only asks for the launch; the launch checks see it launched.
	if len(res.Created) != 1 || !slices.Equal(res.Launching, res.Created) || slices.Contains(res.Launching, "nap-claim") {
		t.Fatalf("Provision = created %v, launching %v; want one claim of our own, its launch asked for", res.Created, res.Launching)
	}
	created := &karpv1.NodeClaim{}
	if err := kube.Get(ctx, client.ObjectKey{Name: res.Created[0]}, created); err != nil {
		t.Fatal(err)
	}
	if !asksLaunchOf(res, created) || asksLaunchOf(res, foreign) {
		t.Fatalf("Provision's outcome %s; want a launch check of %s and none of nap-claim", res.Outcome, created.Name)
	}
	if nc, looks := launchChecks(t, w, res.Created[0]); nc == nil || !nc.StatusConditions().Get(karpv1.ConditionTypeLaunched).IsTrue() {
		t.Fatalf("NodeClaim %s after %d launch checks: %+v; want Launched", res.Created[0], looks, nc)
	}
	own := &karpv1.NodeClaim{}
	if err := kube.Get(ctx, client.ObjectKey{Name: res.Created[0]}, own); err != nil || !ownership.Owns(own) {
		t.Errorf("karpfunc's NodeClaim %s: %v, annotations %v; want karpfunc's mark", res.Created[0], err, own.Annotations)
	}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(foreign), foreign); err != nil {
		t.Fatal(err)
	}
	if foreign.StatusConditions().Get(karpv1.ConditionTypeLaunched).IsTrue() || foreign.Status.ProviderID != "" {
		t.Errorf("another controller's NodeClaim was launched: status %+v", foreign.Status)
	}
	if _, err := launcher.Get(ctx, "nap-claim"); !azure.IsNotFound(err) {
		t.Errorf("a VM exists for another controller's NodeClaim: %v", err)
	}
}
