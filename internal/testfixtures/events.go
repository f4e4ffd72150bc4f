package testfixtures

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EventFilter selects Kubernetes events; an empty field matches any.
type EventFilter struct {
	// Component is the event's source component ("karpfunc" for the
	// handler's events).
	Component string
	// Kind and Name are the involved object's.
	Kind, Name string
	Reason     string
	// MessageContains must be a substring of the message.
	MessageContains string
}

func (f EventFilter) matches(e *corev1.Event) bool {
	return (f.Component == "" || e.Source.Component == f.Component) &&
		(f.Kind == "" || e.InvolvedObject.Kind == f.Kind) &&
		(f.Name == "" || e.InvolvedObject.Name == f.Name) &&
		(f.Reason == "" || e.Reason == f.Reason) &&
		strings.Contains(e.Message, f.MessageContains)
}

// occurrences is how many times an event happened: its Count, which the
// recorder raises when it folds repeats into one object, and at least 1
// (an event written without a count happened once).
func occurrences(e *corev1.Event) int {
	return int(max(e.Count, 1))
}

// CountEvents is how many times events matching filter happened, in all
// namespaces.
func CountEvents(ctx context.Context, kube client.Reader, filter EventFilter) (int, error) {
	byReason, err := CountEventsByReason(ctx, kube, filter)
	total := 0
	for _, count := range byReason {
		total += count
	}
	return total, err
}

// CountEventsByReason is CountEvents per reason.
func CountEventsByReason(ctx context.Context, kube client.Reader, filter EventFilter) (map[string]int, error) {
	var list corev1.EventList
	if err := kube.List(ctx, &list); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for i := range list.Items {
		if event := &list.Items[i]; filter.matches(event) {
			out[event.Reason] += occurrences(event)
		}
	}
	return out, nil
}
