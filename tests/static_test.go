package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/staticcapacity"
)

// staticPool is a static NodePool of small D-series nodes on the sample
// AKSNodeClass (examples/nodepool.yaml).
func staticPool(replicas int) string {
	return fmt.Sprintf(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: fixed
spec:
  replicas: %d
  limits:
    nodes: "6"
  template:
    spec:
      nodeClassRef:
        group: karpenter.azure.com
        kind: AKSNodeClass
        name: default
      requirements:
        - key: karpenter.azure.com/sku-family
          operator: In
          values: ["D"]
        - key: karpenter.azure.com/sku-cpu
          operator: Lt
          values: ["5"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
`, replicas)
}

// TestStaticCapacity: a static NodePool of 3 gets 3 nodes with no pending
// pod, grows to 5 and shrinks to 2 when its replicas change, and its
// status counts them; the dynamic NodePool beside it launches nothing.
func TestStaticCapacity(t *testing.T) {
	t.Parallel()
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "static", BootDelay: time.Second})
	ctx := context.Background()
	kube := env.Kube
	if _, err := env.Apply(ctx, []byte(staticPool(3)), "static pool"); err != nil {
		t.Fatal(err)
	}
	previous := 0
	for _, replicas := range []int{3, 5, 2} {
		if replicas != 3 {
			patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
			np := &karpv1.NodePool{}
			np.Name = "fixed"
			if err := kube.Patch(ctx, np, client.RawPatch(types.MergePatchType, patch)); err != nil {
				t.Fatalf("setting replicas to %d: %v", replicas, err)
			}
		}
		// On the way, the pool never holds more live NodeClaims than the
		// larger of the two counts nor fewer than the smaller.
		low, high := min(previous, replicas), max(previous, replicas)
		eventually(t, 3*time.Minute, fmt.Sprintf("static pool at %d ready nodes", replicas), func() (bool, string) {
			if live := liveStatic(t, ctx, kube); live < low || live > high {
				t.Fatalf("static pool holds %d live NodeClaims on its way from %d to %d", live, previous, replicas)
			}
			return staticSettled(ctx, t, kube, replicas)
		})
		previous = replicas
	}
	var pods corev1.PodList
	if err := kube.List(ctx, &pods); err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods.Items {
		if pod.Spec.NodeName == "" {
			t.Errorf("pod %s/%s is pending: the test must have none", pod.Namespace, pod.Name)
		}
	}
	for _, nc := range nodeClaimList(t, ctx, kube) {
		if pool := nc.Labels[karpv1.NodePoolLabelKey]; pool != "fixed" {
			t.Errorf("NodeClaim %s is from NodePool %q: with no pending pod only the static pool launches", nc.Name, pool)
		}
	}
}

// staticSettled: the fixed pool has exactly want NodeClaims, none being
// deleted, all with a Ready node, and status.nodes says want.
func staticSettled(ctx context.Context, t *testing.T, kube client.Client, want int) (bool, string) {
	var claims []string
	for _, nc := range nodeClaimList(t, ctx, kube) {
		if nc.Labels[karpv1.NodePoolLabelKey] != "fixed" {
			continue
		}
		state := "initialized"
		switch {
		case nc.DeletionTimestamp != nil:
			state = "deleting"
		case !nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue():
			state = "not initialized"
		}
		claims = append(claims, nc.Name+"="+state)
	}
	ready := 0
	for _, c := range claims {
		if strings.HasSuffix(c, "=initialized") {
			ready++
		}
	}
	np := &karpv1.NodePool{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "fixed"}, np); err != nil {
		return false, err.Error()
	}
	nodes := int64(-1)
	if np.Status.Nodes != nil {
		nodes = *np.Status.Nodes
	}
	why := fmt.Sprintf("claims %v, status.nodes %d", claims, nodes)
	return len(claims) == want && ready == want && nodes == int64(want), why
}

// TestStaticCapacityOff: with KARPFUNC_STATIC_CAPACITY=false a static
// NodePool is refused by name (ValidationSucceeded=False and a Warning
// event), and nothing is launched for it.
func TestStaticCapacityOff(t *testing.T) {
	t.Parallel()
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "static-off", BootDelay: time.Second,
		HostSettings: map[string]string{staticcapacity.Setting: "false"}})
	ctx := context.Background()
	kube := env.Kube
	if _, err := env.Apply(ctx, []byte(staticPool(2)), "static pool"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "static pool refused in its status and an event", func() (bool, string) {
		np := &karpv1.NodePool{}
		if err := kube.Get(ctx, client.ObjectKey{Name: "fixed"}, np); err != nil {
			return false, err.Error()
		}
		cond := np.StatusConditions().Get(karpv1.ConditionTypeValidationSucceeded)
		if cond == nil || !cond.IsFalse() || cond.Reason != staticcapacity.ReasonDisabled || !strings.Contains(cond.Message, staticcapacity.Setting) {
			return false, fmt.Sprintf("ValidationSucceeded is %+v", cond)
		}
		var evs corev1.EventList
		if err := kube.List(ctx, &evs); err != nil {
			return false, err.Error()
		}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind == "NodePool" && ev.InvolvedObject.Name == "fixed" && ev.Reason == staticcapacity.ReasonDisabled {
				return true, ""
			}
		}
		return false, "no " + staticcapacity.ReasonDisabled + " event on NodePool fixed"
	})
	for _, nc := range nodeClaimList(t, ctx, kube) {
		t.Errorf("NodeClaim %s was created (NodePool %s) although static capacity is off", nc.Name, nc.Labels[karpv1.NodePoolLabelKey])
	}
}

// liveStatic counts the fixed pool's NodeClaims not being deleted.
func liveStatic(t *testing.T, ctx context.Context, kube client.Client) int {
	live := 0
	for _, nc := range nodeClaimList(t, ctx, kube) {
		if nc.Labels[karpv1.NodePoolLabelKey] == "fixed" && nc.DeletionTimestamp == nil {
			live++
		}
	}
	return live
}

// TestStaticDrift: a static pool of 2 whose template label changes gets
// both nodes replaced one for one, each replacement launched and
// Initialized before its drifted node goes: throughout, the pool holds 2
// or 3 NodeClaims not being deleted (the default budget, 10 %, allows one
// drift at a time) and never fewer than 2 Initialized ones, and the
// replacements carry the new label.
func TestStaticDrift(t *testing.T) {
	t.Parallel()
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "static-drift", BootDelay: time.Second})
	ctx := context.Background()
	kube := env.Kube
	if _, err := env.Apply(ctx, []byte(staticPool(2)), "static pool"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "static pool at 2 ready nodes", func() (bool, string) { return staticSettled(ctx, t, kube, 2) })
	drifted := map[string]bool{}
	for _, nc := range nodeClaimList(t, ctx, kube) {
		drifted[nc.Name] = true
	}
	patchPool(t, ctx, kube, "fixed", `{"spec":{"template":{"metadata":{"labels":{"tier":"two"}}}}}`)
	eventually(t, 5*time.Minute, "both drifted nodes replaced", func() (bool, string) {
		live, ready := 0, 0
		var fresh []string
		for _, nc := range nodeClaimList(t, ctx, kube) {
			if nc.Labels[karpv1.NodePoolLabelKey] != "fixed" || nc.DeletionTimestamp != nil {
				continue
			}
			live++
			if nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
				ready++
			}
			if !drifted[nc.Name] {
				if nc.Labels["tier"] != "two" {
					t.Fatalf("replacement %s lacks the new label tier=two: %v", nc.Name, nc.Labels)
				}
				fresh = append(fresh, nc.Name)
			}
		}
		if live < 2 || live > 3 {
			t.Fatalf("static pool of 2 holds %d NodeClaims not being deleted during its drift; want 2 or 3 (one replacement at a time)", live)
		}
		if ready < 2 {
			t.Fatalf("static pool of 2 has %d Initialized NodeClaims during its drift: a drifted node went before its replacement was up", ready)
		}
		if ok, why := staticSettled(ctx, t, kube, 2); !ok || len(fresh) != 2 {
			return false, fmt.Sprintf("%s; replacements %v", why, fresh)
		}
		return true, ""
	})
	if n := eventCount(t, ctx, kube, events.ReasonDisruptionLaunching, "Launching NodeClaim: Drifted"); n < 2 {
		t.Errorf("%d DisruptionLaunching events for the static drift replacements; want 2", n)
	}
	if n := eventCount(t, ctx, kube, events.ReasonDisruptionTerminating, "Disrupting NodeClaim: Drifted"); n < 2 {
		t.Errorf("%d DisruptionTerminating events for the drifted static NodeClaims; want 2", n)
	}
}

// TestStaticExpiry: a static pool's nodes past expireAfter are deleted
// forcefully, as any expired node, and the pool gets one new NodeClaim
// for each: never more than replicas not being deleted, back at replicas
// with new NodeClaims.
func TestStaticExpiry(t *testing.T) {
	t.Parallel()
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "static-expiry", BootDelay: time.Second})
	ctx := context.Background()
	kube := env.Kube
	expiring := strings.Replace(staticPool(2), "    spec:\n", "    spec:\n      expireAfter: 60s\n", 1)
	if _, err := env.Apply(ctx, []byte(expiring), "expiring static pool"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "static pool at 2 ready nodes", func() (bool, string) { return staticSettled(ctx, t, kube, 2) })
	first := map[string]bool{}
	for _, nc := range nodeClaimList(t, ctx, kube) {
		first[nc.Name] = true
	}
	seen := map[string]bool{}
	eventually(t, 3*time.Minute, "both expired nodes replaced", func() (bool, string) {
		if live := liveStatic(t, ctx, kube); live > 2 {
			t.Fatalf("static pool of 2 holds %d NodeClaims not being deleted while its nodes expire", live)
		}
		for _, nc := range nodeClaimList(t, ctx, kube) {
			if first[nc.Name] {
				return false, fmt.Sprintf("NodeClaim %s not expired yet (deleting %t)", nc.Name, nc.DeletionTimestamp != nil)
			}
			seen[nc.Name] = true
		}
		return staticSettled(ctx, t, kube, 2)
	})
	if len(seen) != 2 {
		t.Errorf("the pool made %d NodeClaims for its 2 expired ones (%v); want one each", len(seen), seen)
	}
	if n := eventCount(t, ctx, kube, events.ReasonDisruptionTerminating, "Disrupting NodeClaim: Expired"); n < 2 {
		t.Errorf("%d DisruptionTerminating events for the expired static NodeClaims; want 2", n)
	}
}
