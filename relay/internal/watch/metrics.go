package watch

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	corev1 "k8s.io/api/core/v1"
)

var meter = otel.Meter("github.com/karpfunc/karpfunc/relay/internal/watch")

var (
	// Karpenter's name: pod creation to binding, for every pod the relay
	// sees bound.
	podsBoundDuration, _ = meter.Float64Histogram("karpenter_pods_bound_duration_seconds",
		metric.WithDescription("The time from pod creation until the pod is bound."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(podBuckets...))
	// karpfunc's own: from kube-scheduler marking a pod Unschedulable to
	// its binding, the time karpfunc took to give it capacity.
	podsTimeToCapacity, _ = meter.Float64Histogram("karpfunc_pods_time_to_capacity_seconds",
		metric.WithDescription("The time from kube-scheduler marking a pod Unschedulable until it is bound."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(podBuckets...))
)

var podBuckets = []float64{0.5, 1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200}

// registerGauges reports the unschedulable pods the relay holds, read at
// collection time.
func (r *relay) registerGauges() error {
	_, err := meter.Int64ObservableGauge("karpfunc_pods_unschedulable",
		metric.WithDescription("Pods kube-scheduler marked Unschedulable, as the relay sees them now."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			n := 0
			for _, obj := range r.pods.GetStore().List() {
				if p, ok := obj.(*corev1.Pod); ok && Unschedulable(p) {
					n++
				}
			}
			o.Observe(int64(n))
			return nil
		}))
	return err
}

// observeBound records a pod that left the relay's unbound selection
// because it was bound: the watch delivers its bound state, whose
// PodScheduled=True transition is the binding time.
func (r *relay) observeBound(pod *corev1.Pod) {
	since, seen := r.unschedulableSince.LoadAndDelete(pod.UID)
	if pod.Spec.NodeName == "" {
		return // deleted while pending, not bound
	}
	bound := time.Time{}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			bound = c.LastTransitionTime.Time
		}
	}
	if bound.IsZero() {
		bound = r.opts.Clock.Now()
	}
	ctx := context.Background()
	if !pod.CreationTimestamp.IsZero() && !bound.Before(pod.CreationTimestamp.Time) {
		podsBoundDuration.Record(ctx, bound.Sub(pod.CreationTimestamp.Time).Seconds())
	}
	if seen {
		if t := since.(time.Time); !bound.Before(t) {
			podsTimeToCapacity.Record(ctx, bound.Sub(t).Seconds())
		}
	}
}

// pendingSince is when kube-scheduler marked pod Unschedulable (now when
// the condition has no time).
func pendingSince(pod *corev1.Pod, now time.Time) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return now
}
