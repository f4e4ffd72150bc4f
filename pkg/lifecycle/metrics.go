package lifecycle

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
	"github.com/karpfunc/karpfunc/pkg/telemetry"
)

var meter = otel.Meter("github.com/karpfunc/karpfunc/pkg/lifecycle")

// Karpenter's names and labels.
var (
	nodeClaimsTerminated, _ = meter.Int64Counter("karpenter_nodeclaims_terminated_total",
		metric.WithDescription("Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool, capacity type, and zone."))
	nodeClaimsDisrupted, _ = meter.Int64Counter("karpenter_nodeclaims_disrupted_total",
		metric.WithDescription("Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was disrupted and the owning nodepool."))
	cloudProviderErrors, _ = meter.Int64Counter("karpenter_cloudprovider_errors_total",
		metric.WithDescription("Total number of errors returned from CloudProvider calls."))
)

// Disruption reasons of karpenter_nodeclaims_disrupted_total that karpfunc's
// lifecycle writes (the disruption methods add theirs: Empty,
// Underutilized, Drifted).
const (
	DisruptedLiveness     = "liveness"
	DisruptedInterruption = "interruption"
)

func recordTerminated(ctx context.Context, nc *karpv1.NodeClaim) {
	nodeClaimsTerminated.Add(ctx, 1, metric.WithAttributes(attribute.String("nodepool", nc.Labels[karpv1.NodePoolLabelKey]),
		attribute.String("capacity_type", nc.Labels[karpv1.CapacityTypeLabelKey]), attribute.String("zone", nc.Labels[corev1.LabelTopologyZone])))
}

// RecordDisrupted counts nc disrupted for reason (once per NodeClaim: call
// it where the decision is first written).
func RecordDisrupted(ctx context.Context, nc *karpv1.NodeClaim, reason string) {
	nodeClaimsDisrupted.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason),
		attribute.String("nodepool", nc.Labels[karpv1.NodePoolLabelKey]), attribute.String("capacity_type", nc.Labels[karpv1.CapacityTypeLabelKey])))
}

// controllerLabel is the Function a launch runs in ("lifecycle" outside one).
func controllerLabel(ctx context.Context) string {
	if name := telemetry.Controller(ctx); name != "" {
		return name
	}
	return "lifecycle"
}

// recordCreateError counts a failed VM creation by its ARM error code, as
// Karpenter counts CloudProvider.Create errors.
func recordCreateError(ctx context.Context, err error) {
	code := cloudprovider.ErrorCode(err)
	if code == "" && IsInsufficientCapacity(err) {
		code = "InsufficientCapacityError"
	}
	cloudProviderErrors.Add(ctx, 1, metric.WithAttributes(attribute.String("controller", controllerLabel(ctx)),
		attribute.String("method", "Create"), attribute.String("provider", "azure"), attribute.String("error", code)))
}

// CreatedFor is why nc was created, as Karpenter's
// karpenter_nodeclaims_created_total labels it: "provisioning" for pending
// pods, a disruption command's reason in lower case ("underutilized",
// "drifted") for its replacement.
func CreatedFor(nc *karpv1.NodeClaim) string {
	if reason := nc.Annotations[apis.AnnotationDisruptionReason]; reason != "" {
		return strings.ToLower(reason)
	}
	return "provisioning"
}
