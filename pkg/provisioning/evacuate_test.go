package provisioning

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/testfixtures"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

func TestEvacuateSnapshot(t *testing.T) {
	now := metav1.Now()
	pod := func(name, node string, mut func(*corev1.Pod)) *corev1.Pod {
		p := testfixtures.Pod(testfixtures.PodOptions{Name: name, UID: "uid-" + name, NodeName: node, Phase: corev1.PodRunning})
		if mut != nil {
			mut(p)
		}
		return p
	}
	snap := func() *snapshot.Cluster {
		return &snapshot.Cluster{
			Pods: []*corev1.Pod{
				pod("waiting", "", nil),
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
			Nodes: []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "leaving"}}, {ObjectMeta: metav1.ObjectMeta{Name: "staying"}}},
			NodeClaims: []*karpv1.NodeClaim{
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
		}
		return out
	}

	plain := snap()
	evacuate(context.Background(), plain, now.Time)
	if got := names(plain.Pods); len(got) != 8 {
		t.Errorf("an ordinary pass changed the pods: %v", got)
	}

	s := snap()
	original := s.Pods[1]
	evacuate(context.WithValue(context.Background(), evacuatingKey{}, []string{"leaving"}), s, now.Time)
	if got := names(s.Pods); !slices.Equal(got, []string{"waiting", "a", "b", "elsewhere"}) {
		t.Errorf("pods = %v; want the leaving node's reschedulable pods kept (as pending) and the rest dropped", got)
	}
	for _, p := range s.Pods[1:3] {
		if p.Spec.NodeName != "" || pendingSince(p) != now.Time {
			t.Errorf("evacuated pod %s: node %q, pending since %s; want unbound and pending since %s", p.Name, p.Spec.NodeName, pendingSince(p), now.Time)
		}
	}
	if len(s.Nodes) != 1 || s.Nodes[0].Name != "staying" {
		t.Errorf("nodes = %v", s.Nodes)
	}
	var ncs []string
	for _, nc := range s.NodeClaims {
		ncs = append(ncs, nc.Name)
	}
	if !slices.Equal(ncs, []string{"nc-staying", "nc-in-flight"}) {
		t.Errorf("nodeclaims = %v", ncs)
	}
	if original.Spec.NodeName != "leaving" {
		t.Error("evacuate changed the listed pod instead of a copy")
	}
}
