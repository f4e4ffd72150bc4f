package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/utils/resources"

	"github.com/karpfunc/karpfunc/internal/localenv"
)

// TestNodeAllocatableIsThePlans: a node launched for a size reports, from
// its kubelet's own reading of the reservations in its flags, exactly the
// allocatable the engine assumed for that size; a pod sized to the last
// byte and millicore of it runs there, and a pod one byte or one millicore
// larger fits no node of that size.
func TestNodeAllocatableIsThePlans(t *testing.T) {
	const size = "Standard_D4s_v5"
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "allocatable", BootDelay: time.Second})
	ctx := context.Background()
	kube := env.Kube
	np := &karpv1.NodePool{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "general"}, np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
		Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{size}})
	if err := kube.Update(ctx, np); err != nil {
		t.Fatal(err)
	}

	// The engine's allocatable for the size at the AKSNodeClass's maxPods
	// (examples/nodepool.yaml: 110).
	it, ok := env.Catalog.Get(size)
	if !ok {
		t.Fatalf("%s is not in the catalog", size)
	}
	planned := it.WithMaxPods(110).Allocatable()
	cpu, memory := planned[corev1.ResourceCPU], planned[corev1.ResourceMemory]
	t.Logf("engine's allocatable for %s: %s", size, resources.String(planned))

	if err := kube.Create(ctx, deployment("whole-node", 1, cpu.String(), memory.String())); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "the pod sized to the whole node running", func() (bool, string) {
		return allRunning(ctx, kube, "whole-node", 1)
	})
	pods, err := podsWithLabel(ctx, kube, "app", "whole-node")
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: pods[0].Spec.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	if got := node.Labels[corev1.LabelInstanceTypeStable]; got != size {
		t.Fatalf("the pod runs on a %s node, want %s", got, size)
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods} {
		got, want := node.Status.Allocatable[name], planned[name]
		if got.Cmp(want) != 0 {
			t.Errorf("Node %s allocatable %s = %s, the engine assumed %s", node.Name, name, got.String(), want.String())
		}
	}

	// One byte or one millicore more fits no node of the size: not the
	// full one, and no new one.
	oneByteMore := memory.DeepCopy()
	oneByteMore.Add(*resource.NewQuantity(1, resource.BinarySI))
	oneMilliMore := cpu.DeepCopy()
	oneMilliMore.Add(*resource.NewMilliQuantity(1, resource.DecimalSI))
	for _, tc := range []struct{ app, cpu, memory string }{
		{"one-byte-more", cpu.String(), fmt.Sprint(oneByteMore.Value())},
		{"one-millicore-more", oneMilliMore.String(), memory.String()},
	} {
		if err := kube.Create(ctx, deployment(tc.app, 1, tc.cpu, tc.memory)); err != nil {
			t.Fatal(err)
		}
		waitPodEvent(t, ctx, kube, tc.app, "the largest allowed SKU in NodePool general ("+size+") has")
	}
}
