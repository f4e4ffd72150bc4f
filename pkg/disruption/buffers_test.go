package disruption

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1beta1 "sigs.k8s.io/karpenter/pkg/apis/autoscaling/v1beta1"

	"github.com/karpfunc/karpfunc/pkg/capacitybuffer"
)

// bufferPods are the virtual pods of a buffer of n chunks of cpu/mem.
func bufferPods(t *testing.T, n int32, cpu, mem string) []*corev1.Pod {
	t.Helper()
	template := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "shape", Namespace: "default"},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}}}}
	cb := &autoscalingv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "room", Namespace: "default", UID: "room-uid"},
		Spec: autoscalingv1beta1.CapacityBufferSpec{PodTemplateRef: &autoscalingv1beta1.LocalObjectRef{Name: "shape"}, Replicas: &n}}
	bufs := capacitybuffer.Evaluate([]*autoscalingv1beta1.CapacityBuffer{cb}, capacitybuffer.Objects{PodTemplates: []*corev1.PodTemplate{template}}, capacitybuffer.Options{})
	pods := capacitybuffer.AllVirtualPods(bufs)
	if len(pods) != int(n) {
		t.Fatalf("%d virtual pods, want %d", len(pods), n)
	}
	return pods
}

func TestBufferRoom(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks int32
		// keep: the empty node b stays (no command takes it without a
		// replacement that keeps the room).
		keep bool
	}{
		{"without a buffer the empty node goes", 0, false},
		{"an empty node that holds a buffer's room stays", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.pods("web", "a", 3, "1", "2Gi")
			f.node("b", "Standard_D4s_v5", "on-demand")
			st := State{Cluster: f.c, Catalog: f.cat, Now: now, Options: f.opts}
			if tc.chunks > 0 {
				st.BufferPods = bufferPods(t, tc.chunks, "1", "2Gi")
			}
			d := Decide(st)
			takesB := d.Command != nil && slices.Contains(names(d.Command.Candidates), "b")
			if !tc.keep {
				if !takesB || d.Command.Method != MethodEmptiness {
					t.Fatalf("want emptiness to take b, got %v", d.Command)
				}
				return
			}
			if takesB && (d.Command.Method == MethodEmptiness || len(d.Command.Replacements) == 0) {
				t.Fatalf("%s takes b (the buffer's room) without a replacement: %v", d.Command.Method, d.Command)
			}
			if !takesB && !strings.Contains(refusalOf(d, "b"), "CapacityBuffer default/room") {
				t.Errorf("b's refusal does not name the buffer: %q", refusalOf(d, "b"))
			}
			room := d.BufferRooms["default/room"]
			if room == nil || room.Existing != int(tc.chunks) || room.New != 0 {
				t.Errorf("buffer room %+v, want all %d chunks on existing nodes", room, tc.chunks)
			}
		})
	}
}

// TestBufferRoomKeepsConsolidationHonest: two small nodes whose pods fit
// on one are consolidated, but not when a buffer's chunk needs the room
// the second one holds: the simulation places the buffer's pods too.
func TestBufferRoomKeepsConsolidationHonest(t *testing.T) {
	f := newFixture(t)
	f.node("a", "Standard_D2als_v6", "on-demand")
	f.pods("web", "a", 1, "500m", "1Gi")
	f.node("b", "Standard_D2als_v6", "on-demand")
	f.pods("api", "b", 1, "500m", "1Gi")
	st := State{Cluster: f.c, Catalog: f.cat, Now: now, Options: f.opts}
	without := Decide(st)
	if without.Command == nil {
		t.Fatal("without a buffer, want a+b consolidated (their pods fit on one node)")
	}
	st.BufferPods = bufferPods(t, 1, "1", "2Gi")
	with := Decide(st)
	if with.Command != nil {
		t.Fatalf("with a buffer of one chunk the pods and the room fit on no cheaper capacity, yet: %v", with.Command)
	}
}
