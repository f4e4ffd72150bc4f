package testfixtures

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestCountEvents(t *testing.T) {
	event := func(name, component, kind, object, reason, message string, count int32) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Source: corev1.EventSource{Component: component},
			InvolvedObject: corev1.ObjectReference{Kind: kind, Name: object}, Reason: reason, Message: message, Count: count}
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		event("a", "karpfunc", "NodeClaim", "nc-1", "DisruptionTerminating", "Disrupting NodeClaim: Drifted", 3),
		event("b", "karpfunc", "NodeClaim", "nc-2", "DisruptionTerminating", "Disrupting NodeClaim: Expired", 0),
		event("c", "kubelet", "Pod", "p", "Evicted", "evicted", 1),
	).Build()
	for _, tc := range []struct {
		name   string
		filter EventFilter
		want   int
	}{
		{"all, a count of 0 is one occurrence", EventFilter{}, 5},
		{"by reason and message", EventFilter{Reason: "DisruptionTerminating", MessageContains: "Drifted"}, 3},
		{"by object", EventFilter{Kind: "NodeClaim", Name: "nc-2"}, 1},
		{"by component", EventFilter{Component: "kubelet"}, 1},
		{"nothing matches", EventFilter{Reason: "Nope"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CountEvents(context.Background(), kube, tc.filter)
			if err != nil || got != tc.want {
				t.Errorf("CountEvents = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
