package scheduler

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestCountersByNamespaceMatchDirect: the counters the index finds for a
// pod are those counting it directly (counter.matches, owners left out),
// in counters' order, for counters in one namespace, several, all of them,
// and owner counters, and pods in and out of those namespaces.
func TestCountersByNamespaceMatchDirect(t *testing.T) {
	cs := &counters{byKey: map[string]*counter{}}
	selectors := []*metav1.LabelSelector{
		{MatchLabels: map[string]string{"app": "web"}},
		{MatchLabels: map[string]string{"app": "web", "tier": "front"}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist}}},
		{},
	}
	for i, sel := range selectors {
		for _, nss := range [][]string{{"a"}, {"b"}, {"a", "b"}} {
			if _, err := cs.get(corev1.LabelTopologyZone, sel, nil, false, nss, i == 1); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := cs.get(corev1.LabelHostname, sel, nil, true, nil, i == 2); err != nil {
			t.Fatal(err)
		}
	}
	labelSets := []map[string]string{{"app": "web", "tier": "front"}, {"app": "web"}, {"app": "db", "tier": "front"}, nil}
	index := newCountersByNamespace(cs)
	matchedSome := false
	for round := range 2 { // the second round is served from the index
		for _, ns := range []string{"a", "b", "c"} {
			for i, set := range labelSets {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(i), Namespace: ns, Labels: set}}
				got, want := index.matched(pod, nil), directMatches(cs, pod)
				matchedSome = matchedSome || len(want) > 0
				if !slices.Equal(got, want) {
					t.Errorf("round %d, pod in %s with %v: %d counters, want %d", round, ns, set, len(got), len(want))
				}
			}
		}
	}
	if !matchedSome {
		t.Error("no pod matched any counter: the test checks nothing")
	}
}

func directMatches(cs *counters, pod *corev1.Pod) []*counter {
	var out []*counter
	for _, c := range cs.all {
		if !c.owners && c.matches(pod.Namespace, labels.Set(pod.Labels)) {
			out = append(out, c)
		}
	}
	return out
}

// TestCountersTellNothingFromEverything: a term without a labelSelector
// matches no pod and one with an empty selector matches every pod; both
// selectors print as "", yet each gets its own counter, whichever comes
// first.
func TestCountersTellNothingFromEverything(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first *metav1.LabelSelector
	}{
		{name: "nothing first", first: nil},
		{name: "everything first", first: &metav1.LabelSelector{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := &counters{byKey: map[string]*counter{}}
			second := &metav1.LabelSelector{}
			if tc.first != nil {
				second = nil
			}
			one, err := cs.get(corev1.LabelHostname, tc.first, nil, false, []string{"default"}, true)
			if err != nil {
				t.Fatal(err)
			}
			other, err := cs.get(corev1.LabelHostname, second, nil, false, []string{"default"}, true)
			if err != nil {
				t.Fatal(err)
			}
			if one == other {
				t.Fatal("a selector matching no pod and one matching every pod share a counter")
			}
			pod := labels.Set{"app": "web"}
			if one.selector.Matches(pod) == (tc.first == nil) {
				t.Errorf("the first counter's selector matches a pod: %t, want %t", one.selector.Matches(pod), tc.first != nil)
			}
		})
	}
}
