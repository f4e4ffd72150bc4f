package provisioning

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/offerings"
	"github.com/karpfunc/karpfunc/pkg/telemetry"
)

var meter = otel.Meter("github.com/karpfunc/karpfunc/pkg/provisioning")

// durationBuckets are Karpenter's (metrics.DurationBuckets).
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
	1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60, 120, 150, 300, 450, 600}

var (
	// Karpenter's names and labels.
	nodeClaimsCreated, _ = meter.Int64Counter("karpenter_nodeclaims_created_total",
		metric.WithDescription("Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was created, the owning nodepool, and if min values was relaxed for this nodeclaim."))
	schedulingDuration, _ = meter.Float64Histogram("karpenter_scheduler_scheduling_duration_seconds",
		metric.WithDescription("Duration of scheduling simulations used for deprovisioning and provisioning in seconds."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(durationBuckets...))
	queueDepth, _ = meter.Int64Gauge("karpenter_scheduler_queue_depth",
		metric.WithDescription("The number of pods currently waiting to be scheduled."))

	// karpfunc's own.
	pendingToNodeClaim, _ = meter.Float64Histogram("karpfunc_pods_pending_to_nodeclaim_seconds",
		metric.WithDescription("Time from kube-scheduler marking a pod Unschedulable to the NodeClaim karpfunc created for it."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(durationBuckets...))
)

// controllerLabel is the Function a pass runs in ("provisioner" outside one).
func controllerLabel(ctx context.Context) string {
	if name := telemetry.Controller(ctx); name != "" {
		return name
	}
	return "provisioner"
}

// recordPending sets the queue depth every pass, zero included.
func recordPending(ctx context.Context, pending int) {
	queueDepth.Record(ctx, int64(pending), metric.WithAttributes(attribute.String("controller", controllerLabel(ctx))))
}

func recordSolve(ctx context.Context, solve time.Duration) {
	schedulingDuration.Record(ctx, solve.Seconds(), metric.WithAttributes(attribute.String("controller", controllerLabel(ctx))))
}

// recordCreated counts a NodeClaim created and how long its pods waited
// for it.
func recordCreated(ctx context.Context, nc *karpv1.NodeClaim, pods []*corev1.Pod, now time.Time) {
	nodeClaimsCreated.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", lifecycle.CreatedFor(nc)),
		attribute.String("nodepool", nc.Labels[karpv1.NodePoolLabelKey]), attribute.String("min_values_relaxed", "false")))
	for _, pod := range pods {
		if since := pendingSince(pod); !since.IsZero() && !now.Before(since) {
			pendingToNodeClaim.Record(ctx, now.Sub(since).Seconds(),
				metric.WithAttributes(attribute.String("nodepool", nc.Labels[karpv1.NodePoolLabelKey])))
		}
	}
}

var (
	quotaRemaining, _ = meter.Int64Gauge("karpfunc_quota_vcpus_remaining",
		metric.WithDescription("vCPUs the subscription's compute quota leaves in the region after usage and launches in flight, by quota (a VM family, cores for total regional, lowPriorityCores for spot)."))
	quotaLimit, _ = meter.Int64Gauge("karpfunc_quota_vcpus_limit",
		metric.WithDescription("The subscription's compute quota limit in vCPUs, by quota (a VM family, cores, lowPriorityCores)."))
	quotaReadFailures, _ = meter.Int64Counter("karpfunc_quota_read_failures_total",
		metric.WithDescription("Reads of the compute usages API that failed; provisioning then goes on without quota awareness."))
)

// recordHeadroom sets each quota's remaining vCPUs and limit.
func recordHeadroom(ctx context.Context, h *offerings.Headroom) {
	for _, q := range h.Quotas() {
		attrs := metric.WithAttributes(attribute.String("family", q.Quota), attribute.String("region", h.Region()))
		quotaRemaining.Record(ctx, q.Left, attrs)
		quotaLimit.Record(ctx, q.Limit, attrs)
	}
}

func recordQuotaReadFailure(ctx context.Context) { quotaReadFailures.Add(ctx, 1) }
