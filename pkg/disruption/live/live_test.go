package live

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

func TestCommandID(t *testing.T) {
	a := CommandID("multi-node consolidation", []types.UID{"u1", "u2"})
	if b := CommandID("multi-node consolidation", []types.UID{"u2", "u1"}); a != b {
		t.Errorf("the candidates' order changed the id: %s vs %s", a, b)
	}
	for _, other := range []string{
		CommandID("single-node consolidation", []types.UID{"u1", "u2"}),
		CommandID("multi-node consolidation", []types.UID{"u1"}),
		CommandID("multi-node consolidation", []types.UID{"u1", "u3"}),
	} {
		if other == a {
			t.Errorf("another command has id %s", a)
		}
	}
}

// A node whose NodeClaim is deleting blocks new commands while a pod on it
// still needs a place; DaemonSet, finished, terminating and mirror pods do
// not.
func TestDraining(t *testing.T) {
	deleting := metav1.NewTime(time.Now())
	claim := func(name string, del bool) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: karpv1.NodeClaimStatus{NodeName: "node-" + name}}
		if del {
			nc.DeletionTimestamp = &deleting
		}
		return nc
	}
	pod := func(node string, mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	yes := true
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"a running pod on the deleting node", pod("node-gone", nil), "drain of gone"},
		{"a running pod on a node that stays", pod("node-stays", nil), ""},
		{"a DaemonSet pod", pod("node-gone", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", Controller: &yes}}
		}), ""},
		{"a finished pod", pod("node-gone", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), ""},
		{"a terminating pod", pod("node-gone", func(p *corev1.Pod) { p.DeletionTimestamp = &deleting }), ""},
		{"a mirror pod", pod("node-gone", func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
		}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := &snapshot.Cluster{NodeClaims: []*karpv1.NodeClaim{claim("gone", true), claim("stays", false)}, Pods: []*corev1.Pod{tc.pod}}
			if got := draining(snap); got != tc.want {
				t.Errorf("draining() = %q; want %q", got, tc.want)
			}
		})
	}
}

// A command awaiting validation holds others back until its due time plus
// validationGrace; a lost validation message does not hold them forever.
func TestValidating(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	deleting := metav1.NewTime(now)
	for _, tc := range []struct {
		name     string
		mark     string
		deleting bool
		want     string
	}{
		{"not marked", "", false, ""},
		{"due in 15s", now.Add(15 * time.Second).Format(time.RFC3339), false, "validation of a at 2026-12-02T12:00:15Z"},
		{"due 30s ago: the message may be late", now.Add(-30 * time.Second).Format(time.RFC3339), false, "validation of a at 2026-12-02T11:59:30Z"},
		{"due 2m ago: taken as lost", now.Add(-2 * time.Minute).Format(time.RFC3339), false, ""},
		{"on a NodeClaim being deleted", now.Add(15 * time.Second).Format(time.RFC3339), true, ""},
		{"not a time", "soon", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
			if tc.mark != "" {
				nc.Annotations = map[string]string{apis.AnnotationDisruptionValidating: tc.mark}
			}
			if tc.deleting {
				nc.DeletionTimestamp = &deleting
			}
			if got := validating(&snapshot.Cluster{NodeClaims: []*karpv1.NodeClaim{nc}}, now); got != tc.want {
				t.Errorf("validating() = %q; want %q", got, tc.want)
			}
		})
	}
}

// Events keep Karpenter's reasons; a rebalancing consolidation, which
// Karpenter does not have, is named.
func TestEventReason(t *testing.T) {
	for _, tc := range []struct{ reason, method, want string }{
		{"Underutilized", "multi-node consolidation", "Underutilized"},
		{"Empty", "emptiness", "Empty"},
		{"Expired", "", "Expired"},
		{"Underutilized", "rebalancing consolidation", "Underutilized, rebalancing consolidation"},
	} {
		if got := eventReason(tc.reason, tc.method); got != tc.want {
			t.Errorf("eventReason(%q, %q) = %q, want %q", tc.reason, tc.method, got, tc.want)
		}
	}
}

// A node blocked first for one reason and then for another gets an event
// for each (kubectl describe shows what blocks it now); an Unconsolidatable
// node whose message changes gets one per window.
func TestExplanationDedupe(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "node-uid"}}
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m", UID: "other-uid"}}
	blocked := func(why string) disruption.Refusal {
		return disruption.Refusal{NodeClaim: "nc", Blocked: true, Reason: why}
	}
	idle := func(why string) disruption.Refusal { return disruption.Refusal{NodeClaim: "nc", Reason: why} }
	for _, tc := range []struct {
		name     string
		a, b     disruption.Refusal
		objB     *corev1.Node
		wantSame bool
	}{
		{"blocked, then blocked for another reason", blocked("NodeClaim is not Initialized"), blocked("pod default/p has the karpenter.sh/do-not-disrupt annotation"), node, false},
		{"blocked twice for one reason", blocked("Node is not Ready"), blocked("Node is not Ready"), node, true},
		{"one reason on two nodes", blocked("Node is not Ready"), blocked("Node is not Ready"), other, false},
		{"unconsolidatable, message changed", idle("can't replace with a cheaper node (checked at 10:00)"), idle("can't replace with a cheaper node (checked at 10:05)"), node, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := explanation(tc.a, node), explanation(tc.b, tc.objB)
			if a.Message != tc.a.Reason || b.Message != tc.b.Reason {
				t.Errorf("messages %q, %q; want the refusals' reasons", a.Message, b.Message)
			}
			same := a.Reason == b.Reason && slices.Equal(a.DedupeValues, b.DedupeValues)
			if same != tc.wantSame {
				t.Errorf("dedupe keys %s %v and %s %v: same=%t, want %t", a.Reason, a.DedupeValues, b.Reason, b.DedupeValues, same, tc.wantSame)
			}
		})
	}
}
