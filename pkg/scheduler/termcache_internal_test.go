package scheduler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOwnerCountersMatchForTerm: the cached owner counter of every term is
// the one counters.forTerm returns, for terms that differ only where an
// encoding could run them together (where one string ends and the next
// starts, absent against empty selectors, namespaces against the pod's own
// namespace), equal terms whose matchLabels maps differ in insertion order,
// and a selector forTerm rejects. Every term is asked twice, the second
// time from the cache.
func TestOwnerCountersMatchForTerm(t *testing.T) {
	web := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	tests := []struct {
		name string
		ns   string
		term corev1.PodAffinityTerm
	}{
		{"hostname, own namespace", "a", corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: web}},
		{"same term, other namespace", "b", corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: web}},
		{"zone", "a", corev1.PodAffinityTerm{TopologyKey: corev1.LabelTopologyZone, LabelSelector: web}},
		{"label key/value boundary moved", "a", corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ap": "pweb"}}}},
		{"two labels", "a", corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "front"}}}},
		{"two labels, other insertion order", "a", corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "front", "app": "web"}}}},
		{"no label selector", "a", corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname}},
		{"empty label selector", "a", corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{}}},
		{"expression", "a", corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "db"}}}}}},
		{"expression, values split differently", "a", corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"webdb"}}}}}},
		{"expression NotIn", "a", corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web", "db"}}}}}},
		{"listed namespaces", "a", corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: web, Namespaces: []string{"b", "c"}}},
		{"listed namespaces joined", "a", corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: web, Namespaces: []string{"bc"}}},
		{"namespace selector {}", "a", corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: web, NamespaceSelector: &metav1.LabelSelector{}}},
		{"namespace selector by label", "a", corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: web,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}}},
		{"invalid selector", "a", corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}}},
	}
	cs := &counters{byKey: map[string]*counter{}}
	cs.setNamespaces([]*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"team": "x"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, {ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"team": "x"}}},
	})
	cache := newOwnerCounters(cs)
	for round := range 2 {
		for _, tt := range tests {
			got, gotErr := cache.forTerm(&tt.term, tt.ns)
			want, wantErr := cs.forTerm(tt.term, tt.ns, true)
			if got != want || (gotErr == nil) != (wantErr == nil) {
				t.Errorf("round %d, %s: counter %v (err %v), want %v (err %v)", round, tt.name, describeCounter(got), gotErr, describeCounter(want), wantErr)
			}
		}
	}
	// Every term is its own counter but the reordered one (the same
	// selector) and the invalid one (none); a term without a label
	// selector and one with {} are two (TestCountersTellNothingFromEverything).
	if distinct := len(cs.all); distinct != len(tests)-2 {
		t.Errorf("%d counters for %d terms, want %d", distinct, len(tests), len(tests)-2)
	}
}

func describeCounter(c *counter) string {
	if c == nil {
		return "none"
	}
	return c.desc
}
