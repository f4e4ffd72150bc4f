package lifecycle

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// TestNotInitializedCondition: Karpenter's reason and message for a
// NodeClaim whose Node is not initialized, first failing check first.
func TestNotInitializedCondition(t *testing.T) {
	gpu := corev1.ResourceName("nvidia.com/gpu")
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	claim := &karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{
		StartupTaints: []corev1.Taint{{Key: "agent-not-ready", Effect: corev1.TaintEffectNoSchedule}},
		Resources: karpv1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), gpu: resource.MustParse("1")}},
	}}
	for _, tc := range []struct {
		name        string
		node        corev1.Node
		reason, msg string
	}{
		{"not ready", corev1.Node{}, "NodeNotReady", "Node status is NotReady"},
		{"startup taint", corev1.Node{Spec: corev1.NodeSpec{Taints: claim.Spec.StartupTaints}, Status: corev1.NodeStatus{Conditions: ready}},
			"StartupTaintsExist", `StartupTaint "agent-not-ready:NoSchedule" still exists`},
		{"no GPU registered", corev1.Node{Status: corev1.NodeStatus{Conditions: ready,
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}},
			"ResourceNotRegistered", `Resource "nvidia.com/gpu" was requested but not registered`},
		{"GPU registered", corev1.Node{Status: corev1.NodeStatus{Conditions: ready,
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), gpu: resource.MustParse("1")}}}, "", ""},
	} {
		reason, msg := notInitializedCondition(claim, &tc.node)
		if reason != tc.reason || msg != tc.msg {
			t.Errorf("%s: %q %q; want %q %q", tc.name, reason, msg, tc.reason, tc.msg)
		}
	}
}
