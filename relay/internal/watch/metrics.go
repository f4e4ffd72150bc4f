package watch

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

var meter = otel.Meter("github.com/karpfunc/karpfunc/relay/internal/watch")

var (
	// Karpenter's name: pod creation to binding, for every pod the relay
	// sees bound.
	podsBoundDuration, _ = meter.Float64Histogram("karpenter_pods_bound_duration_seconds",
		metric.WithDescription("The time from pod creation until the pod is bound."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(podBuckets...))
	// Karpenter's name: pod creation until it runs (here: leaves phase
	// Pending, as the relay sees it).
	podsStartupDuration, _ = meter.Float64Histogram("karpenter_pods_startup_duration_seconds",
		metric.WithDescription("The time from pod creation until the pod is running."), metric.WithUnit("s"),
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
			count := 0
			for _, obj := range r.pods.GetStore().List() {
				if pod, ok := obj.(*corev1.Pod); ok && Unschedulable(pod) {
					count++
				}
			}
			o.Observe(int64(count))
			return nil
		}))
	return err
}

// The relay's pod informer holds unbound pods only, and a pod leaving that
// selection arrives as a delete carrying its last unbound state: binding
// and deletion look alike there. A second informer holds the pods in phase
// Pending, bound or not, and tells them apart: a pod bound but still
// Pending is in it with its node; a bound pod that leaves it (and was not
// being deleted) has started.

// podProgress is what the relay remembers of a Pending pod.
type podProgress struct {
	bound    bool
	deleting bool
}

// onPendingPod records a pod's binding the first time the relay sees it
// bound.
func (r *relay) onPendingPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	stored, _ := r.progress.LoadOrStore(pod.UID, &podProgress{})
	progress := stored.(*podProgress)
	if pod.DeletionTimestamp != nil {
		progress.deleting = true
	}
	if pod.Spec.NodeName == "" || progress.bound {
		return
	}
	progress.bound = true
	bound := r.opts.Clock.Now()
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue && !cond.LastTransitionTime.IsZero() {
			bound = cond.LastTransitionTime.Time
		}
	}
	ctx := context.Background()
	if !pod.CreationTimestamp.IsZero() && !bound.Before(pod.CreationTimestamp.Time) {
		podsBoundDuration.Record(ctx, bound.Sub(pod.CreationTimestamp.Time).Seconds())
	}
	if since, seen := r.unschedulableSince.LoadAndDelete(pod.UID); seen && !bound.Before(since.(time.Time)) {
		podsTimeToCapacity.Record(ctx, bound.Sub(since.(time.Time)).Seconds())
	}
}

// onPendingPodGone records the startup of a bound pod that left phase
// Pending without being deleted.
func (r *relay) onPendingPodGone(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.unschedulableSince.Delete(pod.UID)
	stored, ok := r.progress.LoadAndDelete(pod.UID)
	if !ok {
		return
	}
	if progress := stored.(*podProgress); progress.bound && !progress.deleting && pod.DeletionTimestamp == nil && !pod.CreationTimestamp.IsZero() {
		podsStartupDuration.Record(context.Background(), r.opts.Clock.Since(pod.CreationTimestamp.Time).Seconds())
	}
}

// pendingSince is when kube-scheduler marked pod Unschedulable (now when
// the condition has no time).
func pendingSince(pod *corev1.Pod, now time.Time) time.Time {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && !cond.LastTransitionTime.IsZero() {
			return cond.LastTransitionTime.Time
		}
	}
	return now
}
