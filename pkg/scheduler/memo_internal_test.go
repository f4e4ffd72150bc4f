package scheduler

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/resources"
)

// TestRoomLeft: roomLeft is allocatable less Karpenter's requests of the
// bound pods, with and without a Memo, in either order, for pods with init
// containers, sidecars, overhead, a resource the node does not report and
// requests finer than the vector's unit (two pods of 500 microcores take
// 1m, not 2m: requests sum exactly, then round); and allocatable without
// pods.
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
		{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500u", "memory", "100m")}}}}},
		{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500u", "memory", "100m")}}}}},
	}
	allocatable := rl("cpu", "7820m", "memory", "27Gi", "pods", "110", "ephemeral-storage", "100Gi")
	s := &solver{res: newResIndex()}
	s.res.add("example.com/gpu")
	s.res.add(corev1.ResourceEphemeralStorage)
	want := s.res.vec(resources.Subtract(allocatable, resources.RequestsForPods(pods...)))
	memo := NewMemo()
	reversed := slices.Clone(pods)
	slices.Reverse(reversed)
	for _, m := range []*Memo{nil, memo, memo} {
		for _, order := range [][]*corev1.Pod{pods, reversed} {
			onNode := &boundOnNode{requested: make([]resource.Quantity, len(s.res.names))}
			for _, pod := range order {
				s.addBoundPod(onNode, pod, m)
			}
			got := s.roomLeft(allocatable, onNode)
			for i, name := range s.res.names {
				if got[i] != want[i] {
					t.Errorf("memo %v: %s left %d, want %d", m != nil, name, got[i], want[i])
				}
			}
		}
	}
	if want[rCPU] != 7820-250-3000-1670-1 || want[rPods] != 105 {
		t.Errorf("reference room %v: cpu want %d, pods want 105", want, 7820-250-3000-1670-1)
	}
	empty := s.roomLeft(allocatable, nil)
	if wantEmpty := s.res.vec(allocatable); !slices.Equal(empty, wantEmpty) {
		t.Errorf("room without pods %v, want allocatable %v", empty, wantEmpty)
	}
}

// TestLabelRequirementsShared: requirements built from shared label
// Requirements equal scheduling.NewLabelRequirements key by key, for label
// sets that share labels, differ in one value, and carry a beta label that
// normalizes onto a stable one (with the same and with a different value);
// and narrowing one set's copy leaves the others as they were.
func TestLabelRequirementsShared(t *testing.T) {
	sets := []map[string]string{
		{corev1.LabelHostname: "a", corev1.LabelTopologyZone: "z1", "team": "x"},
		{corev1.LabelHostname: "b", corev1.LabelTopologyZone: "z1", "team": "x"},
		{corev1.LabelHostname: "c", corev1.LabelTopologyZone: "z2", "failure-domain.beta.kubernetes.io/zone": "z2", "team": "y"},
		{corev1.LabelHostname: "d", corev1.LabelTopologyZone: "z1", "failure-domain.beta.kubernetes.io/zone": "z2"},
		{corev1.LabelInstanceTypeStable: "D4", "beta.kubernetes.io/instance-type": "D4", "team": ""},
		{},
	}
	shared := newLabelRequirements()
	var built []scheduling.Requirements
	for range 2 { // the second round is served from shared Requirements
		for i, labels := range sets {
			got, want := shared.of(labels), scheduling.NewLabelRequirements(labels)
			assertSameRequirements(t, i, got, want)
			built = append(built, got)
		}
	}
	if len(shared.byLabel) == 0 || len(shared.byLabel) >= 2*countLabels(sets) {
		t.Errorf("%d shared Requirements for %d labels: not shared", len(shared.byLabel), countLabels(sets))
	}
	narrowed := copyRequirements(built[0])
	narrowed.Add(scheduling.NewRequirement("team", corev1.NodeSelectorOpIn, "y"))
	if narrowed.Get("team").Has("x") {
		t.Fatalf("narrowing a copy did not narrow it: %s", narrowed)
	}
	for i, labels := range sets {
		assertSameRequirements(t, i, built[i], scheduling.NewLabelRequirements(labels))
	}
}

func countLabels(sets []map[string]string) int {
	total := 0
	for _, labels := range sets {
		total += len(labels)
	}
	return total
}

func assertSameRequirements(t *testing.T, set int, got, want scheduling.Requirements) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("set %d: %d keys (%s), want %d (%s)", set, len(got), got, len(want), want)
		return
	}
	for key, req := range want {
		if !got.Has(key) || got.Get(key).String() != req.String() {
			t.Errorf("set %d, key %s: %v, want %v", set, key, got.Get(key), req)
		}
	}
}
