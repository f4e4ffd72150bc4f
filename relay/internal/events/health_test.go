package events

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpfunc/karpfunc/pkg/messages"
)

// TestNodeHealth: each NodeHealthy transition is its own node event, and
// one transition seen twice is one message.
func TestNodeHealth(t *testing.T) {
	b := Builder{Cluster: "c1"}
	withHealth := func(status corev1.ConditionStatus, since time.Time) *corev1.Node {
		n := node(nil, time.Time{})
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: NodeHealthy, Status: status, LastTransitionTime: metav1.NewTime(since)})
		return n
	}
	ids := map[string]bool{}
	for _, tc := range []struct {
		node   *corev1.Node
		wantID string
	}{
		{withHealth(corev1.ConditionFalse, now), fmt.Sprintf("node/u1/condition/kubernetes.azure.com/NodeHealthy=False/%d", now.Unix())},
		{withHealth(corev1.ConditionTrue, now.Add(time.Minute)), fmt.Sprintf("node/u1/condition/kubernetes.azure.com/NodeHealthy=True/%d", now.Add(time.Minute).Unix())},
		{withHealth(corev1.ConditionFalse, now.Add(2*time.Minute)), fmt.Sprintf("node/u1/condition/kubernetes.azure.com/NodeHealthy=False/%d", now.Add(2*time.Minute).Unix())},
	} {
		m, err := b.NodeHealth(tc.node, now.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if m.ID != tc.wantID {
			t.Errorf("id %q, want %q", m.ID, tc.wantID)
		}
		if ids[m.ID] {
			t.Errorf("two transitions share id %q", m.ID)
		}
		ids[m.ID] = true
		if got := decode[messages.Node](t, m, messages.TypeNode); got.Name != "n1" || got.UID != "u1" {
			t.Errorf("data %+v", got)
		}
	}
	if _, err := b.NodeHealth(node(nil, time.Time{}), now); err == nil {
		t.Error("a node without NodeHealthy built an event")
	}
}
