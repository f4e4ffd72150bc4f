package snapshot

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/testfixtures"
)

func pod(name string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := testfixtures.Pod(testfixtures.PodOptions{Name: name})
	mutate(p)
	return p
}

func unschedulable(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{testfixtures.Unschedulable()}
}

func TestInputSortsPodsAndCapacity(t *testing.T) {
	now := metav1.Now()
	c := &Cluster{
		Pods: []*corev1.Pod{
			pod("bound", func(p *corev1.Pod) { p.Spec.NodeName = "n1" }),
			pod("bound-finished", func(p *corev1.Pod) { p.Spec.NodeName = "n1"; p.Status.Phase = corev1.PodSucceeded }),
			pod("pending-marked", unschedulable),
			pod("pending-unmarked", func(*corev1.Pod) {}),
			pod("deleting", func(p *corev1.Pod) { unschedulable(p); p.DeletionTimestamp = &now }),
			pod("failed", func(p *corev1.Pod) { unschedulable(p); p.Status.Phase = corev1.PodFailed }),
			pod("daemon", func(p *corev1.Pod) {
				unschedulable(p)
				p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds"}}
			}),
		},
		NodeClaims: []*karpv1.NodeClaim{
			{ObjectMeta: metav1.ObjectMeta{Name: "live"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "leaving", DeletionTimestamp: &now}},
		},
	}
	names := func(ps []*corev1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	for _, tc := range []struct {
		rule    string
		pending PendingRule
		want    []string
	}{
		{"live", Live, []string{"pending-marked"}},
		{"offline", Offline, []string{"pending-marked", "pending-unmarked"}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			in := c.Input(nil, tc.pending)
			if got := names(in.Pods); len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) || (len(got) > 1 && got[1] != tc.want[1]) {
				t.Errorf("pending = %v, want %v", got, tc.want)
			}
			if got := names(in.BoundPods); len(got) != 1 || got[0] != "bound" {
				t.Errorf("bound = %v, want [bound]", got)
			}
			if len(in.NodeClaims) != 1 || in.NodeClaims[0].Name != "live" {
				t.Errorf("capacity NodeClaims = %d, want only the live one", len(in.NodeClaims))
			}
		})
	}
}
