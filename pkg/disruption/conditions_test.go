package disruption

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

func TestConditions(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mutate     func(f *fixture, nc *karpv1.NodeClaim)
		consol     bool
		at         time.Time
		driftedHas string
	}{
		{"initialized an hour ago, consolidateAfter 1m", func(*fixture, *karpv1.NodeClaim) {}, true, time.Time{}, ""},
		{"a pod event 20 s ago", func(_ *fixture, nc *karpv1.NodeClaim) {
			nc.Status.LastPodEventTime = metav1.NewTime(now.Add(-20 * time.Second))
		}, false, now.Add(40 * time.Second), ""},
		{"not initialized", func(_ *fixture, nc *karpv1.NodeClaim) { nc.Status.Conditions = nil }, false, time.Time{}, ""},
		{"consolidateAfter Never", func(f *fixture, _ *karpv1.NodeClaim) {
			f.np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
		}, false, time.Time{}, ""},
		{"NodePool template changed", func(f *fixture, _ *karpv1.NodeClaim) {
			f.np.Spec.Template.Labels = map[string]string{"x": "y"}
		}, true, time.Time{}, DriftNodePool},
		{"AKSNodeClass changed", func(f *fixture, _ *karpv1.NodeClaim) {
			gen := "Ubuntu2404"
			f.c.NodeClasses[0].Spec.ImageFamily = &gen
		}, true, time.Time{}, DriftNodeClass},
		{"a budget change is not drift", func(f *fixture, _ *karpv1.NodeClaim) {
			f.np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
		}, true, time.Time{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			nc := f.node("a", "Standard_D4as_v5", "on-demand")
			tc.mutate(f, nc)
			hashes := map[string]string{}
			for _, c := range f.c.NodeClasses {
				hashes[c.Name] = NodeClassHash(c)
			}
			got := Conditions(nc, f.np, hashes, now)
			if got.Consolidatable != tc.consol || !got.ConsolidatableAt.Equal(tc.at) {
				t.Errorf("consolidatable %t at %v, want %t at %v", got.Consolidatable, got.ConsolidatableAt, tc.consol, tc.at)
			}
			if (tc.driftedHas == "") != (got.Drifted == "") || (tc.driftedHas != "" && got.Drifted != tc.driftedHas) {
				t.Errorf("drifted %q, want %q", got.Drifted, tc.driftedHas)
			}
		})
	}
}
