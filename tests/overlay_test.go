package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/nodeoverlay"
)

// The sizes the test's NodePool may launch: a one-vCPU pod fits both, and
// at catalog prices the smaller is the cheaper.
const (
	overlaySmall = "Standard_D2s_v5"
	overlayLarge = "Standard_D4s_v5"
)

// overlayPool narrows the sample NodePool to the two sizes, on-demand,
// consolidating after 10 s.
const overlayPool = `{"spec":{"disruption":{"consolidateAfter":"10s"},"template":{"spec":{"requirements":[
	{"key":"kubernetes.io/arch","operator":"In","values":["amd64"]},
	{"key":"karpenter.sh/capacity-type","operator":"In","values":["on-demand"]},
	{"key":"node.kubernetes.io/instance-type","operator":"In","values":["` + overlaySmall + `","` + overlayLarge + `"]}]}}}}`

// reservedOverlay prices the large size below the small one, as a team
// with a reservation for it would.
func reservedOverlay(name, price string, weight *int32) *v1alpha1.NodeOverlay {
	return &v1alpha1.NodeOverlay{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodeOverlaySpec{
		Requirements: []v1alpha1.NodeSelectorRequirement{{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{overlayLarge}}},
		Price:        &price, Weight: weight}}
}

// TestOverlay: a NodeOverlay that makes the larger size cheaper than the
// smaller changes what consolidation replaces (the running small node is
// replaced by a large one) and what provisioning launches (a new node is
// large); an overlay of the same weight on the same offerings is refused
// as a Conflict, in its status and an event, and changes nothing.
func TestOverlay(t *testing.T) {
	t.Parallel()
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "overlay", BootDelay: time.Second})
	ctx := context.Background()
	kube := env.Kube
	patchPool(t, ctx, kube, "general", overlayPool)
	small, ok := env.Catalog.Get(overlaySmall)
	large, ok2 := env.Catalog.Get(overlayLarge)
	if !ok || !ok2 {
		t.Fatalf("the catalog lacks %s or %s", overlaySmall, overlayLarge)
	}
	if cheapest(small) >= cheapest(large) {
		t.Fatalf("at catalog prices %s (%v) must be cheaper than %s (%v) for this test", overlaySmall, cheapest(small), overlayLarge, cheapest(large))
	}

	web := deployment("web", 1, "1", "1Gi")
	if err := kube.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "web running", func() (bool, string) { return allRunning(ctx, kube, "web", 1) })
	before := poolClaims(t, ctx, kube, "general")
	if len(before) != 1 || before[0].Labels[corev1.LabelInstanceTypeStable] != overlaySmall {
		t.Fatalf("without an overlay one %s was to be launched; got %s", overlaySmall, describeClaims(before))
	}

	// The overlay, and one of the same weight on the same offerings that
	// goes after it (names descending) and conflicts.
	for _, o := range []*v1alpha1.NodeOverlay{reservedOverlay("large-reserved", "0.001", nil), reservedOverlay("large-other", "5", nil)} {
		if err := kube.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 2*time.Minute, "overlay statuses written", func() (bool, string) {
		applied := overlayCondition(ctx, kube, "large-reserved")
		refused := overlayCondition(ctx, kube, "large-other")
		ok := applied != nil && applied.IsTrue() && refused != nil && refused.IsFalse() && refused.Reason == nodeoverlay.ReasonConflict &&
			strings.Contains(refused.Message, "large-reserved") && eventCount(t, ctx, kube, nodeoverlay.ReasonConflict, "large-reserved") > 0
		return ok, fmt.Sprintf("large-reserved %+v; large-other %+v", applied, refused)
	})

	t.Run("consolidation replaces the small node with the now cheaper large one", func(t *testing.T) {
		eventually(t, 3*time.Minute, "the small node replaced", func() (bool, string) {
			now := poolClaims(t, ctx, kube, "general")
			ok, why := allRunning(ctx, kube, "web", 1)
			return ok && len(now) == 1 && now[0].Labels[corev1.LabelInstanceTypeStable] == overlayLarge && now[0].DeletionTimestamp == nil &&
				len(deletingClaims(t, ctx, kube, "general")) == 0, describeClaims(now) + "; " + why
		})
		if n := eventCount(t, ctx, kube, "DisruptionLaunching", ""); n == 0 {
			t.Errorf("no DisruptionLaunching event: the replacement was not consolidation's")
		}
	})

	t.Run("provisioning launches the now cheaper large size", func(t *testing.T) {
		// A pod that may not share a node with web: a new node, whose
		// size the overlay decides.
		solo := deployment("solo", 1, "1", "1Gi")
		solo.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: corev1.LabelHostname}}}}
		if err := kube.Create(ctx, solo); err != nil {
			t.Fatal(err)
		}
		eventually(t, 3*time.Minute, "solo running", func() (bool, string) { return allRunning(ctx, kube, "solo", 1) })
		claim := claimOfPod(t, ctx, kube, onlyPod(t, ctx, kube, "solo"))
		if got := claim.Labels[corev1.LabelInstanceTypeStable]; got != overlayLarge {
			t.Fatalf("solo's NodeClaim %s is a %s; with %s overlaid to 0.001 it must be a %s", claim.Name, got, overlayLarge, overlayLarge)
		}
	})
}

// TestOverlayOff: with KARPFUNC_NODE_OVERLAY=false an overlay is refused
// by name (ValidationSucceeded=False NodeOverlayDisabled and a Warning
// event) and prices stay the catalog's: the small size is launched.
func TestOverlayOff(t *testing.T) {
	t.Parallel()
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "overlay-off", BootDelay: time.Second,
		HostSettings: map[string]string{nodeoverlay.EnvNodeOverlay: "false"}})
	ctx := context.Background()
	kube := env.Kube
	patchPool(t, ctx, kube, "general", overlayPool)
	if err := kube.Create(ctx, reservedOverlay("large-reserved", "0.001", nil)); err != nil {
		t.Fatal(err)
	}
	web := deployment("web", 1, "1", "1Gi")
	if err := kube.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "web running and the overlay refused", func() (bool, string) {
		cond := overlayCondition(ctx, kube, "large-reserved")
		refused := cond != nil && cond.IsFalse() && cond.Reason == nodeoverlay.ReasonDisabled && strings.Contains(cond.Message, nodeoverlay.EnvNodeOverlay) &&
			eventCount(t, ctx, kube, nodeoverlay.ReasonDisabled, nodeoverlay.EnvNodeOverlay) > 0
		running, why := allRunning(ctx, kube, "web", 1)
		return refused && running, fmt.Sprintf("condition %+v; %s", cond, why)
	})
	claims := poolClaims(t, ctx, kube, "general")
	if len(claims) != 1 || claims[0].Labels[corev1.LabelInstanceTypeStable] != overlaySmall {
		t.Fatalf("with overlays off one %s was to be launched; got %s", overlaySmall, describeClaims(claims))
	}
}

func overlayCondition(ctx context.Context, kube client.Client, name string) *status.Condition {
	o := &v1alpha1.NodeOverlay{}
	if err := kube.Get(ctx, client.ObjectKey{Name: name}, o); err != nil {
		return nil
	}
	return o.StatusConditions().Get(v1alpha1.ConditionTypeValidationSucceeded)
}

// cheapest is the lowest on-demand price of it.
func cheapest(it *catalog.InstanceType) float64 {
	best := -1.0
	for _, o := range it.Offerings {
		if o.CapacityType == karpv1.CapacityTypeOnDemand && (best < 0 || o.Price < best) {
			best = o.Price
		}
	}
	return best
}

func describeClaims(ncs []karpv1.NodeClaim) string {
	var out []string
	for _, nc := range ncs {
		state := ""
		if nc.DeletionTimestamp != nil {
			state = " (deleting)"
		}
		out = append(out, nc.Name+"="+nc.Labels[corev1.LabelInstanceTypeStable]+state)
	}
	return "[" + strings.Join(out, ", ") + "]"
}
