package scheduler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// TestNodeAllocatable: a node whose NodeClaim is not initialized offers
// the NodeClaim's value of each resource it reports as zero or not at all
// (Karpenter's StateNode.Allocatable), so a GPU whose device plugin has not
// registered still counts; an initialized node, or one without a
// NodeClaim, offers exactly what it reports.
func TestNodeAllocatable(t *testing.T) {
	gpu := corev1.ResourceName("nvidia.com/gpu")
	reported := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), gpu: resource.MustParse("0")}
	claim := &karpv1.NodeClaim{Status: karpv1.NodeClaimStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), gpu: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}
	node := func(initialized bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}, Status: corev1.NodeStatus{Allocatable: reported}}
		if initialized {
			n.Labels[karpv1.NodeInitializedLabelKey] = "true"
		}
		return n
	}
	for _, tc := range []struct {
		name        string
		node        *corev1.Node
		claim       *karpv1.NodeClaim
		gpu, cpu    string
		wantsMemory bool
	}{
		{"not initialized", node(false), claim, "1", "3", true},
		{"initialized", node(true), claim, "0", "3", false},
		{"no NodeClaim", node(false), nil, "0", "3", false},
	} {
		got := nodeAllocatable(tc.node, tc.claim)
		gpus, cpu := got[gpu], got[corev1.ResourceCPU]
		_, memory := got[corev1.ResourceMemory]
		if gpus.String() != tc.gpu || cpu.String() != tc.cpu || memory != tc.wantsMemory {
			t.Errorf("%s: %v; want gpu %s, cpu %s, memory %v", tc.name, got, tc.gpu, tc.cpu, tc.wantsMemory)
		}
	}
	if q := reported[gpu]; !q.IsZero() {
		t.Errorf("the node's own allocatable was changed: %v", reported)
	}
}
