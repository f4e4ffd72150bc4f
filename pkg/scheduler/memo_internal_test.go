package scheduler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/karpenter/pkg/utils/resources"
)

// TestRoomLeft: roomLeft is allocatable less Karpenter's requests of the
// bound pods, with and without a Memo, for pods with init containers,
// sidecars, overhead and a resource the node does not report.
func TestRoomLeft(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	pods := []*corev1.Pod{
		{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "250m", "memory", "1Gi")}}}}},
		{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "3", "memory", "64Mi")}}},
			Containers:     []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "512Mi", "example.com/gpu", "1")}}}}},
		{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "sidecar", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "50m", "memory", "128Mi")}}},
			Containers:     []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1500m")}}},
			Overhead:       rl("cpu", "120m", "memory", "100Mi")}},
	}
	allocatable := rl("cpu", "7820m", "memory", "27Gi", "pods", "110", "ephemeral-storage", "100Gi")
	s := &solver{res: newResIndex()}
	s.res.add("example.com/gpu")
	s.res.add(corev1.ResourceEphemeralStorage)
	want := s.res.vec(resources.Subtract(allocatable, resources.RequestsForPods(pods...)))
	memo := NewMemo()
	for _, m := range []*Memo{nil, memo, memo} {
		got := s.roomLeft(allocatable, pods, m)
		for i, name := range s.res.names {
			if got[i] != want[i] {
				t.Errorf("memo %v: %s left %d, want %d", m != nil, name, got[i], want[i])
			}
		}
	}
	if want[rCPU] != 7820-250-3000-1670 || want[rPods] != 107 {
		t.Errorf("reference room %v: cpu want %d, pods want 107", want, 7820-250-3000-1670)
	}
}
