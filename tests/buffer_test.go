package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	autoscalingv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/pkg/capacitybuffer"
	"github.com/karpfunc/karpfunc/pkg/events"
)

// bufferYAML is a PodTemplate shaped like the web Deployment's pods
// (deployment("web", …, "1500m", "1Gi")) and a CapacityBuffer of one such
// chunk.
const bufferYAML = `apiVersion: v1
kind: PodTemplate
metadata:
  name: web-shape
  namespace: default
template:
  metadata:
    labels:
      app: web
  spec:
    containers:
      - name: web
        image: registry.k8s.io/pause:3.10
        resources:
          requests:
            cpu: 1500m
            memory: 1Gi
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata:
  name: web
  namespace: default
spec:
  podTemplateRef:
    name: web-shape
  replicas: 1
`

// TestBuffer: a CapacityBuffer of one chunk gets a node with no pod on it
// and says so in its status; a pod of the same shape lands in that room
// without a launch, and the buffer's room is made again on a new node;
// the empty node that holds the room is left by disruption past
// consolidateAfter, with an event naming the buffer.
func TestBuffer(t *testing.T) {
	t.Parallel()
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "buffer", BootDelay: time.Second})
	ctx := context.Background()
	kube := env.Kube
	if _, err := env.Apply(ctx, []byte(bufferYAML), "buffer"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "the buffer's room on an initialized node", func() (bool, string) {
		return bufferFits(ctx, t, kube, 1)
	})
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Fatalf("the buffer created %d pods; it must create none", len(pods.Items))
	}
	claims := nodeClaimList(t, ctx, kube)
	if len(claims) != 1 {
		t.Fatalf("want one NodeClaim for the buffer, got %v", nodeClaimNames(t, ctx, kube))
	}
	roomNode := claims[0].Status.NodeName

	// A pod of the buffer's shape: the kube-scheduler binds it into the
	// room at once, with no NodeClaim launched for it.
	if err := kube.Create(ctx, deployment("web", 1, "1500m", "1Gi")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the web pod running", func() (bool, string) { return allRunning(ctx, kube, "web", 1) })
	webPods, err := podsWithLabel(ctx, kube, "app", "web")
	if err != nil {
		t.Fatal(err)
	}
	if got := webPods[0].Spec.NodeName; got != roomNode {
		t.Fatalf("the web pod runs on %q, not in the buffer's room on %q", got, roomNode)
	}
	for _, cond := range webPods[0].Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Reason == corev1.PodReasonUnschedulable {
			t.Fatalf("the web pod was Unschedulable (%s): it should have found the buffer's room", cond.Message)
		}
	}

	// The room taken, the buffer gets a new node for it.
	eventually(t, 3*time.Minute, "the buffer's room made again on a second node", func() (bool, string) {
		return bufferFits(ctx, t, kube, 2)
	})
	var holder *karpv1.NodeClaim
	for _, nc := range nodeClaimList(t, ctx, kube) {
		if nc.Status.NodeName != roomNode {
			holder = &nc
		}
	}
	if holder == nil {
		t.Fatal("no second NodeClaim")
	}

	// Past consolidateAfter (1m in examples/nodepool.yaml), the empty node
	// that holds the room is left, and disruption says why.
	eventually(t, 4*time.Minute, "disruption leaves the empty node that holds the buffer's room", func() (bool, string) {
		var evs corev1.EventList
		if err := kube.List(ctx, &evs); err != nil {
			return false, err.Error()
		}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind == "NodeClaim" && ev.InvolvedObject.Name == holder.Name && ev.Reason == events.ReasonDisruptionBlocked &&
				strings.Contains(ev.Message, "CapacityBuffer default/web") {
				return true, ""
			}
		}
		return false, "no DisruptionBlocked event naming CapacityBuffer default/web on nodeclaim/" + holder.Name
	})
	for _, nc := range nodeClaimList(t, ctx, kube) {
		if nc.DeletionTimestamp != nil {
			t.Errorf("NodeClaim %s is being deleted: both nodes are in use (the web pod, the buffer's room)", nc.Name)
		}
	}
	if n := len(nodeClaimList(t, ctx, kube)); n != 2 {
		t.Errorf("want 2 NodeClaims (the web pod's node and the buffer's room), got %v", nodeClaimNames(t, ctx, kube))
	}
}

// bufferFits: want initialized NodeClaims, and the buffer's status says
// one replica, ReadyForProvisioning and FitsExistingCapacity.
func bufferFits(ctx context.Context, t *testing.T, kube client.Client, want int) (bool, string) {
	initialized := 0
	for _, nc := range nodeClaimList(t, ctx, kube) {
		if nc.DeletionTimestamp == nil && nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
			initialized++
		}
	}
	cb := &autoscalingv1beta1.CapacityBuffer{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web"}, cb); err != nil {
		return false, err.Error()
	}
	ready := apimeta.FindStatusCondition(cb.Status.Conditions, autoscalingv1beta1.ReadyForProvisioningCondition)
	prov := apimeta.FindStatusCondition(cb.Status.Conditions, autoscalingv1beta1.ProvisioningCondition)
	replicas := int32(-1)
	if cb.Status.Replicas != nil {
		replicas = *cb.Status.Replicas
	}
	why := fmt.Sprintf("%d initialized NodeClaims (want %d), status.replicas %d, ReadyForProvisioning %+v, Provisioning %+v", initialized, want, replicas, ready, prov)
	return initialized == want && replicas == 1 && ready != nil && ready.Status == "True" &&
		prov != nil && prov.Reason == capacitybuffer.ReasonFitsExistingCapacity, why
}

// TestBufferOff: with KARPFUNC_CAPACITY_BUFFERS=false a buffer is refused
// by name (ReadyForProvisioning=False and a Warning event), and no node is
// launched for it.
func TestBufferOff(t *testing.T) {
	t.Parallel()
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "buffer-off", BootDelay: time.Second,
		HostSettings: map[string]string{capacitybuffer.Setting: "false"}})
	ctx := context.Background()
	kube := env.Kube
	if _, err := env.Apply(ctx, []byte(bufferYAML), "buffer"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the buffer refused in its status and an event", func() (bool, string) {
		cb := &autoscalingv1beta1.CapacityBuffer{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web"}, cb); err != nil {
			return false, err.Error()
		}
		ready := apimeta.FindStatusCondition(cb.Status.Conditions, autoscalingv1beta1.ReadyForProvisioningCondition)
		if ready == nil || ready.Status != "False" || ready.Reason != capacitybuffer.ReasonDisabled || !strings.Contains(ready.Message, capacitybuffer.Setting) {
			return false, fmt.Sprintf("ReadyForProvisioning is %+v", ready)
		}
		var evs corev1.EventList
		if err := kube.List(ctx, &evs); err != nil {
			return false, err.Error()
		}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind == "CapacityBuffer" && ev.InvolvedObject.Name == "web" && ev.Reason == capacitybuffer.ReasonDisabled {
				return true, ""
			}
		}
		return false, "no " + capacitybuffer.ReasonDisabled + " event on CapacityBuffer web"
	})
	for _, nc := range nodeClaimList(t, ctx, kube) {
		t.Errorf("NodeClaim %s was created although capacity buffers are off", nc.Name)
	}
}
