package provisioning

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

func TestEvacuateSnapshot(t *testing.T) {
	now := metav1.Now()
	pod := func(name, node string, mut func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if mut != nil {
			mut(p)
		}
		return p
	}
	snap := func() *snapshot {
		return &snapshot{
			pending: []*corev1.Pod{pod("waiting", "", nil)},
			bound: []*corev1.Pod{
				pod("a", "leaving", nil),
				pod("b", "leaving", nil),
				pod("ds", "leaving", func(p *corev1.Pod) {
					p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds"}}
				}),
				pod("going", "leaving", func(p *corev1.Pod) { p.DeletionTimestamp = &now }),
				pod("done", "leaving", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
				pod("mirror", "leaving", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }),
				pod("elsewhere", "staying", nil),
			},
			nodes: []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "leaving"}}, {ObjectMeta: metav1.ObjectMeta{Name: "staying"}}},
			nodeClaims: []*karpv1.NodeClaim{
				{ObjectMeta: metav1.ObjectMeta{Name: "nc-leaving"}, Status: karpv1.NodeClaimStatus{NodeName: "leaving"}},
				{ObjectMeta: metav1.ObjectMeta{Name: "nc-staying"}, Status: karpv1.NodeClaimStatus{NodeName: "staying"}},
				{ObjectMeta: metav1.ObjectMeta{Name: "nc-in-flight"}},
			},
		}
	}
	names := func(pods []*corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
			if p.Name == "a" && p.Spec.NodeName != "" {
				t.Errorf("evacuated pod a still bound to %s", p.Spec.NodeName)
			}
		}
		return out
	}

	plain := snap()
	plain.evacuate(context.Background(), now.Time)
	if got := names(plain.pending); !slices.Equal(got, []string{"waiting"}) {
		t.Errorf("an ordinary pass changed pending: %v", got)
	}

	s := snap()
	original := s.bound[0]
	s.evacuate(context.WithValue(context.Background(), evacuatingKey{}, []string{"leaving"}), now.Time)
	if got := names(s.pending); !slices.Equal(got, []string{"waiting", "a", "b"}) {
		t.Errorf("pending = %v; want the waiting pod and the leaving node's reschedulable pods", got)
	}
	if got := names(s.bound); !slices.Equal(got, []string{"elsewhere"}) {
		t.Errorf("bound = %v", got)
	}
	if len(s.nodes) != 1 || s.nodes[0].Name != "staying" {
		t.Errorf("nodes = %v", s.nodes)
	}
	var ncs []string
	for _, nc := range s.nodeClaims {
		ncs = append(ncs, nc.Name)
	}
	if !slices.Equal(ncs, []string{"nc-staying", "nc-in-flight"}) {
		t.Errorf("nodeclaims = %v", ncs)
	}
	if got := pendingSince(s.pending[1]); !got.Equal(now.Time) {
		t.Errorf("an evacuated pod is pending since %s; want the pass's time %s", got, now.Time)
	}
	if original.Spec.NodeName != "leaving" {
		t.Error("evacuate changed the listed pod instead of a copy")
	}
}
