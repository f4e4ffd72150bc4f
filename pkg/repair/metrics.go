package repair

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/utils/pretty"

	"github.com/karpfunc/karpfunc/pkg/lifecycle"
)

var meter = otel.Meter("github.com/karpfunc/karpfunc/pkg/repair")

// Karpenter's name, labels and help (pkg/controllers/node/health/metrics.go).
var unhealthyDisrupted, _ = meter.Int64Counter("karpenter_nodeclaims_unhealthy_disrupted_total",
	metric.WithDescription("Number of unhealthy nodeclaims disrupted in total by Karpenter. Labeled by condition on the node was disrupted, the owning nodepool, and the image ID."))

// DisruptedUnhealthy is the reason label of karpenter_nodeclaims_disrupted_total
// for a repair, Karpenter's metrics.UnhealthyReason.
const DisruptedUnhealthy = "unhealthy"

// recordRepaired counts nc repaired because of condition, in both of
// Karpenter's counters (controller.go:172-184).
func recordRepaired(ctx context.Context, nc *karpv1.NodeClaim, condition corev1.NodeConditionType) {
	lifecycle.RecordDisrupted(ctx, nc, DisruptedUnhealthy)
	unhealthyDisrupted.Add(ctx, 1, metric.WithAttributes(attribute.String("condition", pretty.ToSnakeCase(string(condition))),
		attribute.String("nodepool", nc.Labels[karpv1.NodePoolLabelKey]), attribute.String("capacity_type", nc.Labels[karpv1.CapacityTypeLabelKey]),
		attribute.String("image_id", nc.Status.ImageID)))
}
