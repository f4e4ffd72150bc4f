package repair

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, conds ...corev1.NodeCondition) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: conds}}
}

func cond(typ corev1.NodeConditionType, status corev1.ConditionStatus, since time.Time) corev1.NodeCondition {
	return corev1.NodeCondition{Type: typ, Status: status, LastTransitionTime: metav1.NewTime(since)}
}

func healthyNodes(n int, now time.Time) []*corev1.Node {
	out := make([]*corev1.Node, n)
	for i := range out {
		out[i] = node(fmt.Sprintf("ok-%d", i), cond(corev1.NodeReady, corev1.ConditionTrue, now.Add(-time.Hour)))
	}
	return out
}

func TestAllowedUnhealthy(t *testing.T) {
	// 20 % rounded up, as a PDB percentage: one of three may be unhealthy.
	for nodes, want := range map[int]int{0: 0, 1: 1, 3: 1, 5: 1, 6: 2, 10: 2, 11: 3} {
		if got := AllowedUnhealthy(nodes); got != want {
			t.Errorf("AllowedUnhealthy(%d) = %d, want %d", nodes, got, want)
		}
	}
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	policies := Policies(0)
	unknownFor := func(name string, d time.Duration) *corev1.Node {
		return node(name, cond(corev1.NodeReady, corev1.ConditionUnknown, now.Add(-d)))
	}
	for _, tc := range []struct {
		name    string
		node    *corev1.Node
		others  []*corev1.Node
		want    Action
		wantDue time.Time
	}{
		{name: "ready", node: node("n", cond(corev1.NodeReady, corev1.ConditionTrue, now.Add(-time.Hour))), want: Healthy},
		{name: "NodeHealthy True", node: node("n", cond(corev1.NodeReady, corev1.ConditionTrue, now), cond(ConditionNodeHealthy, corev1.ConditionTrue, now)), want: Healthy},
		{name: "Ready Unknown inside the toleration", node: unknownFor("n", 9*time.Minute), others: healthyNodes(4, now), want: Wait, wantDue: now.Add(time.Minute)},
		{name: "Ready False inside the toleration", node: node("n", cond(corev1.NodeReady, corev1.ConditionFalse, now.Add(-time.Minute))), want: Wait, wantDue: now.Add(9 * time.Minute)},
		{name: "Ready Unknown past the toleration", node: unknownFor("n", 10*time.Minute), others: healthyNodes(4, now), want: Repair, wantDue: now},
		{name: "NodeHealthy False at once", node: node("n", cond(corev1.NodeReady, corev1.ConditionTrue, now.Add(-time.Hour)), cond(ConditionNodeHealthy, corev1.ConditionFalse, now)),
			others: healthyNodes(4, now), want: Repair, wantDue: now},
		{name: "the condition whose toleration ends first decides",
			node:   node("n", cond(corev1.NodeReady, corev1.ConditionFalse, now.Add(-time.Minute)), cond(ConditionNodeHealthy, corev1.ConditionFalse, now.Add(-time.Second))),
			others: healthyNodes(4, now), want: Repair, wantDue: now.Add(-time.Second)},
		{name: "alone in its pool: 1 of 1 is within 20 % rounded up", node: unknownFor("n", time.Hour), want: Repair, wantDue: now.Add(-50 * time.Minute)},
		{name: "1 of 3 unhealthy: allowed", node: unknownFor("n", time.Hour), others: healthyNodes(2, now), want: Repair, wantDue: now.Add(-50 * time.Minute)},
		{name: "2 of 3 unhealthy: blocked", node: unknownFor("n", time.Hour), others: append(healthyNodes(1, now), unknownFor("m", time.Minute)),
			want: Blocked, wantDue: now.Add(-50 * time.Minute)},
		{name: "a node inside its toleration counts as unhealthy", node: unknownFor("n", time.Hour),
			others: append(healthyNodes(3, now), unknownFor("m", time.Second)), want: Blocked, wantDue: now.Add(-50 * time.Minute)},
		{name: "2 of 6 unhealthy: allowed", node: unknownFor("n", time.Hour), others: append(healthyNodes(4, now), unknownFor("m", time.Minute)),
			want: Repair, wantDue: now.Add(-50 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := append([]*corev1.Node{tc.node}, tc.others...)
			d := Decide(tc.node, pool, policies, now)
			if d.Action != tc.want {
				t.Fatalf("action %s, want %s (%+v)", d.Action, tc.want, d)
			}
			if tc.want != Healthy && !d.Unhealthy.Due.Equal(tc.wantDue) {
				t.Errorf("due %s, want %s", d.Unhealthy.Due, tc.wantDue)
			}
		})
	}
}

func TestPoliciesReadyToleration(t *testing.T) {
	for _, p := range Policies(30 * time.Second) {
		want := 30 * time.Second
		if p.Condition == ConditionNodeHealthy {
			want = 0
		}
		if p.Toleration != want {
			t.Errorf("policy %s=%s toleration %s, want %s", p.Condition, p.Status, p.Toleration, want)
		}
	}
}

func TestCheckAt(t *testing.T) {
	due := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	for _, d := range []time.Time{due, due.Add(time.Millisecond), due.Add(999 * time.Millisecond)} {
		if at := checkAt(d); !at.After(d) || at.Sub(d) > time.Second {
			t.Errorf("checkAt(%s) = %s: want after it, within a second", d, at)
		}
	}
}
