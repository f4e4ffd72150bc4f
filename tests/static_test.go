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
