package disruption

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// TestDriftHold: a held drift reason keeps its drifted nodes (explained,
// with the next pass at the hold's end), other reasons and other methods
// go on.
func TestDriftHold(t *testing.T) {
	opens := now.Add(90 * time.Minute)
	holdNodePool := func(reason string) (Hold, bool) {
		if reason == DriftNodePool {
			return Hold{Reason: "outside the maintenance window aksManagedNodeOSUpgradeSchedule: the next one opens at " + opens.Format(time.RFC3339), Until: opens}, true
		}
		return Hold{}, false
	}
	for _, tc := range []struct {
		name  string
		build func(f *fixture)
		hold  func(string) (Hold, bool)
		// method of the command ("" none); refusal substrings by node.
		method  string
		refusal map[string]string
		next    time.Time
	}{
		{name: "a held drift keeps the node and asks for a pass when the window opens", build: func(f *fixture) {
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.pods("a", "a", 3, "1", "4Gi")
			f.np.Spec.Template.Labels = map[string]string{"team": "new"}
		}, hold: holdNodePool, refusal: map[string]string{"a": "drifted (NodePoolDrifted) but outside the maintenance window aksManagedNodeOSUpgradeSchedule: the next one opens at " + opens.Format(time.RFC3339)}, next: opens},
		{name: "without a hold the same node is replaced", build: func(f *fixture) {
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.pods("a", "a", 3, "1", "4Gi")
			f.np.Spec.Template.Labels = map[string]string{"team": "new"}
		}, hold: func(string) (Hold, bool) { return Hold{}, false }, method: MethodDrift},
		{name: "a hold of one reason does not hold another", build: func(f *fixture) {
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.pods("a", "a", 3, "1", "4Gi")
			f.np.Spec.Template.Spec.Requirements[0].Values = []string{"E"}
		}, hold: holdNodePool, method: MethodDrift},
		{name: "a held drifted node that is empty still goes by emptiness", build: func(f *fixture) {
			f.node("a", "Standard_D4s_v5", "on-demand")
			f.np.Spec.Template.Labels = map[string]string{"team": "new"}
		}, hold: holdNodePool, method: MethodEmptiness},
		{name: "a held drifted node is still consolidated", build: func(f *fixture) {
			f.node("a", "Standard_D16s_v5", "on-demand")
			f.pods("a", "a", 1, "1", "2Gi")
			f.np.Spec.Template.Labels = map[string]string{"team": "new"}
		}, hold: holdNodePool, method: MethodSingleNode},
		{name: "a do-not-disrupt node is explained by that, not by the window", build: func(f *fixture) {
			f.node("a", "Standard_D4s_v5", "on-demand", func(nc *karpv1.NodeClaim, _ *corev1.Node) {
				nc.Annotations[karpv1.DoNotDisruptAnnotationKey] = "true"
			})
			f.pods("a", "a", 3, "1", "4Gi")
			f.np.Spec.Template.Labels = map[string]string{"team": "new"}
		}, hold: holdNodePool, refusal: map[string]string{"a": "do-not-disrupt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.build(f)
			asked := map[string]int{}
			d := Decide(State{Cluster: f.c, Catalog: f.cat, Now: now, Options: f.opts, DriftHold: func(reason string) (Hold, bool) {
				asked[reason]++
				return tc.hold(reason)
			}})
			for reason, n := range asked {
				if n > 1 {
					t.Errorf("DriftHold asked %d times for %s, want once", n, reason)
				}
			}
			switch {
			case tc.method == "" && d.Command != nil:
				t.Errorf("command %s, want none", d.Command)
			case tc.method != "" && (d.Command == nil || d.Command.Method != tc.method):
				t.Errorf("command %v, want %s; refusals %+v", d.Command, tc.method, d.Refusals)
			}
			for node, sub := range tc.refusal {
				if r := refusalOf(d, node); !strings.Contains(r, sub) {
					t.Errorf("refusal for %s = %q, want it to contain %q", node, r, sub)
				}
			}
			if !tc.next.IsZero() && !d.Next.Equal(tc.next) {
				t.Errorf("next pass at %s, want %s (the window's start)", d.Next, tc.next)
			}
		})
	}
}
