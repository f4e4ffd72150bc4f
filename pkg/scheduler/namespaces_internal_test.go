package scheduler

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestSetNamespacesFromPods: every namespace a pod is in is known, with
// its name label, whether its pods come in a run (the API server's order)
// or interleaved, after a nil pod, or in the empty namespace; a Namespace
// object's labels are kept.
func TestSetNamespacesFromPods(t *testing.T) {
	pod := func(ns string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns}} }
	tests := []struct {
		name string
		pods [][]*corev1.Pod
		want []string
	}{
		{"runs", [][]*corev1.Pod{{pod("a"), pod("a"), pod("b"), pod("b")}}, []string{"a", "b", "team"}},
		{"interleaved", [][]*corev1.Pod{{pod("b"), pod("a"), pod("b"), pod("c"), pod("a")}}, []string{"a", "b", "c", "team"}},
		{"nil between a run", [][]*corev1.Pod{{pod("a"), nil, pod("a"), nil, pod("d")}}, []string{"a", "d", "team"}},
		{"empty namespace", [][]*corev1.Pod{{pod(""), pod(""), pod("a")}}, []string{"", "a", "team"}},
		{"two lists, same run across them", [][]*corev1.Pod{{pod("a")}, {pod("a"), pod("e")}}, []string{"a", "e", "team"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := &counters{byKey: map[string]*counter{}}
			cs.setNamespaces([]*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: map[string]string{"tier": "x"}}}}, tt.pods...)
			if !slices.Equal(cs.nsNames, tt.want) {
				t.Errorf("namespaces %q, want %q", cs.nsNames, tt.want)
			}
			for _, name := range tt.want {
				want := labels.Set{corev1.LabelMetadataName: name}
				if name == "team" {
					want["tier"] = "x"
				}
				if !maps.Equal(cs.nsLabels[name], want) {
					t.Errorf("namespace %q labels %v, want %v", name, cs.nsLabels[name], want)
				}
			}
		})
	}
}
