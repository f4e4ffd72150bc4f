package interruption

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/decisions"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
)

var meter = otel.Meter("github.com/karpfunc/karpfunc/pkg/interruption")

// interruptionNotices is karpfunc's own: every notice handled, by where it
// came from (NodeCondition, EventGrid) and whether it started the
// interruption (first) or found it started (a duplicate).
var interruptionNotices, _ = meter.Int64Counter("karpfunc_interruption_notices_total",
	metric.WithDescription("Spot interruption notices handled, by source and whether the notice started the interruption."))

// recordNotice counts sig; the first notice for a NodeClaim also counts it
// disrupted and records the decision.
func (c *Controller) recordNotice(ctx context.Context, sig Signal, nc *karpv1.NodeClaim, res Result) {
	interruptionNotices.Add(ctx, 1, metric.WithAttributes(attribute.String("source", string(sig.Source)),
		attribute.Bool("first", res.First)))
	if !res.First {
		return
	}
	lifecycle.RecordDisrupted(ctx, nc, lifecycle.DisruptedInterruption)
	c.decisions.Record(ctx, decisions.Record{Decision: decisions.Interruption, Time: c.clock.Now().UTC(),
		Cluster: c.cluster, NodePool: nc.Labels[karpv1.NodePoolLabelKey], NodeClaim: nc.Name,
		Size: nc.Labels[corev1.LabelInstanceTypeStable], Zone: nc.Labels[corev1.LabelTopologyZone],
		CapacityType: nc.Labels[karpv1.CapacityTypeLabelKey], Reason: sig.Detail, Replacements: res.Replacements})
}
